package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

func member(name string, state api.MemberState) MemberInfo {
	return MemberInfo{Name: name, Addr: "10.0.0." + string(rune('0'+len(name))), State: state,
		Facts: NodeFacts{BoardFacts: api.BoardFacts{Arch: "arm64", Model: "Pi 4", MemoryBytes: 4 * gib, CPUs: 4}, SSHAddress: "10.0.0.1:22"}}
}

// storedNode is what ReconcileNode would have stored for member m in phase ph.
func storedNode(m MemberInfo, ph api.NodePhase) *api.Node {
	n := readyNode(m.Name, withAddr(m.Addr), withPhase(ph))
	n.Status.SSHAddress = m.Facts.SSHAddress
	return n
}

func TestReconcileNode(t *testing.T) {
	web := deployment("web", 2)
	later := t0.Add(time.Minute)
	tests := []struct {
		name       string
		node       *api.Node // stored; nil for none
		member     MemberInfo
		pods       []*api.Pod
		want       []string
		wantPhase  api.NodePhase
		wantFenced bool
		wantSince  time.Time
		wantLost   []string
		wantCond   string // reason of the Ready condition, if checked
	}{
		{
			name:      "new alive board is created fencing",
			member:    member("a", api.MemberAlive),
			want:      []string{"create nodes/a"},
			wantPhase: api.NodeNotReady, wantSince: later, wantCond: reasonFencing,
		},
		{
			name:   "no node for a dead unknown board",
			member: member("a", api.MemberDead),
		},
		{
			name:      "ready alive board: nothing",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    member("a", api.MemberAlive),
			wantPhase: api.NodeReady, wantFenced: true, wantSince: t0,
		},
		{
			name:      "suspect keeps ready",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    member("a", api.MemberSuspect),
			pods:      []*api.Pod{deployPod(web, "web-1", "a", api.PodRunning)},
			wantPhase: api.NodeReady, wantFenced: true, wantSince: t0,
		},
		{
			name:   "dead: not ready, its live pods lost",
			node:   storedNode(member("a", api.MemberAlive), api.NodeReady),
			member: member("a", api.MemberDead),
			pods: []*api.Pod{
				deployPod(web, "web-1", "a", api.PodRunning),
				deployPod(web, "web-2", "a", api.PodStarting),
				deployPod(web, "web-3", "a", api.PodFailed),
				deployPod(web, "web-4", "b", api.PodRunning),
				deployPod(web, "web-5", "", api.PodPending),
			},
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1", "updateStatus pods/web-2"},
			wantPhase: api.NodeNotReady, wantSince: later, wantLost: []string{"web-1", "web-2"}, wantCond: reasonMemberDead,
		},
		{
			name:      "left",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    member("a", api.MemberLeft),
			pods:      []*api.Pod{deployPod(web, "web-1", "a", api.PodScheduled)},
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeLeft, wantSince: later, wantLost: []string{"web-1"}, wantCond: reasonMemberLeft,
		},
		{
			name:      "unknown to gossip: not ready",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    MemberInfo{},
			want:      []string{"updateStatus nodes/a"},
			wantPhase: api.NodeNotReady, wantSince: later, wantCond: reasonMemberUnknown,
		},
		{
			name:      "left and reaped stays left",
			node:      storedNode(member("a", api.MemberAlive), api.NodeLeft),
			member:    MemberInfo{},
			want:      []string{"updateStatus nodes/a"}, // the Ready condition is added once
			wantPhase: api.NodeLeft, wantSince: t0, wantCond: reasonMemberLeft,
		},
		{
			name:      "returning board fences, since unchanged",
			node:      storedNode(member("a", api.MemberAlive), api.NodeNotReady),
			member:    member("a", api.MemberAlive),
			want:      []string{"updateStatus nodes/a"},
			wantPhase: api.NodeNotReady, wantSince: t0, wantCond: reasonFencing,
		},
		{
			name: "facts change on a ready board",
			node: storedNode(member("a", api.MemberAlive), api.NodeReady),
			member: func() MemberInfo {
				m := member("a", api.MemberAlive)
				m.Facts.Version = "v2"
				return m
			}(),
			want:      []string{"updateStatus nodes/a"},
			wantPhase: api.NodeReady, wantFenced: true, wantSince: t0,
		},
		{
			name: "labels come from gossip",
			node: storedNode(member("a", api.MemberAlive), api.NodeReady),
			member: func() MemberInfo {
				m := member("a", api.MemberAlive)
				m.Facts.Labels = map[string]string{"disk": "ssd"}
				return m
			}(),
			want:      []string{"update nodes/a"},
			wantPhase: api.NodeReady, wantFenced: true, wantSince: t0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.now = later
			if tt.node != nil {
				w.add(tt.node)
			}
			for _, p := range tt.pods {
				w.add(p)
			}
			var node *api.Node
			if tt.node != nil {
				node = w.nodes[tt.node.Metadata.Name]
			}
			acts := ReconcileNode(later, node, tt.member, w.podList())
			if diff := cmp.Diff(tt.want, summary(acts)); diff != "" {
				t.Fatalf("actions (-want +got):\n%s%s", diff, fmtActions(acts))
			}
			w.apply(acts)
			n := w.nodes["a"]
			if n == nil {
				if tt.wantPhase != "" {
					t.Fatal("node a not stored")
				}
				return
			}
			if n.Status.Phase != tt.wantPhase || n.Status.Fenced != tt.wantFenced || !n.Status.Since.Equal(tt.wantSince) {
				t.Errorf("node = phase %s fenced %v since %v; want %s %v %v", n.Status.Phase, n.Status.Fenced, n.Status.Since, tt.wantPhase, tt.wantFenced, tt.wantSince)
			}
			if tt.wantCond != "" {
				if c := api.FindCondition(n.Status.Conditions, api.ConditionReady); c == nil || c.Reason != tt.wantCond {
					t.Errorf("Ready condition = %+v, want reason %s", c, tt.wantCond)
				}
			}
			var lost []string
			for _, p := range w.podList() {
				if p.Status.Phase == api.PodLost {
					lost = append(lost, p.Metadata.Name)
				}
			}
			if diff := cmp.Diff(tt.wantLost, lost); diff != "" {
				t.Errorf("lost pods (-want +got):\n%s", diff)
			}
			// No flapping: once applied, nothing more to do, even later.
			if again := ReconcileNode(later.Add(time.Hour), w.nodes["a"], tt.member, w.podList()); len(again) != 0 {
				t.Errorf("second pass not empty:%s", fmtActions(again))
			}
		})
	}
}

func TestFencing(t *testing.T) {
	w := newWorld(t)
	web := deployment("web", 1)
	m := member("a", api.MemberAlive)
	w.add(storedNode(m, api.NodeReady), deployPod(web, "web-1", "a", api.PodRunning), readyNode("b"),
		deployPod(web, "other", "b", api.PodRunning))

	// The board dies: NotReady, its pod Lost.
	w.now = t0.Add(time.Minute)
	w.apply(ReconcileNode(w.now, w.nodes["a"], member("a", api.MemberDead), w.podList()))
	if got := w.pods["web-1"].Status.Phase; got != api.PodLost {
		t.Fatalf("web-1 = %s, want Lost", got)
	}
	// Its owner deletes the Lost pod (and replaces it elsewhere).
	w.del(api.KindPod, "web-1")

	// It comes back still running the old unit.
	w.now = t0.Add(2 * time.Minute)
	w.apply(ReconcileNode(w.now, w.nodes["a"], m, w.podList()))
	n := w.nodes["a"]
	if n.Status.Phase != api.NodeNotReady || n.Status.Fenced || api.FindCondition(n.Status.Conditions, ConditionFencing) == nil {
		t.Fatalf("returning node = %s fenced=%v conditions %+v; want NotReady, unfenced, Fencing", n.Status.Phase, n.Status.Fenced, n.Status.Conditions)
	}
	staleUnit := UnitObservation{Unit: api.UnitName("web-1"), Found: true, ActiveState: "active", SubState: "running"}
	notHerd := UnitObservation{Unit: "sshd.service", Found: true, ActiveState: "active"}
	gone := UnitObservation{Unit: api.UnitName("old"), Found: false}
	w.apply(ObservedUnits(w.now, w.nodes["a"], w.podList(), []UnitObservation{staleUnit, notHerd, gone}))
	n = w.nodes["a"]
	if n.Status.Phase == api.NodeReady {
		t.Fatal("node Ready while a stale unit runs")
	}
	c := api.FindCondition(n.Status.Conditions, ConditionFencing)
	if c == nil || c.Message != "1 stale units to stop: herd-web-1.service" {
		t.Fatalf("Fencing condition = %+v", c)
	}
	// Nothing flaps while waiting: same observation, and node reconcile.
	if acts := ObservedUnits(w.now, n, w.podList(), []UnitObservation{staleUnit}); len(acts) != 0 {
		t.Errorf("same observation again:%s", fmtActions(acts))
	}
	if acts := ReconcileNode(w.now.Add(time.Second), n, m, w.podList()); len(acts) != 0 {
		t.Errorf("node reconcile while fencing:%s", fmtActions(acts))
	}
	// A unit of a pod the board legitimately runs is not stale: pretend a
	// live pod is bound there.
	legit := deployPod(web, "legit", "a", api.PodScheduled)
	if acts := ObservedUnits(w.now, n, append(w.podList(), legit), []UnitObservation{{Unit: api.UnitName("legit"), Found: true, ActiveState: "active"}}); len(acts) != 1 || acts[0].Object.(*api.Node).Status.Phase != api.NodeReady {
		t.Errorf("legit unit: got%s, want the node Ready", fmtActions(acts))
	}

	// The executor stopped and removed it: Ready and fenced.
	w.now = t0.Add(3 * time.Minute)
	w.apply(ObservedUnits(w.now, w.nodes["a"], w.podList(), nil))
	n = w.nodes["a"]
	if n.Status.Phase != api.NodeReady || !n.Status.Fenced || !n.Status.Since.Equal(w.now) || api.FindCondition(n.Status.Conditions, ConditionFencing) != nil {
		t.Fatalf("after fencing: %s fenced=%v since %v conditions %+v", n.Status.Phase, n.Status.Fenced, n.Status.Since, n.Status.Conditions)
	}
	if acts := ReconcileNode(w.now.Add(time.Second), n, m, w.podList()); len(acts) != 0 {
		t.Errorf("node reconcile after fencing:%s", fmtActions(acts))
	}
	if acts := ObservedUnits(w.now, n, w.podList(), []UnitObservation{staleUnit}); len(acts) != 0 {
		t.Errorf("ObservedUnits on a Ready node:%s", fmtActions(acts))
	}
}

func TestNewNodeFencedBeforeReady(t *testing.T) {
	w := newWorld(t)
	m := member("fresh", api.MemberAlive)
	m.Facts.Labels = map[string]string{"zone": "attic"}
	w.apply(ReconcileNode(t0, nil, m, nil))
	n := w.nodes["fresh"]
	if n == nil || n.Status.Phase != api.NodeNotReady || n.Metadata.Labels["zone"] != "attic" || n.Status.Address != m.Addr {
		t.Fatalf("created node = %+v", n)
	}
	w.apply(ObservedUnits(t0, n, nil, nil))
	if got := w.nodes["fresh"].Status.Phase; got != api.NodeReady {
		t.Errorf("phase after an empty listing = %s, want Ready", got)
	}
}

// TestReconcileNodeBoardFacts: the board facts a new agent gossips land on
// the Node once, and an old agent's (none) leave them empty.
func TestReconcileNodeBoardFacts(t *testing.T) {
	m := member("a", api.MemberAlive)
	node := storedNode(m, api.NodeReady)
	node.Status.Arch, node.Status.Model, node.Status.MemoryBytes, node.Status.CPUs = m.Facts.Arch, m.Facts.Model, m.Facts.MemoryBytes, m.Facts.CPUs
	if acts := ReconcileNode(t0, node, m, nil); len(acts) != 0 {
		t.Fatalf("old agent, facts unchanged: %v", acts)
	}
	m.Facts.ArchVariant, m.Facts.KernelArch, m.Facts.Kernel, m.Facts.Systemd = "arm64", "aarch64", "6.6.51+rpt-rpi-v8", "252.30"
	m.Facts.Cgroup, m.Facts.CgroupControllers = "v2", []string{"cpu", "io", "pids"}
	acts := ReconcileNode(t0, node, m, nil)
	if len(acts) != 1 || acts[0].Type != ActionUpdateStatus || acts[0].Reason != "board facts changed" {
		t.Fatalf("acts = %v, want one status update", acts)
	}
	got := acts[0].Object.(*api.Node).Status
	want := node.Status
	want.ArchVariant, want.KernelArch, want.Kernel, want.Systemd = "arm64", "aarch64", "6.6.51+rpt-rpi-v8", "252.30"
	want.Cgroup, want.CgroupControllers = "v2", []string{"cpu", "io", "pids"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if got.EnforcesMemoryLimits() {
		t.Errorf("a board without the memory controller enforces memory limits?")
	}
	if acts := ReconcileNode(t0, acts[0].Object.(*api.Node), m, nil); len(acts) != 0 {
		t.Errorf("second pass: %v, want nothing", acts)
	}
}

// TestReconcileNodeDevices: a board's devices land on its Node when they
// change (a restarted agent that found a new one), and the Node does not
// share the member's slice.
func TestReconcileNodeDevices(t *testing.T) {
	m := member("a", api.MemberAlive)
	node := storedNode(m, api.NodeReady)
	node.Status.BoardFacts = m.Facts.BoardFacts.Clone()
	for _, tt := range []struct {
		name    string
		devices []string
		update  bool
	}{
		{"none, unchanged", nil, false},
		{"one plugged in", []string{"gpiochip0", "ttyUSB0"}, true},
		{"same again", []string{"gpiochip0", "ttyUSB0"}, false},
		{"one unplugged", []string{"gpiochip0"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m.Facts.Devices = slices.Clone(tt.devices)
			acts := ReconcileNode(t0, node, m, nil)
			if !tt.update {
				if len(acts) != 0 {
					t.Fatalf("acts = %v, want none", acts)
				}
				return
			}
			if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
				t.Fatalf("acts = %v, want one status update", acts)
			}
			node = acts[0].Object.(*api.Node)
			if diff := cmp.Diff(tt.devices, node.Status.Devices); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			m.Facts.Devices[0] = "changed"
			if node.Status.Devices[0] == "changed" {
				t.Error("the Node shares the member's devices slice")
			}
		})
	}
}

// TestNodeReasonsStay: the Ready condition's reasons are stored with each
// node and shown by herdctl, and a new leader reads what an old one wrote
// (a board NotReady for MemberDead keeps its message): they must not change.
func TestNodeReasonsStay(t *testing.T) {
	got := []string{reasonMemberAlive, reasonMemberDead, reasonMemberLeft}
	want := []string{"MemberAlive", "MemberDead", "MemberLeft"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node reasons changed (-want +got):\n%s", diff)
	}
}
