package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

// historyOf is "revision:generation:hash" per history entry.
func historyOf(h []api.TemplateRevision) []string {
	var out []string
	for _, e := range h {
		out = append(out, fmt.Sprintf("%d:%d:%s", e.Revision, e.Generation, e.Hash))
	}
	return out
}

// TestControllersRecordHistory: the deployment and daemon controllers keep
// status.history with api.RecordRevision: a new template gets an entry
// with the generation and the time of the pass that observed it; applying
// an earlier template again moves its entry to the front; a pass that
// changes nothing else writes nothing.
func TestControllersRecordHistory(t *testing.T) {
	type owner struct {
		kind      api.Kind
		add       func(w *world)
		setExec   func(w *world, exec []string)
		history   func(w *world) []api.TemplateRevision
		reconcile func(w *world) []Action
	}
	owners := []owner{{
		kind: api.KindDeployment,
		add:  func(w *world) { w.add(deployment("web", 1)) },
		setExec: func(w *world, exec []string) {
			nd := *w.deployments["web"]
			nd.Spec.Template = nd.Spec.Template.DeepCopy()
			nd.Spec.Template.Exec = exec
			w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
		},
		history: func(w *world) []api.TemplateRevision { return w.deployments["web"].Status.History },
		reconcile: func(w *world) []Action {
			return ReconcileDeployment(w.now, w.deployments["web"], w.podList(), w.nodeList())
		},
	}, {
		kind: api.KindDaemon,
		add:  func(w *world) { w.add(exporter()) },
		setExec: func(w *world, exec []string) {
			nd := *w.daemons["exp"]
			nd.Spec.Template = nd.Spec.Template.DeepCopy()
			nd.Spec.Template.Exec = exec
			w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
		},
		history:   func(w *world) []api.TemplateRevision { return w.daemons["exp"].Status.History },
		reconcile: func(w *world) []Action { return ReconcileDaemon(w.now, w.daemons["exp"], w.podList(), w.nodeList()) },
	}}
	for _, o := range owners {
		t.Run(string(o.kind), func(t *testing.T) {
			w := newWorld(t)
			w.add(readyNode("a"))
			o.add(w)
			v1 := webTemplate().Exec
			v2 := append(append([]string(nil), v1...), "--v2")
			hash := map[string]string{}
			var want []string
			step := func(label string, exec []string, wantHistory ...string) {
				t.Helper()
				if exec != nil {
					o.setExec(w, exec)
					w.now = w.now.Add(time.Minute)
				}
				w.apply(o.reconcile(w))
				h := o.history(w)
				if _, seen := hash[label]; !seen && len(h) > 0 {
					hash[label] = h[0].Hash
				}
				want = nil
				for _, s := range wantHistory {
					want = append(want, fmt.Sprintf(s, hash["v1"], hash["v2"]))
				}
				if diff := cmp.Diff(want, historyOf(h)); diff != "" {
					t.Fatalf("%s: history (-want +got):\n%s", label, diff)
				}
				if !h[0].Applied.Equal(w.now) {
					t.Errorf("%s: applied %v, want the pass's time %v", label, h[0].Applied, w.now)
				}
				if again := o.reconcile(w); len(again) != 0 {
					for _, a := range again {
						if a.Type == ActionUpdateStatus {
							t.Errorf("%s: second pass writes status again:%s", label, fmtActions(again))
						}
					}
				}
			}
			step("v1", nil, "1:1:%[1]s")
			step("v2", v2, "2:2:%[2]s", "1:1:%[1]s")
			step("v1", v1, "3:3:%[1]s", "2:2:%[2]s")
		})
	}
}
