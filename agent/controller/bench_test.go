package controller

import (
	"fmt"
	"testing"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

// benchWorld is a settled cluster of nodes boards running 400 deployments
// of 20 replicas and 4 daemons (10,000 pods on 500 boards), with 200
// services, plus one deployment just scaled from 0 to 100 whose pods are
// Pending.
func benchWorld(b *testing.B, nodes int) *Cluster {
	w := newWorld(b)
	for i := range nodes {
		n := readyNode(fmt.Sprintf("board-%03d", i), withAddr(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)),
			withLabels("rack", fmt.Sprint(i%10)))
		n.Status.MemoryBytes = 8 * gib
		w.add(n)
		w.members[n.Metadata.Name] = MemberInfo{Name: n.Metadata.Name, Addr: n.Status.Address, State: api.MemberAlive,
			Facts: NodeFacts{BoardFacts: api.BoardFacts{Arch: "arm64", Model: "Pi 4", MemoryBytes: 8 * gib, CPUs: 4}, Labels: n.Metadata.Labels}}
	}
	nodeNames := make([]string, 0, nodes)
	for _, n := range w.nodeList() {
		nodeNames = append(nodeNames, n.Metadata.Name)
	}
	k := 0
	for i := range 400 {
		d := deployment(fmt.Sprintf("app-%03d", i), 20)
		d.Spec.Template.Resources = api.Resources{MemoryRequest: "32M", CPURequest: "2%"}
		w.add(d)
		for j := range 20 {
			p := deployPod(d, fmt.Sprintf("%s-%05d", d.Metadata.Name, j), nodeNames[k%nodes], api.PodRunning)
			p.Spec.HostPorts = map[string]int{"http": 20000 + k/nodes}
			w.add(p)
			k++
		}
		if i%2 == 0 {
			w.add(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: d.Metadata.Name},
				Spec: api.ServiceSpec{Selector: map[string]string{"app": d.Metadata.Name}, Ports: []api.ServicePort{{Target: "http"}}}})
		}
	}
	for i := range 4 {
		ds := exporter()
		ds.Metadata.Name = fmt.Sprintf("agent-%d", i)
		ds.Spec.Template.Ports = []api.Port{{Name: "metrics", Port: 9100 + i}}
		ds.Spec.Template.Resources = api.Resources{MemoryRequest: "16M", CPURequest: "1%"}
		w.add(ds)
		for _, n := range nodeNames {
			w.add(daemonPod(ds, n, api.PodRunning))
		}
	}
	// Settle statuses.
	cfg := scheduler.DefaultConfig()
	for range 3 {
		w.apply(ReconcileAll(w.now, cfg, w.cluster()))
	}
	if acts := ReconcileAll(w.now, cfg, w.cluster()); len(acts) != 0 {
		b.Fatalf("bench world not settled:%s", fmtActions(acts[:min(5, len(acts))]))
	}
	burst := deployment("burst", 100)
	burst.Spec.Template.NodeSelector = map[string]string{"rack": "3"}
	w.add(burst)
	w.apply(ReconcileAll(w.now, cfg, w.cluster()))
	return w.cluster()
}

// BenchmarkReconcile500Boards10000Pods is one full pass (ReconcileAll):
// 500 nodes, 401 deployments, 4 daemons, 200 services and the scheduling
// of 100 pending pods over 10,000 placed ones. Budget: 100 ms.
func BenchmarkReconcile500Boards10000Pods(b *testing.B) {
	c := benchWorld(b, 500)
	if len(c.Pods) != 10100 {
		b.Fatalf("%d pods", len(c.Pods))
	}
	cfg := scheduler.DefaultConfig()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		acts := ReconcileAll(t0, cfg, c)
		if len(acts) != 100 {
			b.Fatalf("%d actions, want 100 binds", len(acts))
		}
	}
}
