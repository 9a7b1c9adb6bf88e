package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

func TestSchedulePending(t *testing.T) {
	w := newWorld(t)
	w.add(readyNode("a", withAddr("192.168.1.10")), readyNode("b", withAddr("192.168.1.11"), withPhase(api.NodeNotReady)))
	web := deployment("web", 3)
	web.Spec.Template.Ports = []api.Port{{Name: "http", Port: 8080}}
	// Created out of name order: the older pod wins the port.
	p2 := deployPod(web, "web-2", "", api.PodPending)
	p2.Metadata.Created = t0.Add(time.Second)
	p1 := deployPod(web, "web-1", "", api.PodPending)
	p1.Metadata.Created = t0.Add(2 * time.Second)
	running := deployPod(deployment("db", 1), "db-1", "a", api.PodRunning)
	w.add(p1, p2, running)

	acts := SchedulePending(t0, w.snapshot(), w.podList())
	if diff := cmp.Diff([]string{"bind pods/web-2", "updateStatus pods/web-1"}, summary(acts)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s%s", diff, fmtActions(acts))
	}
	w.apply(acts)
	bound := w.pods["web-2"]
	if bound.Spec.Node != "a" || bound.Status.Phase != api.PodScheduled || bound.Status.IP != "192.168.1.10" ||
		!cmp.Equal(bound.Spec.HostPorts, map[string]int{"http": 8080}) {
		t.Errorf("bound pod: node %q phase %s ip %q ports %v", bound.Spec.Node, bound.Status.Phase, bound.Status.IP, bound.Spec.HostPorts)
	}
	if c := api.FindCondition(bound.Status.Conditions, api.ConditionScheduled); c == nil || c.Status != api.ConditionTrue {
		t.Errorf("Scheduled condition = %+v", c)
	}
	c := api.FindCondition(w.pods["web-1"].Status.Conditions, api.ConditionScheduled)
	if c == nil || c.Status != api.ConditionFalse || c.Message != "0/2 boards: 1 not ready, 1 port 8080 in use" || !c.LastTransitionTime.Equal(t0) {
		t.Errorf("unschedulable condition = %+v", c)
	}
	// Same explanation: nothing written.
	if again := SchedulePending(t0.Add(time.Minute), w.snapshot(), w.podList()); len(again) != 0 {
		t.Errorf("second pass not empty:%s", fmtActions(again))
	}
	// A different explanation is written, keeping the transition time.
	nb := *w.nodes["b"]
	nb.Status.Phase = api.NodeReady
	nb.Spec.Unschedulable = true
	w.put(&nb)
	acts = SchedulePending(t0.Add(2*time.Minute), w.snapshot(), w.podList())
	w.apply(acts)
	c = api.FindCondition(w.pods["web-1"].Status.Conditions, api.ConditionScheduled)
	if len(acts) != 1 || c.Message != "0/2 boards: 1 cordoned, 1 port 8080 in use" || !c.LastTransitionTime.Equal(t0) {
		t.Errorf("changed explanation: %s, condition %+v", fmtActions(acts), c)
	}
}

func TestSchedulePendingPinnedAndDynamic(t *testing.T) {
	w := newWorld(t)
	w.add(readyNode("a"), readyNode("b"))
	ds := exporter()
	ds.Spec.Template.Ports = []api.Port{{Name: "metrics"}}
	pa, pb := daemonPod(ds, "a", api.PodPending), daemonPod(ds, "b", api.PodPending)
	pa.Spec.HostPorts, pb.Spec.HostPorts = nil, nil
	w.add(pa, pb)
	acts := SchedulePending(t0, w.snapshot(), w.podList())
	w.apply(acts)
	for _, n := range []string{"a", "b"} {
		p := w.pods["exp-"+n]
		if p.Spec.Node != n || p.Status.Phase != api.PodScheduled || p.Spec.HostPorts["metrics"] < scheduler.DefaultPortMin {
			t.Errorf("pinned pod on %s: node %q phase %s ports %v", n, p.Spec.Node, p.Status.Phase, p.Spec.HostPorts)
		}
	}
}

func TestReconcileService(t *testing.T) {
	w := newWorld(t)
	w.add(readyNode("a", withAddr("10.1.0.1")), readyNode("b", withAddr("10.1.0.2")), readyNode("down", withAddr("10.1.0.3"), withPhase(api.NodeNotReady)))
	web := deployment("web", 3)
	web.Spec.Template.Ports = []api.Port{{Name: "http", Port: 0}, {Name: "admin", Port: 9000}}
	mk := func(name, node string, ph api.PodPhase, ready bool, http int) *api.Pod {
		p := deployPod(web, name, node, ph)
		p.Status.Ready = ready
		p.Spec.HostPorts = map[string]int{"http": http, "admin": 9000}
		return p
	}
	w.add(
		mk("web-b", "b", api.PodRunning, true, 20002),
		mk("web-a", "a", api.PodRunning, true, 20001),
		mk("web-unready", "a", api.PodRunning, false, 20003),
		mk("web-starting", "b", api.PodStarting, false, 20004),
		mk("web-on-down", "down", api.PodRunning, true, 20005),
		deployPod(deployment("db", 1), "db-1", "a", api.PodRunning),
	)
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Target: "http"}, {Name: "adm", Target: "9000"}, {Name: "none", Target: "nope"}}}}
	w.add(svc)

	acts := ReconcileService(t0, w.services["web"], w.podList(), w.nodeList())
	if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
		t.Fatalf("want one status update, got%s", fmtActions(acts))
	}
	w.apply(acts)
	want := []api.Endpoint{
		{Port: "adm", Pod: "web-a", Node: "a", Address: "10.1.0.1:9000"},
		{Port: "adm", Pod: "web-b", Node: "b", Address: "10.1.0.2:9000"},
		{Port: "http", Pod: "web-a", Node: "a", Address: "10.1.0.1:20001"},
		{Port: "http", Pod: "web-b", Node: "b", Address: "10.1.0.2:20002"},
	}
	if diff := cmp.Diff(want, w.services["web"].Status.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if again := ReconcileService(t0, w.services["web"], w.podList(), w.nodeList()); len(again) != 0 {
		t.Errorf("second pass not empty:%s", fmtActions(again))
	}
	// The pods go away: endpoints emptied once.
	for _, n := range []string{"web-a", "web-b"} {
		w.del(api.KindPod, n)
	}
	acts = ReconcileService(t0, w.services["web"], w.podList(), w.nodeList())
	w.apply(acts)
	if len(acts) != 1 || len(w.services["web"].Status.Endpoints) != 0 {
		t.Errorf("emptying: %s → %v", fmtActions(acts), w.services["web"].Status.Endpoints)
	}
	if again := ReconcileService(t0, w.services["web"], w.podList(), w.nodeList()); len(again) != 0 {
		t.Errorf("second pass not empty:%s", fmtActions(again))
	}
	// An empty selector selects nothing.
	empty := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "e"}, Spec: api.ServiceSpec{Ports: []api.ServicePort{{Target: "http"}}}}
	if acts := ReconcileService(t0, empty, w.podList(), w.nodeList()); len(acts) != 0 {
		t.Errorf("empty selector:%s", fmtActions(acts))
	}
}

// messyWorld is a cluster in the middle of things: a dead board with
// pods, a returning board, pending pods, a rollout, a daemon, services.
func messyWorld(t testing.TB) *world {
	w := newWorld(t)
	w.add(readyNode("a"), readyNode("b"), readyNode("c", withLabels("disk", "ssd")),
		readyNode("dead"), readyNode("back", withPhase(api.NodeNotReady)))
	for _, n := range []string{"a", "b", "c"} {
		w.members[n] = MemberInfo{Name: n, Addr: w.nodes[n].Status.Address, State: api.MemberAlive,
			Facts: NodeFacts{BoardFacts: api.BoardFacts{Arch: "arm64", Model: "Pi 4", MemoryBytes: 4 * gib, CPUs: 4}, Labels: w.nodes[n].Metadata.Labels}}
	}
	w.members["dead"] = MemberInfo{Name: "dead", State: api.MemberDead}
	facts := NodeFacts{BoardFacts: api.BoardFacts{Arch: "arm64", MemoryBytes: 2 * gib, CPUs: 4}}
	w.members["back"] = MemberInfo{Name: "back", Addr: "10.0.0.9", State: api.MemberAlive, Facts: facts}
	w.members["new"] = MemberInfo{Name: "new", Addr: "10.0.0.10", State: api.MemberAlive, Facts: facts}

	web := deployment("web", 4, strategy(1, 1))
	w.add(web)
	for i, n := range []string{"a", "b", "dead", "c"} {
		w.add(deployPod(web, fmt.Sprintf("web-%d", i), n, api.PodRunning))
	}
	w.add(deployPod(web, "web-lost", "dead", api.PodLost))
	db := deployment("db", 2)
	db.Spec.Template.NodeSelector = map[string]string{"disk": "ssd"}
	w.add(db, deployPod(db, "db-1", "", api.PodPending), deployPod(db, "db-gone", "gone", api.PodRunning))
	// web's template changes: a rollout is due.
	nw := *w.deployments["web"]
	nw.Spec.Template = nw.Spec.Template.DeepCopy()
	nw.Spec.Template.Env = map[string]string{"V": "2"}
	w.put(&nw)

	ds := exporter()
	w.add(ds, daemonPod(ds, "a", api.PodRunning), daemonPod(ds, "dead", api.PodRunning))
	w.add(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Target: "http"}}}})
	w.add(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "exp"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "exporter"}, Ports: []api.ServicePort{{Target: "metrics"}}}})
	return w
}

// TestNoFlapping checks, for every key of a cluster in the middle of
// things, that applying the key's actions and reconciling it again yields
// nothing.
func TestNoFlapping(t *testing.T) {
	keys := NewIndex(messyWorld(t).cluster()).Keys()
	if len(keys) < 10 {
		t.Fatalf("too few keys: %v", keys)
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			w := messyWorld(t)
			cfg := scheduler.DefaultConfig()
			acts := NewIndex(w.cluster()).Reconcile(t0, cfg, key)
			w.apply(acts)
			if again := NewIndex(w.cluster()).Reconcile(t0.Add(time.Minute), cfg, key); len(again) != 0 {
				t.Errorf("after%s\nsecond pass:%s", fmtActions(acts), fmtActions(again))
			}
		})
	}
}

// TestReconcileAllConverges runs full passes over a cluster in the middle
// of things, playing the executor in between, until nothing is left to do.
func TestReconcileAllConverges(t *testing.T) {
	w := messyWorld(t)
	cfg := scheduler.DefaultConfig()
	for pass := 0; ; pass++ {
		if pass > 30 {
			t.Fatal("no fixed point after 30 passes")
		}
		w.now = w.now.Add(time.Second)
		acts := ReconcileAll(w.now, cfg, w.cluster())
		w.apply(acts)
		// The executor fences returning boards and starts what is placed.
		for _, n := range w.nodeList() {
			w.apply(ObservedUnits(w.now, n, w.podList(), nil))
		}
		if len(acts) == 0 && w.runPods(-1) == 0 {
			break
		}
	}
	if st := w.deployments["web"].Status; st.AvailableReplicas != 4 || st.UpdatedReplicas != 4 || st.Replicas != 4 {
		t.Errorf("web status %+v", st)
	}
	for _, p := range w.podList() {
		if p.Spec.Node == "dead" {
			t.Errorf("pod %s still on the dead board", p.Metadata.Name)
		}
	}
	if n := w.nodes["new"]; n == nil || n.Status.Phase != api.NodeReady {
		t.Errorf("new board not Ready: %+v", n)
	}
	if st := w.daemons["exp"].Status; st.Ready != 5 {
		t.Errorf("daemon status %+v, want 5 ready (a, b, c, back, new)", st)
	}
	if got := len(w.services["web"].Status.Endpoints); got != 4 {
		t.Errorf("web endpoints = %d, want 4", got)
	}
	if p := w.pods["db-1"]; p == nil || p.Spec.Node != "c" {
		t.Errorf("db-1 = %+v, want on c (disk=ssd)", p)
	}
	if p := w.pods["db-gone"]; p != nil {
		t.Errorf("db-gone on a deleted board survived: %+v", p.Status)
	}
	if st := w.deployments["db"].Status; st.AvailableReplicas != 2 {
		t.Errorf("db status %+v", st)
	}
}
