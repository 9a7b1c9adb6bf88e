package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// actions returns "kind/name=action" for every result.
func actions(rs []api.ApplyResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Kind)+"/"+r.Name+"="+r.Action)
	}
	return out
}

func TestApplyCreateConfigureUnchanged(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)

	res, err := e.c.Apply(ctx, []api.Object{deployment("web", nil), service("web")}, false)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	diff(t, "first apply", []string{"deployments/web=created", "services/web=created"}, actions(res))
	for _, r := range res {
		if r.Object.Metadata.ResourceVersion == 0 || r.Object.Metadata.Generation != 1 || !r.Object.Metadata.Created.Equal(t0) {
			t.Errorf("%s/%s stored metadata %+v", r.Kind, r.Name, r.Object.Metadata)
		}
	}
	if rv0, rv1 := res[0].Object.Metadata.ResourceVersion, res[1].Object.Metadata.ResourceVersion; rv0 != rv1 {
		t.Errorf("objects of one apply have resourceVersions %d and %d: not one transaction", rv0, rv1)
	}
	if r := typed[*api.Deployment](t, res[0].Object).Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("created replicas = %v, want 1", r)
	}
	svc := typed[*api.Service](t, res[1].Object)
	if svc.Spec.Ports[0].Name != "http" {
		t.Errorf("service port not defaulted: %+v", svc.Spec.Ports)
	}

	rv := e.store.ResourceVersion()
	res, err = e.c.Apply(ctx, []api.Object{deployment("web", nil), service("web")}, false)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	diff(t, "second apply", []string{"deployments/web=unchanged", "services/web=unchanged"}, actions(res))
	if got := e.store.ResourceVersion(); got != rv {
		t.Errorf("unchanged apply wrote: resourceVersion %d → %d", rv, got)
	}
	if res[0].Object.Metadata.ResourceVersion == 0 {
		t.Error("unchanged result carries no stored object")
	}

	changed := deployment("web", nil, "/usr/bin/web", "--port=9090")
	dry, err := e.c.Apply(ctx, []api.Object{changed, service("web")}, true)
	if err != nil {
		t.Fatalf("dry-run Apply: %v", err)
	}
	diff(t, "dry run", []string{"deployments/web=configured", "services/web=unchanged"}, actions(dry))
	if dry[0].Object.Metadata.Generation != 2 {
		t.Errorf("dry run predicts generation %d, want 2", dry[0].Object.Metadata.Generation)
	}
	if got := e.store.ResourceVersion(); got != rv {
		t.Errorf("dry run wrote: resourceVersion %d → %d", rv, got)
	}

	res, err = e.c.Apply(ctx, []api.Object{changed, service("web")}, false)
	if err != nil {
		t.Fatalf("third Apply: %v", err)
	}
	diff(t, "third apply", []string{"deployments/web=configured", "services/web=unchanged"}, actions(res))
	diff(t, "dry run matches the real thing", dry[0].Object.Spec, res[0].Object.Spec)
	if res[0].Object.Metadata.Generation != 2 {
		t.Errorf("configured generation = %d, want 2", res[0].Object.Metadata.Generation)
	}

	// A labels-only change is "configured" but keeps the generation.
	relabeled := deployment("web", nil, "/usr/bin/web", "--port=9090")
	relabeled.Metadata.Labels = map[string]string{"team": "edge"}
	res, err = e.c.Apply(ctx, []api.Object{relabeled}, false)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "relabel apply", []string{"deployments/web=configured"}, actions(res))
	if res[0].Object.Metadata.Generation != 2 {
		t.Errorf("labels-only apply moved generation to %d", res[0].Object.Metadata.Generation)
	}
}

func TestApplyAllOrNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	badDep := deployment("bad", intp(1))
	badDep.Spec.Template.Exec = nil
	badDep.Spec.Template.Ports[0].Port = 70000
	badSvc := service("front")
	badSvc.Spec.Ports = nil
	_, err := e.c.Apply(ctx, []api.Object{deployment("web", nil), badDep, badSvc}, false)
	ae := apiErr(t, err, http.StatusBadRequest, "invalid")

	byObject := map[string][]string{}
	for _, f := range ae.Fields {
		if f.Field == "" || f.Message == "" {
			t.Errorf("field error without a path or message: %+v", f)
		}
		byObject[f.Object] = append(byObject[f.Object], f.Field)
	}
	if len(byObject) != 2 || len(byObject["deployments/bad"]) < 2 || len(byObject["services/front"]) < 1 {
		t.Errorf("field errors by object = %v, want both problems of deployments/bad and those of services/front", byObject)
	}
	if !slices.Contains(byObject["deployments/bad"], "spec.template.exec") {
		t.Errorf("deployments/bad errors %v lack spec.template.exec", byObject["deployments/bad"])
	}
	if e.store.ResourceVersion() != 0 {
		t.Errorf("an invalid apply wrote (resourceVersion %d)", e.store.ResourceVersion())
	}
	items, _, _ := e.store.List(api.KindDeployment)
	if len(items) != 0 {
		t.Errorf("the valid object of an invalid apply was stored: %v", items)
	}
}

func TestApplyReplicasOwnership(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	replicas := func(r api.RawObject) int {
		t.Helper()
		p := typed[*api.Deployment](t, r).Spec.Replicas
		if p == nil {
			t.Fatal("stored replicas is nil")
		}
		return *p
	}
	if _, err := e.c.Apply(ctx, []api.Object{deployment("web", nil)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Scale(ctx, "web", 4); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.Apply(ctx, []api.Object{deployment("web", nil)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Action != "unchanged" || replicas(res[0].Object) != 4 {
		t.Errorf("re-apply without replicas after scale: %s with %d replicas, want unchanged with 4", res[0].Action, replicas(res[0].Object))
	}
	res, err = e.c.Apply(ctx, []api.Object{deployment("web", nil, "/usr/bin/web", "-v")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Action != "configured" || replicas(res[0].Object) != 4 {
		t.Errorf("template change without replicas: %s with %d replicas, want configured with 4", res[0].Action, replicas(res[0].Object))
	}
	res, err = e.c.Apply(ctx, []api.Object{deployment("web", intp(2), "/usr/bin/web", "-v")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Action != "configured" || replicas(res[0].Object) != 2 {
		t.Errorf("apply with replicas 2: %s with %d replicas, want configured with 2", res[0].Action, replicas(res[0].Object))
	}
}

func TestApplyRejects(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body string
		want       []api.FieldError // messages compared by prefix
	}{
		{"pod", `{"objects":[{"kind":"pods","metadata":{"name":"p"},"spec":{}}]}`,
			[]api.FieldError{{Object: "pods/p", Field: "kind", Message: "pods are managed by herd"}}},
		{"node", `{"objects":[{"kind":"nodes","metadata":{"name":"n"},"spec":{}}]}`,
			[]api.FieldError{{Object: "nodes/n", Field: "kind", Message: "nodes are managed by herd"}}},
		{"no kind", `{"objects":[{"metadata":{"name":"x"}}]}`,
			[]api.FieldError{{Object: "objects[0]", Field: "kind", Message: "required"}}},
		{"unknown kind", `{"objects":[{"kind":"widgets","metadata":{"name":"x"}}]}`,
			[]api.FieldError{{Object: "widgets/x", Field: "kind", Message: `unknown kind "widgets"`}}},
		{"unknown field", `{"objects":[{"kind":"deployments","metadata":{"name":"x"},"spec":{"replica":3,"template":{"exec":["/x"]}}}]}`,
			[]api.FieldError{{Object: "deployments/x", Field: "replica", Message: "unknown field"}}},
		{"wrong type", `{"objects":[{"kind":"services","metadata":{"name":"x"},"spec":{"ports":"http"}}]}`,
			[]api.FieldError{{Object: "services/x", Field: "spec.ports", Message: "cannot use JSON string"}}},
		{"duplicate", `{"objects":[` +
			`{"kind":"services","metadata":{"name":"x"},"spec":{"selector":{"app":"x"},"ports":[{"target":"http"}]}},` +
			`{"kind":"services","metadata":{"name":"x"},"spec":{"selector":{"app":"x"},"ports":[{"target":"http"}]}}]}`,
			[]api.FieldError{{Object: "services/x", Field: "metadata.name", Message: "objects[0] and objects[1]"}}},
		{"two problems", `{"objects":[{"kind":"pods","metadata":{"name":"p"}},{"kind":"bogus"}]}`,
			[]api.FieldError{{Object: "pods/p", Field: "kind", Message: "pods are"}, {Object: "objects[1]", Field: "kind", Message: "unknown kind"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, "POST", "/v1/apply", tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d (%s), want 400", code, body)
			}
			ae := decodeErr(t, body)
			if ae.Code != "invalid" || len(ae.Fields) != len(tc.want) {
				t.Fatalf("got %+v, want code invalid with %d field errors", ae, len(tc.want))
			}
			for i, w := range tc.want {
				g := ae.Fields[i]
				if g.Object != w.Object || g.Field != w.Field || !strings.HasPrefix(g.Message, w.Message) {
					t.Errorf("field error %d = %+v, want %+v (message prefix)", i, g, w)
				}
			}
		})
	}
	if e.store.ResourceVersion() != 0 {
		t.Error("a rejected apply wrote")
	}
	code, body := e.raw(t, "POST", "/v1/apply", `{"objects":[], "extra":1}`)
	if code != 400 || !strings.Contains(body, `unknown field \"extra\"`) {
		t.Errorf("unknown top-level field: %d %s", code, body)
	}
}

func TestApplyRetriesOnConflict(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.Apply(ctx, []api.Object{deployment("web", nil)}, false); err != nil {
		t.Fatal(err)
	}
	// The first apply transaction finds that someone scaled in between.
	var calls atomic.Int32
	e.store.SetTxnHook(func(ops []raftstore.Op) error {
		if calls.Add(1) != 1 {
			return nil
		}
		cur, err := e.store.Get(api.KindDeployment, "web")
		if err != nil {
			return err
		}
		d := typed[*api.Deployment](t, cur)
		d.Spec.Replicas = intp(6)
		raw, _ := api.ToRaw(d)
		_, err = e.store.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}})
		return err
	})
	res, err := e.c.Apply(ctx, []api.Object{deployment("web", nil, "/usr/bin/web", "-v")}, false)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if r := typed[*api.Deployment](t, res[0].Object).Spec.Replicas; res[0].Action != "configured" || *r != 6 {
		t.Errorf("apply after a concurrent scale: %s with %d replicas, want configured keeping 6", res[0].Action, *r)
	}
	// calls: the conflicting apply txn, the concurrent scale, the retry.
	if n := calls.Load(); n != 3 {
		t.Errorf("%d transactions, want 3", n)
	}
}

// TestApplyKeepsRebalance: a rebalance request (herdctl rebalance) survives
// a re-apply of the manifest, which cannot carry one, and a manifest that
// does carry one does not start one.
func TestApplyKeepsRebalance(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	withRebalance := deployment("web", intp(2))
	withRebalance.Spec.Rebalance = &api.RebalanceRequest{ID: "sneaky"}
	res, err := e.c.Apply(ctx, []api.Object{withRebalance}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := typed[*api.Deployment](t, res[0].Object).Spec.Rebalance; r != nil {
		t.Fatalf("apply of a new deployment stored rebalance %+v, want none", r)
	}
	stored := typed[*api.Deployment](t, res[0].Object)
	stored.Spec.Rebalance = &api.RebalanceRequest{ID: "r1"}
	if _, err := e.c.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	res, err = e.c.Apply(ctx, []api.Object{deployment("web", intp(2))}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := typed[*api.Deployment](t, res[0].Object).Spec.Rebalance
	if res[0].Action != "unchanged" || got == nil || got.ID != "r1" {
		t.Errorf("re-apply after rebalance: %s with rebalance %+v, want unchanged with r1", res[0].Action, got)
	}
}

// TestApplyRefusesTakenProxyPort: a proxy port belongs to one service; a
// second service claiming it is refused with the field named, and nothing
// is written (dry run included).
func TestApplyRefusesTakenProxyPort(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	withPort := func(name string, port int) *api.Service {
		s := service(name)
		s.Spec.Ports[0].Port = port
		return s
	}
	if _, err := e.c.Apply(ctx, []api.Object{withPort("web", 8080)}, false); err != nil {
		t.Fatal(err)
	}
	rv := e.store.ResourceVersion()
	for _, dry := range []bool{true, false} {
		_, err := e.c.Apply(ctx, []api.Object{withPort("api", 8080)}, dry)
		if err == nil || !strings.Contains(err.Error(), "spec.ports[0].port") || !strings.Contains(err.Error(), "8080/tcp is already the port of service web") {
			t.Errorf("dry run %v: err = %v, want the taken port named", dry, err)
		}
	}
	if got := e.store.ResourceVersion(); got != rv {
		t.Errorf("a refused apply wrote: resourceVersion %d → %d", rv, got)
	}
	// The owner may re-apply, and move its port; the other may then take it.
	if _, err := e.c.Apply(ctx, []api.Object{withPort("web", 8081), withPort("api", 8080)}, false); err != nil {
		t.Errorf("moving the port and taking the freed one: %v", err)
	}
}
