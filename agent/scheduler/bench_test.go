package scheduler

import (
	"fmt"
	"testing"

	"github.com/herd-dev/herd/api"
)

// benchCluster builds nodes Ready boards carrying pods Running pods of
// owners deployments (round robin), each with a memory and CPU request and
// one dynamic port already assigned.
func benchCluster(nodes, pods, owners int) *Snapshot {
	s := &Snapshot{}
	for i := range nodes {
		s.Nodes = append(s.Nodes, node(fmt.Sprintf("board-%03d", i), mem(8*gib), cpus(4), nodeLabels("rack", fmt.Sprint(i%10))))
	}
	for i := range pods {
		o := fmt.Sprintf("app-%03d", i%owners)
		s.Pods = append(s.Pods, pod(fmt.Sprintf("%s-%05d", o, i),
			owner(o), memReq("64M"), cpuReq("5%"),
			ports(api.Port{Name: "http"}), hostPorts(map[string]int{"http": 20000 + i/nodes}),
			on(s.Nodes[i%nodes].Metadata.Name)))
	}
	return s
}

// BenchmarkSchedule500Boards10000Pods places pending pods over 500 boards
// that already carry 10,000 pods: PlaceAll100 places a batch of 100 pods of
// 10 owners (one index build per op), Place1 a single pod.
func BenchmarkSchedule500Boards10000Pods(b *testing.B) {
	snap := benchCluster(500, 10000, 500)
	var pending []*api.Pod
	for i := range 100 {
		o := fmt.Sprintf("new-%d", i%10)
		pending = append(pending, pod(fmt.Sprintf("%s-%03d", o, i), owner(o), memReq("128M"), cpuReq("10%"),
			ports(api.Port{Name: "http"}), selector("rack", fmt.Sprint(i%5))))
	}
	b.Run("PlaceAll100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, pl := range PlaceAll(snap, pending) {
				if pl.Err != nil {
					b.Fatal(pl.Err)
				}
			}
		}
	})
	b.Run("Place1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Place(snap, pending[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
