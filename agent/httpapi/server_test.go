package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/raftstore"
)

func TestCreateGetListUpdateDelete(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)

	created, err := e.c.Create(ctx, deployment("web", intp(2)))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	meta := created.Metadata
	if meta.Generation != 1 || meta.ResourceVersion == 0 || !meta.Created.Equal(t0) {
		t.Errorf("created metadata = %+v, want generation 1, a resourceVersion, created %v", meta, t0)
	}
	d := typed[*api.Deployment](t, created)
	if d.Spec.Selector["app"] != "web" || *d.Spec.Strategy.MaxSurge != 1 {
		t.Errorf("defaults not applied at admission: %+v", d.Spec)
	}

	got, err := e.c.Get(ctx, api.KindDeployment, "web")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	diff(t, "get", created, got)

	if _, err := e.c.Create(ctx, deployment("api", nil)); err != nil {
		t.Fatalf("Create api: %v", err)
	}
	items, rv, err := e.c.List(ctx, api.KindDeployment)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if rv != e.store.ResourceVersion() {
		t.Errorf("list resourceVersion = %d, want %d", rv, e.store.ResourceVersion())
	}
	var names []string
	for _, o := range items {
		names = append(names, o.Metadata.Name)
	}
	diff(t, "list names (sorted)", []string{"api", "web"}, names)
	if r := typed[*api.Deployment](t, items[0]).Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("api replicas = %v, want 1 on create", r)
	}

	sel, _, err := e.c.ListSelected(ctx, api.KindDeployment, "team=web")
	if err != nil || len(sel) != 2 {
		t.Errorf("ListSelected(team=web) = %d items, %v; want 2", len(sel), err)
	}
	// Deployments carry app on their template, not on the object itself.
	sel, _, err = e.c.ListSelected(ctx, api.KindDeployment, "app=web")
	if err != nil || len(sel) != 0 {
		t.Errorf("ListSelected(app=web) = %d items, %v; want 0", len(sel), err)
	}

	// Status written by a controller (through the store, not the API) is
	// kept by spec updates.
	d.Status = api.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2}
	afterStatus := writeStatus(t, e, d)
	if afterStatus.Metadata.Generation != 1 {
		t.Errorf("status write moved generation to %d", afterStatus.Metadata.Generation)
	}

	// A labels-only change keeps the generation; a spec change bumps it.
	d = typed[*api.Deployment](t, afterStatus)
	d.Metadata.Labels = map[string]string{"team": "edge"}
	up, err := e.c.Update(ctx, d)
	if err != nil {
		t.Fatalf("Update labels: %v", err)
	}
	if up.Metadata.Generation != 1 || up.Metadata.Labels["team"] != "edge" {
		t.Errorf("labels update: metadata %+v, want generation 1 and team=edge", up.Metadata)
	}
	d = typed[*api.Deployment](t, up)
	d.Spec.Template.Exec = []string{"/usr/bin/web", "--port=9090"}
	up, err = e.c.Update(ctx, d)
	if err != nil {
		t.Fatalf("Update spec: %v", err)
	}
	d = typed[*api.Deployment](t, up)
	if up.Metadata.Generation != 2 || d.Status.ReadyReplicas != 2 || !up.Metadata.Created.Equal(t0) {
		t.Errorf("spec update: metadata %+v status %+v, want generation 2, status kept, created kept", up.Metadata, d.Status)
	}

	if err := e.c.Delete(ctx, api.KindDeployment, "web"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = e.c.Get(ctx, api.KindDeployment, "web")
	apiErr(t, err, http.StatusNotFound, "not_found")
	if err := e.c.Delete(ctx, api.KindDeployment, "web"); !api.IsCode(err, "not_found") {
		t.Errorf("second Delete = %v, want not_found", err)
	}
}

func TestStatus(t *testing.T) {
	e := newEnv(t)
	st, err := e.c.Status(ctxT(t))
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	want := api.ClusterStatus{Node: "pi1", Leader: "pi1", Version: "test",
		Servers: []api.RaftServer{{ID: "pi1", Address: "10.0.0.1:7947", Suffrage: "voter", Leader: true}},
		Members: []api.GossipMember{{Name: "pi1", Addr: "10.0.0.1", State: "alive", Server: true}}}
	diff(t, "status", want, st)
}

func TestScale(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.Create(ctx, deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.Scale(ctx, "web", 5)
	if err != nil {
		t.Fatalf("Scale: %v", err)
	}
	if r := typed[*api.Deployment](t, out).Spec.Replicas; r == nil || *r != 5 || out.Metadata.Generation != 2 {
		t.Errorf("after scale: replicas %v generation %d, want 5 and 2", r, out.Metadata.Generation)
	}
	for _, n := range []int{-1, 1001} {
		_, err := e.c.Scale(ctx, "web", n)
		ae := apiErr(t, err, http.StatusBadRequest, "invalid")
		diff(t, "scale fields", []api.FieldError{{Object: "deployments/web", Field: "replicas",
			Message: ae.Fields[0].Message}}, ae.Fields)
	}
	_, err = e.c.Scale(ctx, "nope", 1)
	apiErr(t, err, http.StatusNotFound, "not_found")
}

func TestCASConflict(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	first, err := e.c.Create(ctx, deployment("web", intp(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Scale(ctx, "web", 3); err != nil {
		t.Fatal(err)
	}
	stale := typed[*api.Deployment](t, first)
	stale.Spec.Template.Exec = []string{"/bin/other"}
	_, err = e.c.Update(ctx, stale)
	apiErr(t, err, http.StatusConflict, "conflict")

	code, body := e.raw(t, http.MethodDelete, "/v1/deployments/web?resourceVersion=1", "")
	if code != http.StatusConflict || !strings.Contains(body, `"conflict"`) {
		t.Errorf("stale delete = %d %s, want 409 conflict", code, body)
	}
	cur, _ := e.c.Get(ctx, api.KindDeployment, "web")
	code, body = e.raw(t, http.MethodDelete, "/v1/deployments/web?resourceVersion="+jsonNum(cur.Metadata.ResourceVersion), "")
	if code != http.StatusOK {
		t.Errorf("current-version delete = %d %s, want 200", code, body)
	}
}

// writeStatus writes o's status to the store as a controller would.
func writeStatus(t *testing.T, e *env, o api.Object) api.RawObject {
	t.Helper()
	raw, err := api.ToRaw(o)
	if err != nil {
		t.Fatal(err)
	}
	raw.Spec = nil
	out, err := e.store.Txn(ctxT(t), []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: raw}})
	if err != nil {
		t.Fatalf("status write: %v", err)
	}
	return out[0]
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func TestNodeCordon(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	node := api.RawObject{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi2"},
		Spec: json.RawMessage(`{}`), Status: json.RawMessage(`{"phase":"Ready","arch":"arm64"}`)}
	if _, err := e.store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpCreate, Object: node}}); err != nil {
		t.Fatal(err)
	}
	raw, err := e.c.Get(ctx, api.KindNode, "pi2")
	if err != nil {
		t.Fatal(err)
	}
	n := typed[*api.Node](t, raw)
	n.Spec.Unschedulable = true
	out, err := e.c.Update(ctx, n)
	if err != nil {
		t.Fatalf("cordon: %v", err)
	}
	got := typed[*api.Node](t, out)
	if !got.Spec.Unschedulable || got.Status.Arch != "arm64" {
		t.Errorf("cordoned node = %+v, want unschedulable with status kept", got)
	}
	_, err = e.c.Create(ctx, &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi9"}})
	apiErr(t, err, http.StatusBadRequest, "bad_request")
}

func TestErrors(t *testing.T) {
	big := `{"kind":"deployments","metadata":{"name":"x"},"spec":{"template":{"exec":["` + strings.Repeat("a", 2048) + `"]}}}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		msgHas                   string
	}{
		{"unknown kind", "GET", "/v1/widgets", "", 404, "not_found", "nodes, deployments, daemons, pods, services"},
		{"unknown kind get", "GET", "/v1/widgets/a", "", 404, "not_found", `"widgets"`},
		{"not found", "GET", "/v1/deployments/nope", "", 404, "not_found", "deployments/nope"},
		{"outside v1", "GET", "/api/x", "", 404, "not_found", "/v1/"},
		{"no route", "GET", "/v1/deployments/a/b/c", "", 404, "not_found", "no route"},
		{"method", "PATCH", "/v1/deployments/a", "", 405, "bad_request", "PATCH"},
		{"bad json", "POST", "/v1/deployments", `{"kind":"deployments",}`, 400, "bad_request", "byte offset 23"},
		{"wrong type", "POST", "/v1/deployments", `{"spec":{"replicas":"two"}}`, 400, "bad_request", "spec.replicas"},
		{"unknown field", "POST", "/v1/deployments", `{"spec":{"replica":2}}`, 400, "bad_request", `unknown field "replica"`},
		{"trailing data", "POST", "/v1/deployments", `{} {}`, 400, "bad_request", "after the JSON value"},
		{"empty body", "POST", "/v1/deployments", ``, 400, "bad_request", "empty"},
		{"kind mismatch", "POST", "/v1/deployments", `{"kind":"services"}`, 400, "bad_request", "does not match"},
		{"name mismatch", "PUT", "/v1/deployments/a", `{"metadata":{"name":"b"}}`, 400, "bad_request", "does not match"},
		{"invalid", "POST", "/v1/deployments", `{"metadata":{"name":"Bad_Name"},"spec":{"template":{"exec":["/x"]}}}`, 400, "invalid", "metadata.name"},
		{"create pod", "POST", "/v1/pods", `{}`, 400, "bad_request", "managed by herd"},
		{"update pod", "PUT", "/v1/pods/p", `{}`, 400, "bad_request", "managed by herd"},
		{"too large", "POST", "/v1/deployments", big, 413, "too_large", "1024 bytes"},
		{"bad rv", "DELETE", "/v1/deployments/a?resourceVersion=x", "", 400, "bad_request", "resourceVersion"},
		{"bad selector", "GET", "/v1/deployments?selector=a", "", 400, "bad_request", "selector"},
		{"scale missing", "PUT", "/v1/deployments/a/scale", `{}`, 400, "invalid", "replicas"},
		{"scale on service", "PUT", "/v1/services/a/scale", `{"replicas":1}`, 404, "not_found", "no route"},
		{"apply empty", "POST", "/v1/apply", `{"objects":[]}`, 400, "bad_request", "nothing to apply"},
	}
	e := newEnv(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1024 })
	if _, err := e.c.Create(ctxT(t), deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name, method, path, body string
		status                   int
		code                     string
		msgHas                   string
	}{"exists", "POST", "/v1/deployments", `{"metadata":{"name":"web"},"spec":{"template":{"exec":["/x"]}}}`, 409, "exists", "deployments/web"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, tc.method, tc.path, tc.body)
			var ae api.APIError
			if err := json.Unmarshal([]byte(body), &ae); err != nil {
				t.Fatalf("body %q is not a JSON error: %v", body, err)
			}
			if code != tc.status || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msgHas) {
				t.Errorf("got %d %q %q, want %d %q containing %q", code, ae.Code, ae.Message, tc.status, tc.code, tc.msgHas)
			}
		})
	}
}

// TestOutcomeUnknown: a write the store cannot say committed or not is a
// 503 of its own, telling the client to read before writing again.
func TestOutcomeUnknown(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.Create(ctxT(t), deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	e.store.SetTxnHook(func([]raftstore.Op) error {
		return fmt.Errorf("%w: forward to leader 10.0.0.1:7947: raftstore: leader changed from 10.0.0.1:7947 to 10.0.0.2:7947", raftstore.ErrOutcomeUnknown)
	})
	_, err := e.c.Create(ctxT(t), deployment("db", nil))
	ae := apiErr(t, err, http.StatusServiceUnavailable, api.CodeOutcomeUnknown)
	for _, want := range []string{"leader changed from 10.0.0.1:7947 to 10.0.0.2:7947", "may or may not have been applied"} {
		if !strings.Contains(ae.Message, want) {
			t.Errorf("message %q does not say %q", ae.Message, want)
		}
	}
	// A timed-out commit is an unknown outcome too, not "no leader".
	e.store.SetTxnHook(func([]raftstore.Op) error {
		return fmt.Errorf("%w: txn: %w", raftstore.ErrOutcomeUnknown, context.DeadlineExceeded)
	})
	_, err = e.c.Scale(ctxT(t), "web", 2)
	if !api.IsCode(err, api.CodeOutcomeUnknown) {
		t.Errorf("Scale = %v, want code %s", err, api.CodeOutcomeUnknown)
	}
}

func TestNoLeader(t *testing.T) {
	e := newEnv(t)
	e.store.SetLeader(false)
	_, err := e.c.Create(ctxT(t), deployment("web", nil))
	ae := apiErr(t, err, http.StatusServiceUnavailable, "no_leader")
	if !strings.Contains(ae.Message, "no leader") {
		t.Errorf("message %q does not say there is no leader", ae.Message)
	}
	// Linearizable reads need a leader too; stale ones do not.
	_, _, err = e.c.List(ctxT(t), api.KindDeployment)
	apiErr(t, err, http.StatusServiceUnavailable, "no_leader")
	_, err = e.c.Get(ctxT(t), api.KindDeployment, "web")
	apiErr(t, err, http.StatusServiceUnavailable, "no_leader")
	if _, _, err := e.c.List(client.WithStale(ctxT(t)), api.KindDeployment); err != nil {
		t.Errorf("stale List without leader: %v", err)
	}
	_, err = e.c.Get(client.WithStale(ctxT(t)), api.KindDeployment, "web")
	apiErr(t, err, http.StatusNotFound, "not_found")
	for _, path := range []string{"/v1/deployments?stale", "/v1/deployments?stale=true", "/v1/deployments?stale=1"} {
		if code, body := e.raw(t, "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s without leader: %d %s, want 200", path, code, body)
		}
	}
	if code, body := e.raw(t, "GET", "/v1/deployments?stale=0", ""); code != http.StatusServiceUnavailable {
		t.Errorf("GET ?stale=0 without leader: %d %s, want 503", code, body)
	}
}

func TestToken(t *testing.T) {
	e := newEnv(t, func(c *httpapi.Config) { c.Token = "s3cret-0123456789abcdef" })
	tests := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"none", []string{"Authorization", ""}, 401},
		{"wrong", []string{"Authorization", "Bearer nope"}, 401},
		{"prefix", []string{"Authorization", "Bearer s3cret"}, 401},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401},
		{"not bearer", []string{"Authorization", "Basic s3cret-0123456789abcdef"}, 401},
		{"right", []string{"Authorization", "Bearer s3cret-0123456789abcdef"}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, "GET", "/v1/status", "", tc.hdr...)
			if code != tc.status {
				t.Fatalf("status %d (%s), want %d", code, body, tc.status)
			}
			if code == 401 && !strings.Contains(body, `"unauthorized"`) {
				t.Errorf("body %s lacks code unauthorized", body)
			}
		})
	}
	tc, _ := client.New([]string{e.srv.URL}, client.Options{Token: "s3cret-0123456789abcdef"})
	if _, err := tc.Status(ctxT(t)); err != nil {
		t.Errorf("client with token: %v", err)
	}
	noTok, _ := client.New([]string{e.srv.URL}, client.Options{})
	_, err := noTok.Status(ctxT(t))
	apiErr(t, err, http.StatusUnauthorized, "unauthorized")
}

func TestConfigValidate(t *testing.T) {
	if _, err := httpapi.New(httpapi.Config{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Errorf("New without store = %v, want an error naming Store", err)
	}
	cfg := httpapi.DefaultConfig()
	if err := cfg.Validate(); err == nil {
		t.Error("DefaultConfig without Store validated")
	}
}

// TestRouterEdges: the mux's own answers become API errors: 405 says what
// is allowed (and sets Allow), HEAD follows GET, a trailing slash is the
// same route.
func TestRouterEdges(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.Create(ctxT(t), deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), "GET") {
		t.Errorf("POST /v1/status = %d, Allow %q; want 405 allowing GET", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, body := e.raw(t, "DELETE", "/v1/apply", ""); code != 405 || !strings.Contains(body, `"code":"bad_request"`) || !strings.Contains(body, "(allowed: POST)") {
		t.Errorf("DELETE /v1/apply = %d %s, want a JSON 405 naming POST", code, body)
	}
	if code, _ := e.raw(t, "HEAD", "/v1/deployments/web", ""); code != 200 {
		t.Errorf("HEAD /v1/deployments/web = %d, want 200", code)
	}
	if code, body := e.raw(t, "GET", "/v1/deployments/web/", ""); code != 200 || !strings.Contains(body, `"name":"web"`) {
		t.Errorf("GET with a trailing slash = %d %s, want the deployment", code, body)
	}
}
