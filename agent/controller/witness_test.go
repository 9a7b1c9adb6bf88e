package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

// dead is member name declared dead at since, with witness w.
func dead(name string, since time.Time, w Witness) MemberInfo {
	m := member(name, api.MemberDead)
	m.DownSince = since
	m.Witness = w
	return m
}

func agentDownNode(m MemberInfo, at time.Time) *api.Node {
	n := storedNode(m, api.NodeReady)
	n.Status.Conditions, _ = api.SetCondition(n.Status.Conditions, api.Condition{Type: ConditionAgentDown, Status: api.ConditionTrue,
		Reason: reasonMemberDead, Message: "gossip declared the agent dead; the board's sshd and systemd answer the leader"}, at)
	return n
}

func TestReconcileNodeWitness(t *testing.T) {
	web := deployment("web", 2)
	down := t0.Add(time.Minute) // gossip declared the board dead
	ok := Witness{At: down.Add(300 * time.Millisecond)}
	failed := Witness{At: down.Add(200 * time.Millisecond), Err: "ssh: i/o timeout"}
	before := Witness{At: down.Add(-time.Second)} // taken while gossip still called it alive
	tests := []struct {
		name      string
		node      *api.Node
		member    MemberInfo
		now       time.Time
		want      []string
		wantPhase api.NodePhase
		wantDown  bool     // AgentDown=True expected
		wantLost  []string // pods made Lost
		wantMsg   string   // part of the Ready condition's message
	}{
		{
			name:      "dead, SSH answered since: agent down, stays ready, pods kept",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, ok),
			now:       down.Add(time.Second),
			want:      []string{"updateStatus nodes/a"},
			wantPhase: api.NodeReady, wantDown: true,
		},
		{
			name:      "dead, SSH failed since: not ready, pods lost, error named",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, failed),
			now:       down.Add(time.Second),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "SSH to it failed: ssh: i/o timeout",
		},
		{
			name:      "dead, no witness yet: wait",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, Witness{}),
			now:       down.Add(time.Second),
			wantPhase: api.NodeReady,
		},
		{
			name:      "dead, only a witness from before: wait",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, before),
			now:       down.Add(time.Second),
			wantPhase: api.NodeReady,
		},
		{
			name:      "dead, no witness within the grace: not ready",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, before),
			now:       down.Add(WitnessGrace + time.Millisecond),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "no SSH check answered within 3s",
		},
		{
			name:      "dead since an unknown time: not ready at once, as before",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", time.Time{}, Witness{}),
			now:       down,
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "gossip declared the board dead",
		},
		{
			name:      "agent down, witnesses keep coming: nothing to write",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    dead("a", down, Witness{At: down.Add(10 * time.Second)}),
			now:       down.Add(11 * time.Second),
			wantPhase: api.NodeReady, wantDown: true,
		},
		{
			name:      "agent down, one check fails: still agent down",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    dead("a", down, Witness{At: down.Add(10 * time.Second), Err: "no answer within 750ms", OKAt: down.Add(9 * time.Second)}),
			now:       down.Add(10 * time.Second),
			wantPhase: api.NodeReady, wantDown: true,
		},
		{
			name:      "agent down, then SSH keeps failing: not ready, condition dropped",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    dead("a", down, Witness{At: down.Add(13 * time.Second), Err: "connection lost", OKAt: down.Add(9 * time.Second)}),
			now:       down.Add(13 * time.Second),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "SSH to it failed: connection lost",
		},
		{
			name:      "not yet agent down: one failed check is death",
			node:      storedNode(member("a", api.MemberAlive), api.NodeReady),
			member:    dead("a", down, Witness{At: down.Add(time.Second), Err: "connection lost", OKAt: down.Add(500 * time.Millisecond)}),
			now:       down.Add(time.Second),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "SSH to it failed: connection lost",
		},
		{
			name:      "agent down, checker went quiet: not ready",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    dead("a", down, ok),
			now:       ok.At.Add(WitnessGrace + time.Millisecond),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"}, wantMsg: "SSH last answered",
		},
		{
			name:      "agent back: condition dropped, stays ready",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    member("a", api.MemberAlive),
			now:       down.Add(2 * time.Second),
			want:      []string{"updateStatus nodes/a"},
			wantPhase: api.NodeReady,
		},
		{
			name:      "agent down board leaves: left, condition dropped",
			node:      agentDownNode(member("a", api.MemberAlive), down),
			member:    member("a", api.MemberLeft),
			now:       down.Add(2 * time.Second),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeLeft, wantLost: []string{"web-1"},
		},
		{
			name:      "not ready board: a witness does not bring it back",
			node:      storedNode(member("a", api.MemberAlive), api.NodeNotReady),
			member:    dead("a", down, ok),
			now:       down.Add(time.Second),
			want:      []string{"updateStatus nodes/a", "updateStatus pods/web-1"},
			wantPhase: api.NodeNotReady, wantLost: []string{"web-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.now = tt.now
			w.add(tt.node, deployPod(web, "web-1", "a", api.PodRunning), deployPod(web, "web-2", "b", api.PodRunning))
			acts := ReconcileNode(tt.now, w.nodes["a"], tt.member, w.podList())
			if diff := cmp.Diff(tt.want, summary(acts)); diff != "" {
				t.Fatalf("actions (-want +got):\n%s%s", diff, fmtActions(acts))
			}
			w.apply(acts)
			n := w.nodes["a"]
			if n.Status.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", n.Status.Phase, tt.wantPhase)
			}
			c := api.FindCondition(n.Status.Conditions, ConditionAgentDown)
			if got := c != nil && c.Status == api.ConditionTrue; got != tt.wantDown {
				t.Errorf("AgentDown condition = %+v, want present %v", c, tt.wantDown)
			}
			if tt.wantDown && (c.Reason != reasonMemberDead || !strings.Contains(c.Message, "gossip") || !strings.Contains(c.Message, "sshd")) {
				t.Errorf("AgentDown condition %+v should name both witnesses", c)
			}
			if tt.wantMsg != "" {
				if rc := api.FindCondition(n.Status.Conditions, api.ConditionReady); rc == nil || !strings.Contains(rc.Message, tt.wantMsg) {
					t.Errorf("Ready condition = %+v, want message containing %q", rc, tt.wantMsg)
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
			// Applied once, the same inputs a moment later change nothing.
			if again := ReconcileNode(tt.now.Add(time.Millisecond), w.nodes["a"], tt.member, w.podList()); len(again) != 0 {
				t.Errorf("second pass not empty:%s", fmtActions(again))
			}
		})
	}
}

// An agent that is killed and restarted: dead for a few seconds, witnessed
// each second, then alive again. The board stays Ready throughout and no
// pod is lost.
func TestAgentRestartLosesNothing(t *testing.T) {
	web := deployment("web", 1)
	w := newWorld(t)
	alive := member("a", api.MemberAlive)
	w.add(storedNode(alive, api.NodeReady), deployPod(web, "web-1", "a", api.PodRunning))
	down := t0.Add(time.Minute)
	for i := range 5 {
		now := down.Add(time.Duration(i) * time.Second)
		wit := Witness{}
		if i > 0 {
			wit = Witness{At: now.Add(-100 * time.Millisecond)}
		}
		w.apply(ReconcileNode(now, w.nodes["a"], dead("a", down, wit), w.podList()))
		if ph := w.nodes["a"].Status.Phase; ph != api.NodeReady {
			t.Fatalf("after %ds: node %s, want Ready", i, ph)
		}
	}
	if c := api.FindCondition(w.nodes["a"].Status.Conditions, ConditionAgentDown); c == nil {
		t.Fatal("no AgentDown condition while the agent was down")
	}
	w.apply(ReconcileNode(down.Add(6*time.Second), w.nodes["a"], alive, w.podList()))
	n := w.nodes["a"]
	if n.Status.Phase != api.NodeReady || api.FindCondition(n.Status.Conditions, ConditionAgentDown) != nil {
		t.Errorf("agent back: %s %+v, want Ready without AgentDown", n.Status.Phase, n.Status.Conditions)
	}
	if p := w.pods["web-1"]; p.Status.Phase != api.PodRunning {
		t.Errorf("web-1 = %s, want Running", p.Status.Phase)
	}
}

func TestScheduleSkipsAgentDown(t *testing.T) {
	down := agentDownNode(member("a", api.MemberAlive), t0)
	b := readyNode("b")
	pod := deployPod(deployment("web", 1), "p", "", api.PodPending)
	snap := &scheduler.Snapshot{Nodes: []*api.Node{down}, Pods: []*api.Pod{pod}}
	acts := SchedulePending(t0, snap, snap.Pods)
	if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
		t.Fatalf("only an agent-down node: got%s, want one unschedulable status", fmtActions(acts))
	}
	if down.Status.Phase != api.NodeReady {
		t.Errorf("the snapshot's node was modified: %s", down.Status.Phase)
	}
	snap.Nodes = append(snap.Nodes, b)
	acts = SchedulePending(t0, snap, snap.Pods)
	if len(acts) != 1 || acts[0].Type != ActionBind || acts[0].Object.(*api.Pod).Spec.Node != "b" {
		t.Fatalf("with b Ready: got%s, want a bind to b", fmtActions(acts))
	}
}
