package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// BenchmarkSnapshotAfterOneWrite is what every status write costs the next
// reconcile or placer pass on a fleet of 100 boards and 2,000 pods: one pod
// changes, the snapshot is read again.
func BenchmarkSnapshotAfterOneWrite(b *testing.B) {
	rc := raftstore.NewTestCluster(b, 1)
	st := rc.Stores[rc.Leader()]
	s := &clusterState{store: st, gossip: nil}
	s.gen.Store(1)
	var ops []raftstore.Op
	flush := func() {
		if _, err := st.Txn(context.Background(), ops); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	add := func(o api.Object) {
		raw, err := api.ToRaw(o)
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, raftstore.Op{Type: raftstore.OpCreate, Object: raw})
		if len(ops) == 100 {
			flush()
		}
	}
	for i := range 100 {
		add(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: fmt.Sprintf("b%d", i)}})
	}
	dep := testDeployment(2000, api.PodTemplate{Exec: []string{"/bin/true"}})
	add(dep)
	for i := range 2000 {
		add(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}},
			Spec: api.PodSpec{Node: fmt.Sprintf("b%d", i%100), Template: dep.Spec.Template}})
	}
	flush()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		raw, err := st.Get(api.KindPod, "web-7")
		if err != nil {
			b.Fatal(err)
		}
		raw.Metadata.Labels["round"] = fmt.Sprint(i)
		if _, err := st.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}); err != nil {
			b.Fatal(err)
		}
		s.gen.Add(1)
		b.StartTimer()
		if _, err := s.snapshotObjects(); err != nil {
			b.Fatal(err)
		}
	}
}
