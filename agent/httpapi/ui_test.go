package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

func TestUIServesTheEmbeddedPage(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ path, ctype, want string }{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/v1/watch?resourceVersion="},
		{"/ui/style.css", "text/css; charset=utf-8", ".board"},
		{"/ui/icon.svg", "image/svg+xml", "<svg"},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = copyAll(&b, resp)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(b.String(), tc.want) {
			t.Errorf("GET %s = %d %q, body has %q: %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.want, strings.Contains(b.String(), tc.want))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
}

func TestUIBehindTheGuard(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		want               int
	}{
		{"no token", "GET", "/ui/", []string{"Authorization", ""}, http.StatusUnauthorized},
		{"wrong token", "GET", "/ui/app.js", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"rebinding host", "GET", "/ui/", []string{"Host", "evil.example:8080"}, http.StatusMisdirectedRequest},
		{"foreign origin", "GET", "/ui/", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"post", "POST", "/ui/", nil, http.StatusMethodNotAllowed},
		{"unknown file", "GET", "/ui/secret.txt", nil, http.StatusNotFound},
		{"dot dot", "GET", "/ui/../v1/status", nil, http.StatusNotFound},
		{"no slash", "GET", "/ui", nil, http.StatusOK}, // followed redirect to /ui/
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, tc.method, tc.path, "", tc.hdr...)
			if code != tc.want {
				t.Errorf("%s %s = %d, want %d: %s", tc.method, tc.path, code, tc.want, body)
			}
		})
	}
}

func TestUIWarnings(t *testing.T) {
	e := newEnv(t)
	nodes := []api.Node{
		{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b1"}, Status: api.NodeStatus{Phase: api.NodeReady, BoardFacts: api.BoardFacts{Cgroup: "v2", CgroupControllers: []string{"cpu", "memory"}}}},
		{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b2"}, Status: api.NodeStatus{Phase: api.NodeReady, BoardFacts: api.BoardFacts{Cgroup: "v2", CgroupControllers: []string{"cpu"}, Model: "Raspberry Pi 4 Model B"}}},
	}
	for i := range nodes {
		raw, err := api.ToRaw(&nodes[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := e.raw(t, "GET", "/ui/warnings", "")
	if code != 200 {
		t.Fatalf("GET /ui/warnings = %d: %s", code, body)
	}
	var got map[string][]struct{ Short, Message string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	var shorts []string
	for _, w := range got["b2"] {
		shorts = append(shorts, w.Short)
	}
	if diff := cmp.Diff([]string{"no-memory-limits"}, shorts); diff != "" || len(got) != 1 {
		t.Errorf("warnings %s (-want +got):\n%s", body, diff)
	}
}

func copyAll(b *strings.Builder, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	return io.Copy(b, resp.Body)
}
