package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var moveT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// spreadPods makes pods from "board:name[:notready]" specs, each created a
// second after the one before.
func spreadPods(specs ...string) []*Pod {
	var out []*Pod
	for i, s := range specs {
		parts := strings.Split(s, ":")
		p := &Pod{Kind: KindPod, Metadata: ObjectMeta{Name: parts[1], Created: moveT0.Add(time.Duration(i) * time.Second)},
			Spec:   PodSpec{Node: parts[0], Owner: OwnerRef{Kind: KindDeployment, Name: "web"}},
			Status: PodStatus{Phase: PodRunning, Ready: true}}
		if len(parts) > 2 {
			p.Status.Ready = false
		}
		out = append(out, p)
	}
	return out
}

func TestPlanSpread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		boards []string
		pods   []*Pod
		want   []Move
	}{
		{name: "no boards", boards: nil, pods: spreadPods("b1:a"), want: nil},
		{name: "even already", boards: []string{"b1", "b2", "b3"}, pods: spreadPods("b1:a", "b2:b", "b3:c"), want: nil},
		{name: "off by one is spread", boards: []string{"b1", "b2", "b3"}, pods: spreadPods("b1:a", "b1:b", "b2:c", "b3:d"), want: nil},
		{name: "board came back empty", boards: []string{"b1", "b2", "b3"}, pods: spreadPods("b1:a", "b1:b", "b2:c"),
			want: []Move{{Pod: "b", From: "b1", To: "b3"}}},
		{name: "all on one of four", boards: []string{"b1", "b2", "b3", "b4"}, pods: spreadPods("b1:a", "b1:b", "b1:c", "b1:d"),
			// the newest leave first, each to the emptiest board (then by name)
			want: []Move{{Pod: "d", From: "b1", To: "b2"}, {Pod: "c", From: "b1", To: "b3"}, {Pod: "b", From: "b1", To: "b4"}}},
		{name: "the extra pods stay on the fullest boards", boards: []string{"b1", "b2", "b3"},
			pods: spreadPods("b1:a", "b1:b", "b1:c", "b2:d", "b2:e", "b2:f", "b2:g"),
			// 7 over 3: 3,2,2; b2 (the fullest) keeps the extra pod: two
			// moves (b2 keeping 2 and b1 3 would take three)
			want: []Move{{Pod: "g", From: "b2", To: "b3"}, {Pod: "c", From: "b1", To: "b3"}}},
		{name: "not ready pods move first", boards: []string{"b1", "b2"}, pods: spreadPods("b1:a:notready", "b1:b", "b1:c"),
			want: []Move{{Pod: "a", From: "b1", To: "b2"}}},
		{name: "pods elsewhere neither count nor move", boards: []string{"b1", "b2"}, pods: spreadPods("b1:a", "b1:b", "b9:c", "b9:d", ":e"),
			want: []Move{{Pod: "b", From: "b1", To: "b2"}}},
		{name: "two sources two sinks", boards: []string{"b1", "b2", "b3", "b4"},
			pods: spreadPods("b1:a", "b1:b", "b1:c", "b2:d", "b2:e", "b2:f"),
			want: []Move{{Pod: "c", From: "b1", To: "b3"}, {Pod: "f", From: "b2", To: "b4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanSpread(tc.boards, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanSpread (-want +got):\n%s", diff)
			}
			// The same plan whatever the order of the inputs.
			rev := slices.Clone(tc.pods)
			slices.Reverse(rev)
			rb := slices.Clone(tc.boards)
			slices.Reverse(rb)
			if diff := cmp.Diff(got, PlanSpread(rb, rev)); diff != "" {
				t.Errorf("plan depends on input order (-first +reversed):\n%s", diff)
			}
		})
	}
}

// TestPlanSpreadProperties checks on many shapes that the plan spreads (max
// - min ≤ 1 afterwards), that it makes the fewest moves there are, and
// that no pod moves twice or to its own board.
func TestPlanSpreadProperties(t *testing.T) {
	for k := 1; k <= 4; k++ {
		boards := []string{"b1", "b2", "b3", "b4"}[:k]
		// every distribution of up to 6 pods over k boards
		var rec func(i int, counts []int)
		rec = func(i int, counts []int) {
			if i == k {
				check(t, boards, counts)
				return
			}
			for c := 0; c <= 6; c++ {
				rec(i+1, append(counts, c))
			}
		}
		rec(0, nil)
	}
}

func check(t *testing.T, boards []string, counts []int) {
	t.Helper()
	var specs []string
	n := 0
	for i, c := range counts {
		for range c {
			specs = append(specs, fmt.Sprintf("%s:p%02d", boards[i], n))
			n++
		}
	}
	pods := spreadPods(specs...)
	plan := PlanSpread(boards, pods)
	after := slices.Clone(counts)
	idx := map[string]int{}
	for i, b := range boards {
		idx[b] = i
	}
	seen := map[string]bool{}
	for _, m := range plan {
		if seen[m.Pod] || m.From == m.To {
			t.Fatalf("%v: bad move %+v in %+v", counts, m, plan)
		}
		seen[m.Pod] = true
		after[idx[m.From]]--
		after[idx[m.To]]++
	}
	if slices.Max(after)-slices.Min(after) > 1 {
		t.Fatalf("%v: after %+v: %v, not spread", counts, plan, after)
	}
	// fewest: the moves out of boards above ceil(n/k), plus those out of
	// boards at ceil beyond the n%k that may keep it
	base, extra := n/len(boards), n%len(boards)
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	least := 0
	for i, c := range sorted {
		target := base
		if i < extra {
			target++
		}
		least += max(0, c-target)
	}
	if len(plan) != least {
		t.Fatalf("%v: %d moves, the least is %d: %+v", counts, len(plan), least, plan)
	}
}

func TestDrainLeft(t *testing.T) {
	n := &Node{Kind: KindNode, Metadata: ObjectMeta{Name: "b2"}, Spec: NodeSpec{Unschedulable: true, Drain: &NodeDrain{}}}
	web := func(name, node string, ph PodPhase) *Pod {
		return &Pod{Metadata: ObjectMeta{Name: name}, Spec: PodSpec{Node: node, Owner: OwnerRef{Kind: KindDeployment, Name: "web"}}, Status: PodStatus{Phase: ph}}
	}
	daemon := web("exp-b2-aaaaa", "b2", PodRunning)
	daemon.Spec.Owner = OwnerRef{Kind: KindDaemon, Name: "exp"}
	pods := []*Pod{web("web-b", "b2", PodRunning), web("web-a", "b2", PodScheduled), web("web-c", "b1", PodRunning),
		web("web-d", "b2", PodLost), web("web-e", "b2", PodFailed), daemon}
	names := func(ps []*Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Metadata.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"web-a", "web-b"}, names(DrainLeft(n, pods))); diff != "" {
		t.Errorf("without daemons (-want +got):\n%s", diff)
	}
	n.Spec.Drain.Daemons = true
	if diff := cmp.Diff([]string{"exp-b2-aaaaa", "web-a", "web-b"}, names(DrainLeft(n, pods))); diff != "" {
		t.Errorf("with daemons (-want +got):\n%s", diff)
	}
	if DrainLeft(nil, pods) != nil {
		t.Error("DrainLeft(nil) is not nil")
	}
}

func TestRebalancePending(t *testing.T) {
	d := &Deployment{}
	if d.RebalancePending() {
		t.Error("no request is pending")
	}
	d.Spec.Rebalance = &RebalanceRequest{ID: "r1"}
	if !d.RebalancePending() {
		t.Error("a request without status is pending")
	}
	d.Status.Rebalance = &RebalanceStatus{ID: "r1", Message: "moving"}
	if !d.RebalancePending() {
		t.Error("a request not done is pending")
	}
	d.Status.Rebalance.Done = true
	if d.RebalancePending() {
		t.Error("a done request is not pending")
	}
	d.Spec.Rebalance.ID = "r2"
	if !d.RebalancePending() {
		t.Error("a new request is pending")
	}
}

func TestSpreadBoards(t *testing.T) {
	node := func(name string, f func(*Node)) *Node {
		n := &Node{Kind: KindNode, Metadata: ObjectMeta{Name: name}, Status: NodeStatus{Phase: NodeReady, BoardFacts: BoardFacts{Arch: "arm64"}}}
		if f != nil {
			f(n)
		}
		return n
	}
	nodes := []*Node{
		node("b4", nil),
		node("b1", nil),
		node("b2", func(n *Node) { n.Spec.Unschedulable = true }),
		node("b3", func(n *Node) { n.Status.Phase = NodeNotReady }),
		node("b5", func(n *Node) {
			n.Status.Conditions = []Condition{{Type: ConditionAgentDown, Status: ConditionTrue}}
		}),
		node("b6", func(n *Node) { n.Status.Arch = "amd64" }),
		nil,
	}
	got := SpreadBoards(nodes, &PodTemplate{NodeSelector: map[string]string{"arch": "arm64"}})
	if diff := cmp.Diff([]string{"b1", "b4"}, got); diff != "" {
		t.Errorf("SpreadBoards (-want +got):\n%s", diff)
	}
}

func TestValidateMoveFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Object
		want string // "" = valid
	}{
		{"drain with cordon", &Node{Kind: KindNode, Metadata: ObjectMeta{Name: "b1"},
			Spec: NodeSpec{Unschedulable: true, Drain: &NodeDrain{Daemons: true}}}, ""},
		{"drain without cordon", &Node{Kind: KindNode, Metadata: ObjectMeta{Name: "b1"}, Spec: NodeSpec{Drain: &NodeDrain{}}},
			"nodes/b1: spec.drain: a board being drained must be cordoned"},
		{"rebalance id", deploymentWith(&RebalanceRequest{ID: "r-1_X"}), ""},
		{"rebalance without id", deploymentWith(&RebalanceRequest{}), "deployments/web: spec.rebalance.id: required"},
		{"rebalance bad id", deploymentWith(&RebalanceRequest{ID: "a b"}), `deployments/web: spec.rebalance.id: "a b": want 1 to 64 characters`},
		{"rebalance long id", deploymentWith(&RebalanceRequest{ID: strings.Repeat("a", 65)}), "want 1 to 64 characters"},
		{"replaces", podReplacing("web-abcde"), ""},
		{"replaces bad", podReplacing("Web_1"), `pods/web-x: spec.replaces: "Web_1" is not a valid pod name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func deploymentWith(r *RebalanceRequest) *Deployment {
	one := 1
	return &Deployment{Kind: KindDeployment, Metadata: ObjectMeta{Name: "web"}, Spec: DeploymentSpec{
		Replicas: &one, Template: PodTemplate{Labels: map[string]string{"app": "web"}, Exec: []string{"/bin/true"}}, Rebalance: r}}
}

func podReplacing(name string) *Pod {
	return &Pod{Kind: KindPod, Metadata: ObjectMeta{Name: "web-x"}, Spec: PodSpec{
		Owner: OwnerRef{Kind: KindDeployment, Name: "web"}, Replaces: name,
		Template: PodTemplate{Exec: []string{"/bin/true"}}}}
}
