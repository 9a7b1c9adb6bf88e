package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
)

// fuzzRoutes are the write endpoints whose JSON bodies FuzzAPIBodies
// feeds; the fuzzer picks one by index.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/apply"},
	{http.MethodPost, "/v1/deployments"},
	{http.MethodPost, "/v1/services"},
	{http.MethodPost, "/v1/daemons"},
	{http.MethodPut, "/v1/deployments/web"},
	{http.MethodPut, "/v1/services/web"},
	{http.MethodPut, "/v1/deployments/web/scale"},
}

func mustJSON(f *testing.F, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzAPIBodies sends arbitrary bytes as the body of every write endpoint
// against an in-memory store holding a deployment and a service "web". A
// request must not panic the server, must finish in bounded time, and
// either succeed or answer 4xx with a JSON error body and store nothing.
func FuzzAPIBodies(f *testing.F) {
	dep := deployment("api", intp(2))
	upd := deployment("web", intp(3))
	upd.Spec.Template.Env = map[string]string{"MODE": "prod"}
	daemon := &api.Daemon{Kind: api.KindDaemon, Metadata: api.ObjectMeta{Name: "exporter"},
		Spec: api.DaemonSpec{Template: api.PodTemplate{Exec: []string{"/usr/bin/exporter"}}}}
	applyReq := func(objs ...api.Object) []byte {
		req := api.ApplyRequest{}
		for _, o := range objs {
			req.Objects = append(req.Objects, mustJSON(f, o))
		}
		return mustJSON(f, req)
	}
	seeds := []struct {
		route int
		body  []byte
	}{
		{0, applyReq(dep, service("api"))},
		{0, applyReq(upd)},
		{1, mustJSON(f, dep)},
		{2, mustJSON(f, service("api"))},
		{3, mustJSON(f, daemon)},
		{4, mustJSON(f, upd)},
		{5, mustJSON(f, service("web"))},
		{6, []byte(`{"replicas":5}`)},
		{6, []byte(`{"replicas":-1}`)},
		{0, []byte(`{"objects":[` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `]}`)},
		{1, []byte(`{"kind":"deployment","metadata":{"name":"x"},"spec":{"template":{"exec":["/bin/x"],"ports":[{"port":1e99}]}}}`)},
		{4, []byte(`{"kind":"deployment","metadata":{"name":"other"},"spec":{}}`)},
		{0, []byte(`{"objects":[{"kind":"pod","metadata":{"name":"p"}}]}`)},
		{1, []byte("\x00\xff{")},
	}
	for _, s := range seeds {
		f.Add(uint8(s.route), s.body)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		e := newEnv(t)
		ctx := ctxT(t)
		if _, err := e.c.Create(ctx, deployment("web", intp(1))); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Create(ctx, service("web")); err != nil {
			t.Fatal(err)
		}
		before := e.store.ResourceVersion()

		start := time.Now()
		code, resp := e.raw(t, r.method, r.path, string(body), "Content-Type", "application/json")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s %s took %s", r.method, r.path, d)
		}
		switch {
		case code >= 200 && code < 300:
			if !json.Valid([]byte(resp)) {
				t.Errorf("%s %s: %d with a body that is not JSON: %.200q", r.method, r.path, code, resp)
			}
		case code >= 400 && code < 500:
			ae := decodeErr(t, resp)
			if ae.Code == "" || ae.Message == "" {
				t.Errorf("%s %s: %d with error body %.200q, want a code and a message", r.method, r.path, code, resp)
			}
			if after := e.store.ResourceVersion(); after != before {
				t.Errorf("%s %s: refused with %d but the store changed (resource version %d -> %d)", r.method, r.path, code, before, after)
			}
		default:
			t.Errorf("%s %s: status %d (body %.200q), want 2xx or 4xx", r.method, r.path, code, resp)
		}
	})
}

// TestAPIRefusesHostileJSON sends bodies that are quadratic or deeply
// recursive for a naive reader: each is refused with a 4xx JSON error,
// quickly, and nothing is stored.
func TestAPIRefusesHostileJSON(t *testing.T) {
	e := newEnv(t)
	const n = 512 << 10
	deep := strings.Repeat("[", n) + strings.Repeat("]", n)
	bodies := map[string]struct{ method, path, body string }{
		"apply, nested arrays":        {http.MethodPost, "/v1/apply", `{"objects":[` + deep + `]}`},
		"create, nested arrays":       {http.MethodPost, "/v1/deployments", deep},
		"create, nested objects":      {http.MethodPost, "/v1/deployments", strings.Repeat(`{"a":`, n/5) + "1" + strings.Repeat("}", n/5)},
		"create, long string":         {http.MethodPost, "/v1/deployments", `{"kind":"deployment","metadata":{"name":"` + strings.Repeat("a", 3<<20) + `"}}`},
		"scale, nested arrays":        {http.MethodPut, "/v1/deployments/web/scale", `{"replicas":` + deep + `}`},
		"apply, many tiny objects":    {http.MethodPost, "/v1/apply", `{"objects":[` + strings.Repeat(`{},`, n) + `{}]}`},
		"update, over the body limit": {http.MethodPut, "/v1/deployments/web", strings.Repeat(" ", httpapi.DefaultMaxBodyBytes+1)},
	}
	before := e.store.ResourceVersion()
	for name, b := range bodies {
		start := time.Now()
		code, resp := e.raw(t, b.method, b.path, b.body, "Content-Type", "application/json")
		if code < 400 || code >= 500 {
			t.Errorf("%s: status %d (%.200s), want 4xx", name, code, resp)
			continue
		}
		if ae := decodeErr(t, resp); ae.Message == "" {
			t.Errorf("%s: error body %.200q has no message", name, resp)
		}
		if len(resp) > 64<<10 {
			t.Errorf("%s: a %d-byte error answer to a %d-byte body", name, len(resp), len(b.body))
		}
		t.Logf("%s: %d in %s, %d-byte answer", name, code, time.Since(start), len(resp))
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %s", name, d)
		}
	}
	if after := e.store.ResourceVersion(); after != before {
		t.Errorf("hostile bodies changed the store: resource version %d -> %d", before, after)
	}
}
