package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

// withMaxUnavailable returns a copy of ds with a new template (exec gets
// "--v2") and spec.strategy.maxUnavailable m (nil: left out).
func rolledExporter(ds *api.Daemon, m *int) *api.Daemon {
	nd := *ds
	nd.Spec.Template = ds.Spec.Template.DeepCopy()
	nd.Spec.Template.Exec = append(nd.Spec.Template.Exec, "--v2")
	nd.Spec.Strategy.MaxUnavailable = m
	return &nd
}

// TestDaemonRollingPlan checks which boards one pass replaces, given each
// board's pod: every unavailable old pod, then available old pods, in
// board order, while the boards without an available pod stay within
// max_unavailable.
func TestDaemonRollingPlan(t *testing.T) {
	old := exporter()
	boards := []string{"a", "b", "c", "d", "e"}
	type board struct {
		name  string
		newer bool         // the pod is of the new revision
		phase api.PodPhase // "" = no pod
		node  func(*api.Node)
	}
	allOld := func(over ...board) []board {
		var bs []board
		for _, b := range boards {
			bs = append(bs, board{name: b, phase: api.PodRunning})
		}
		for _, o := range over {
			for i := range bs {
				if bs[i].name == o.name {
					bs[i] = o
				}
			}
		}
		return bs
	}
	tests := []struct {
		name        string
		max         *int
		boards      []board
		wantDeletes []string
	}{
		{name: "default is one board", boards: allOld(), wantDeletes: []string{"exp-a"}},
		{name: "max 1", max: intp(1), boards: allOld(), wantDeletes: []string{"exp-a"}},
		{name: "max 2", max: intp(2), boards: allOld(), wantDeletes: []string{"exp-a", "exp-b"}},
		{name: "max above the board count replaces all", max: intp(9), boards: allOld(), wantDeletes: []string{"exp-a", "exp-b", "exp-c", "exp-d", "exp-e"}},
		{name: "next board waits for the replaced pod to be ready", boards: allOld(board{name: "a", newer: true, phase: api.PodStarting})},
		{name: "max 2 with one replacement starting replaces one more", max: intp(2),
			boards: allOld(board{name: "a", newer: true, phase: api.PodStarting}), wantDeletes: []string{"exp-b"}},
		{name: "replaced pod ready: the next board goes", boards: allOld(board{name: "a", newer: true, phase: api.PodRunning}), wantDeletes: []string{"exp-b"}},
		{name: "unavailable old pod replaced at once, and it uses the budget",
			boards: allOld(board{name: "c", phase: api.PodStarting}), wantDeletes: []string{"exp-c"}},
		{name: "unavailable old pod and max 2", max: intp(2),
			boards: allOld(board{name: "c", phase: api.PodStarting}), wantDeletes: []string{"exp-a", "exp-c"}},
		{name: "a board down counts as unavailable and keeps its old pod",
			boards: allOld(board{name: "b", phase: api.PodRunning, node: withPhase(api.NodeNotReady)})},
		{name: "a cordoned board keeps its old pod and does not block", max: intp(1),
			boards:      allOld(board{name: "a", phase: api.PodRunning, node: func(n *api.Node) { n.Spec.Unschedulable = true }}),
			wantDeletes: []string{"exp-b"}},
		{name: "a board without a pod counts as unavailable", max: intp(2),
			boards: allOld(board{name: "a"}), wantDeletes: []string{"exp-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := rolledExporter(old, tt.max)
			w := newWorld(t)
			w.add(ds)
			for _, b := range tt.boards {
				var opts []func(*api.Node)
				if b.node != nil {
					opts = append(opts, b.node)
				}
				w.add(readyNode(b.name, opts...))
				switch {
				case b.phase == "":
				case b.newer:
					w.add(daemonPod(ds, b.name, b.phase))
				default:
					w.add(daemonPod(old, b.name, b.phase))
				}
			}
			acts := ReconcileDaemon(t0, w.daemons["exp"], w.podList(), w.nodeList())
			var deletes []string
			creates := map[string]int{}
			for _, a := range acts {
				switch a.Type {
				case ActionDelete:
					deletes = append(deletes, a.Name)
				case ActionCreate:
					creates[a.Object.(*api.Pod).Spec.Node]++
				}
			}
			if diff := cmp.Diff(tt.wantDeletes, deletes); diff != "" {
				t.Errorf("deleted (-want +got):\n%s%s", diff, fmtActions(acts))
			}
			for _, name := range tt.wantDeletes {
				node := name[len("exp-"):]
				if creates[node] != 1 {
					t.Errorf("board %s: %d creates after its pod's delete, want 1%s", node, creates[node], fmtActions(acts))
				}
			}
		})
	}
}

func TestRollingReplacements(t *testing.T) {
	pods := []*api.Pod{{}, {}, {}}
	for _, tt := range []struct{ max, unavailable, want int }{
		{1, 0, 1}, {1, 1, 0}, {2, 0, 2}, {2, 1, 1}, {3, 5, 0}, {9, 0, 3},
	} {
		if got := len(rollingReplacements(tt.max, tt.unavailable, pods)); got != tt.want {
			t.Errorf("max %d, %d unavailable: %d replaced, want %d", tt.max, tt.unavailable, got, tt.want)
		}
	}
}
