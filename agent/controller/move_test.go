package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

// bigNode is a Ready board with room for many pods.
func bigNode(name string) *api.Node {
	return readyNode(name, func(n *api.Node) { n.Status.MemoryBytes = 64 * gib; n.Status.CPUs = 64 })
}

// drainNode returns n cordoned with a drain request.
func drainNode(n *api.Node, daemons bool) *api.Node {
	nn := *n
	nn.Spec.Unschedulable = true
	nn.Spec.Drain = &api.NodeDrain{Daemons: daemons, Requested: t0}
	return &nn
}

// converge runs the deployment "web", the daemons and the scheduler until
// nothing changes, the boards starting at most startPerStep pods a step
// (-1: all). Each step checks that a second reconcile of the same state
// has nothing to do (no flapping). It fails the test after 80 steps.
func converge(t *testing.T, w *world, startPerStep int) {
	t.Helper()
	for step := 0; ; step++ {
		if step > 80 {
			t.Fatalf("did not converge: %+v\npods: %v", w.deployments["web"].Status, podLines(w))
		}
		w.now = w.now.Add(time.Second)
		var acts []Action
		if d := w.deployments["web"]; d != nil {
			acts = ReconcileDeployment(w.now, d, w.podList(), w.nodeList())
			w.apply(acts)
			if again := ReconcileDeployment(w.now, w.deployments["web"], w.podList(), w.nodeList()); len(again) != 0 {
				t.Fatalf("step %d: second pass not empty:%s\nafter:%s", step, fmtActions(again), fmtActions(acts))
			}
		}
		for _, ds := range sortedValues(w.daemons) {
			da := ReconcileDaemon(w.now, ds, w.podList(), w.nodeList())
			w.apply(da)
			acts = append(acts, da...)
		}
		sched := SchedulePending(w.now, w.snapshot(), w.podList())
		w.apply(sched)
		started := w.runPods(startPerStep)
		if len(acts) == 0 && len(sched) == 0 && started == 0 {
			return
		}
	}
}

func podLines(w *world) []string {
	var out []string
	for _, p := range w.podList() {
		out = append(out, fmt.Sprintf("%s@%s:%s/%v<-%s", p.Metadata.Name, p.Spec.Node, p.Status.Phase, p.Status.Ready, p.Spec.Replaces))
	}
	return out
}

// webCounts returns the live pods of "web" per board.
func webCounts(w *world) map[string]int {
	out := map[string]int{}
	for _, p := range w.owned(api.KindDeployment, "web") {
		if !p.Status.Phase.Terminal() {
			out[p.Spec.Node]++
		}
	}
	return out
}

// floorCheck fails the test when, after any single write, fewer than
// replicas - unavail pods of "web" are available or more than replicas +
// surge exist.
func floorCheck(t *testing.T, w *world, replicas, surge, unavail int) func(Action) {
	return func(a Action) {
		total, avail := 0, 0
		for _, p := range w.owned(api.KindDeployment, "web") {
			if p.Status.Phase.Terminal() {
				continue
			}
			total++
			if available(p, w.nodes) {
				avail++
			}
		}
		if avail < replicas-unavail {
			t.Fatalf("after %v: %d available, fewer than %d-%d\n%v", a, avail, replicas, unavail, podLines(w))
		}
		if total > replicas+surge {
			t.Fatalf("after %v: %d pods, more than %d+%d", a, total, replicas, surge)
		}
	}
}

func TestDrainKeepsAvailability(t *testing.T) {
	for _, tc := range []struct{ replicas, surge, unavail, startPerStep int }{
		{5, 1, 0, -1}, {5, 1, 0, 1}, {5, 0, 1, -1}, {5, 0, 2, 1}, {5, 2, 1, 1}, {5, 1, 1, 0}, {2, 1, 0, -1}, {1, 1, 0, -1},
	} {
		t.Run(fmt.Sprintf("replicas=%d surge=%d unavailable=%d start=%d", tc.replicas, tc.surge, tc.unavail, tc.startPerStep), func(t *testing.T) {
			w := newWorld(t)
			w.add(bigNode("b1"), bigNode("b2"), bigNode("b3"))
			w.add(deployment("web", tc.replicas, strategy(tc.surge, tc.unavail)))
			converge(t, w, -1)
			before := webCounts(w)
			if before["b1"] == 0 {
				t.Fatalf("no pod on b1 to drain: %v", before)
			}

			w.update(drainNode(w.nodes["b1"], false))
			// A surge move keeps every replica available (the old pod
			// stops only once its replacement is ready); without surge,
			// max_unavailable is the bound.
			floor := 0
			if tc.surge == 0 {
				floor = tc.unavail
			}
			w.afterEach = floorCheck(t, w, tc.replicas, min(tc.surge, 1), floor)
			start := tc.startPerStep
			if start == 0 {
				// Boards that start nothing stall the drain within the
				// bounds; then let them go.
				converge(t, w, 0)
				if left := api.DrainLeft(w.nodes["b1"], w.podList()); len(left) == 0 {
					t.Fatalf("drained although no replacement started")
				}
				start = -1
			}
			converge(t, w, start)
			w.afterEach = nil

			if left := api.DrainLeft(w.nodes["b1"], w.podList()); len(left) != 0 {
				t.Fatalf("left on b1: %v", podLines(w))
			}
			st := w.deployments["web"].Status
			if st.AvailableReplicas != tc.replicas || st.Replicas != tc.replicas {
				t.Errorf("status after the drain: %+v", st)
			}
			if c := api.FindCondition(st.Conditions, api.ConditionProgressing); c == nil || c.Reason != reasonRolloutComplete {
				t.Errorf("Progressing after the drain: %+v", c)
			}
			moved := 0
			for _, p := range w.owned(api.KindDeployment, "web") {
				if p.Spec.Replaces != "" {
					moved++
				}
			}
			if moved != before["b1"] {
				t.Errorf("%d replacements, want one per pod that was on b1 (%d)", moved, before["b1"])
			}
		})
	}
}

func TestDrainDaemons(t *testing.T) {
	w := newWorld(t)
	w.add(bigNode("b1"), bigNode("b2"))
	tmpl := webTemplate()
	tmpl.Labels = map[string]string{"app": "exp"}
	w.add(&api.Daemon{Kind: api.KindDaemon, Metadata: api.ObjectMeta{Name: "exp"}, Spec: api.DaemonSpec{Template: tmpl}})
	converge(t, w, -1)
	onB1 := func() int {
		n := 0
		for _, p := range w.owned(api.KindDaemon, "exp") {
			if p.Spec.Node == "b1" {
				n++
			}
		}
		return n
	}
	if onB1() != 1 {
		t.Fatalf("daemon pods on b1: %d", onB1())
	}

	w.update(drainNode(w.nodes["b1"], false))
	converge(t, w, -1)
	if onB1() != 1 {
		t.Fatalf("a drain without --daemons stopped the daemon's pod")
	}
	if left := api.DrainLeft(w.nodes["b1"], w.podList()); len(left) != 0 {
		t.Fatalf("drain without daemons not done: %v", podLines(w))
	}

	w.update(drainNode(w.nodes["b1"], true))
	converge(t, w, -1)
	if onB1() != 0 {
		t.Fatalf("drain --daemons kept the daemon's pod: %v", podLines(w))
	}
	if left := api.DrainLeft(w.nodes["b1"], w.podList()); len(left) != 0 {
		t.Fatalf("drain with daemons not done: %v", podLines(w))
	}

	// Uncordon: the daemon comes back.
	n := *w.nodes["b1"]
	n.Spec = api.NodeSpec{}
	w.update(&n)
	converge(t, w, -1)
	if onB1() != 1 {
		t.Fatalf("after uncordon, daemon pods on b1: %d", onB1())
	}
}

// TestDrainWithdrawnCancelsPendingReplacement: with no room elsewhere the
// replacement stays Pending (the drain waits, saying why); withdrawing the
// drain deletes it and leaves the pods as they were.
func TestDrainWithdrawnCancelsPendingReplacement(t *testing.T) {
	w := newWorld(t)
	w.add(bigNode("b1"), bigNode("b2"))
	w.add(deployment("web", 2))
	converge(t, w, -1)
	// b2 is cordoned: nowhere for a replacement.
	w.update(drainNode(w.nodes["b1"], false))
	b2 := *w.nodes["b2"]
	b2.Spec.Unschedulable = true
	w.update(&b2)
	converge(t, w, -1)
	var pending *api.Pod
	for _, p := range w.owned(api.KindDeployment, "web") {
		if p.Spec.Replaces != "" {
			pending = p
		}
	}
	if pending == nil || pending.Status.Phase != api.PodPending {
		t.Fatalf("want a Pending replacement: %v", podLines(w))
	}
	c := api.FindCondition(w.deployments["web"].Status.Conditions, api.ConditionProgressing)
	if c == nil || c.Reason != reasonMoving || !strings.Contains(c.Message, "cordoned") {
		t.Errorf("Progressing while stuck: %+v", c)
	}

	n := *w.nodes["b1"]
	n.Spec.Drain = nil
	w.update(&n)
	converge(t, w, -1)
	if w.pods[pending.Metadata.Name] != nil {
		t.Fatalf("replacement %s not cancelled: %v", pending.Metadata.Name, podLines(w))
	}
	if got := len(w.owned(api.KindDeployment, "web")); got != 2 {
		t.Errorf("%d pods after the cancel, want 2: %v", got, podLines(w))
	}
}

// rebalanceWorld is three boards, b3 away while six pods were placed
// (3 on b1, 3 on b2), then back.
func rebalanceWorld(t *testing.T, surge, unavail int) *world {
	w := newWorld(t)
	w.add(bigNode("b1"), bigNode("b2"), readyNode("b3", withPhase(api.NodeNotReady), func(n *api.Node) {
		n.Status.MemoryBytes = 64 * gib
		n.Status.CPUs = 64
	}))
	w.add(deployment("web", 6, strategy(surge, unavail)))
	converge(t, w, -1)
	back := *w.nodes["b3"]
	back.Status.Phase, back.Status.Fenced = api.NodeReady, true
	w.update(&back)
	converge(t, w, -1)
	if c := webCounts(w); c["b1"] != 3 || c["b2"] != 3 || c["b3"] != 0 {
		t.Fatalf("pods were moved back on their own: %v", c)
	}
	return w
}

func requestRebalance(w *world, id string) {
	d := *w.deployments["web"]
	d.Spec.Rebalance = &api.RebalanceRequest{ID: id, Requested: t0}
	w.update(&d)
}

func TestRebalanceRestoresSpread(t *testing.T) {
	for _, tc := range []struct{ surge, unavail, startPerStep int }{{1, 0, -1}, {1, 0, 1}, {0, 1, 1}, {2, 2, -1}} {
		t.Run(fmt.Sprintf("surge=%d unavailable=%d start=%d", tc.surge, tc.unavail, tc.startPerStep), func(t *testing.T) {
			w := rebalanceWorld(t, tc.surge, tc.unavail)
			rev := w.deployments["web"].Status.Revision
			requestRebalance(w, "r1")
			w.afterEach = floorCheck(t, w, 6, min(tc.surge, 1), min(tc.unavail, 1))
			converge(t, w, tc.startPerStep)
			w.afterEach = nil
			if c := webCounts(w); c["b1"] != 2 || c["b2"] != 2 || c["b3"] != 2 {
				t.Fatalf("spread after rebalance: %v", c)
			}
			st := w.deployments["web"].Status
			if st.Rebalance == nil || st.Rebalance.ID != "r1" || !st.Rebalance.Done || st.Rebalance.Message != "spread over b1=2 b2=2 b3=2" {
				t.Errorf("rebalance status: %+v", st.Rebalance)
			}
			if st.Revision != rev {
				t.Errorf("rebalance changed the revision: %s -> %s", rev, st.Revision)
			}
			if w.deployments["web"].RebalancePending() {
				t.Error("still pending")
			}
			// Done stays done: a board lost and back later is not spread
			// again without a new request.
			b3 := *w.nodes["b3"]
			b3.Status.Phase = api.NodeNotReady
			w.update(&b3)
			for _, p := range w.owned(api.KindDeployment, "web") {
				if p.Spec.Node == "b3" {
					lost := *p
					lost.Status.Phase = api.PodLost
					w.update(&lost)
				}
			}
			converge(t, w, -1)
			b3 = *w.nodes["b3"]
			b3.Status.Phase = api.NodeReady
			w.update(&b3)
			converge(t, w, -1)
			if c := webCounts(w); c["b3"] != 0 {
				t.Errorf("moved without a request: %v", c)
			}
		})
	}
}

// TestRebalanceStopsWhenBoardCannotTake: a board that cannot take the
// pod (here: too little memory) ends the rebalance with the reason
// instead of leaving a replacement Pending for ever.
func TestRebalanceStopsWhenBoardCannotTake(t *testing.T) {
	w := newWorld(t)
	w.add(bigNode("b1"), readyNode("b2", func(n *api.Node) { n.Status.MemoryBytes = 1 << 20 }))
	w.add(deployment("web", 2))
	converge(t, w, -1)
	if c := webCounts(w); c["b1"] != 2 {
		t.Fatalf("setup: %v", c)
	}
	requestRebalance(w, "r1")
	converge(t, w, -1)
	st := w.deployments["web"].Status.Rebalance
	if st == nil || !st.Done || !strings.Contains(st.Message, "cannot move to b2") || !strings.Contains(st.Message, "insufficient memory") {
		t.Fatalf("rebalance status: %+v", st)
	}
	if c := webCounts(w); c["b1"] != 2 || len(w.owned(api.KindDeployment, "web")) != 2 {
		t.Errorf("pods after a stopped rebalance: %v", podLines(w))
	}
}

// TestMoveContinuesAfterLeaderChange: a move in flight is in the store
// (spec.replaces), so a fresh reconcile, as a new leader makes, carries it
// on rather than starting another.
func TestMoveContinuesAfterLeaderChange(t *testing.T) {
	w := newWorld(t)
	w.add(bigNode("b1"), bigNode("b2"), bigNode("b3"))
	w.add(deployment("web", 3))
	converge(t, w, -1)
	w.update(drainNode(w.nodes["b1"], false))
	w.apply(ReconcileDeployment(w.now, w.deployments["web"], w.podList(), w.nodeList()))
	w.apply(SchedulePending(w.now, w.snapshot(), w.podList()))
	// The leader dies here. The next one reconciles from the store alone,
	// through the index as the runner does.
	acts := NewIndex(w.cluster()).Reconcile(w.now, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web"))
	for _, a := range acts {
		if a.Type == ActionCreate {
			t.Fatalf("a new leader started a second move: %v", a)
		}
	}
	w.apply(acts)
	converge(t, w, -1)
	if c := webCounts(w); c["b1"] != 0 || len(w.owned(api.KindDeployment, "web")) != 3 {
		t.Fatalf("after the drain: %v", podLines(w))
	}
}
