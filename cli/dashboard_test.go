package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// ForwardGet lets herdctl dashboard forward through the spy.
func (r *recorder) ForwardGet(ctx context.Context, path, rawQuery string, stream bool) (*http.Response, context.CancelFunc, error) {
	r.h.record("forward %s", path)
	return r.c.(dashForwarder).ForwardGet(ctx, path, rawQuery, stream)
}

// startDashboard runs `herdctl dashboard --no-open` in-process against
// h's API until the test ends, and returns the one-time URL it printed.
func (h *harness) startDashboard() string {
	h.t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- h.runTo(&stdout, &stderr, "dashboard", "--no-open") }()
	h.t.Cleanup(func() {
		h.cancel() // ends the dashboard: the test is over
		if code := <-done; code != 0 {
			h.t.Errorf("herdctl dashboard exited %d: %s", code, stderr.String())
		}
	})
	var u string
	testutil.Until(h.t, 10*time.Second, "herdctl dashboard prints its URL", func() bool {
		line, _, ok := strings.Cut(stdout.String(), "\n")
		u = line
		return ok
	})
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.Contains(u, "/login?code=") {
		h.t.Fatalf("herdctl dashboard printed %q, want http://127.0.0.1:PORT/login?code=...", u)
	}
	return u
}

// noRedirect is a client that does not follow redirects and keeps cookies.
func noRedirect(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func doReq(t *testing.T, c *http.Client, method, u string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestDashboardSecurity(t *testing.T) {
	h := newHarness(t)
	h.put(dashNode("b1", api.NodeReady, "10.0.0.1"))
	login := h.startDashboard()
	lu, _ := url.Parse(login)
	base := "http://" + lu.Host

	anon := noRedirect(t)
	if resp, body := doReq(t, anon, "GET", base+"/ui/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/ without a cookie = %d, want 401: %s", resp.StatusCode, body)
	}
	if resp, _ := doReq(t, anon, "GET", base+"/v1/nodes"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/nodes without a cookie = %d, want 401", resp.StatusCode)
	}
	if resp, _ := doReq(t, anon, "GET", base+"/login?code=wrong"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a wrong code = %d, want 403", resp.StatusCode)
	}
	if resp, _ := doReq(t, anon, "GET", login, "Host", "evil.example:"+lu.Port()); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("the code with a rebinding Host = %d, want 421", resp.StatusCode)
	}
	if resp, _ := doReq(t, anon, "GET", login, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the code from a cross-site link = %d, want 403", resp.StatusCode)
	}

	if resp, _ := doReq(t, anon, "HEAD", login); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("HEAD of the one-time URL = %d, want 405 (and the code kept)", resp.StatusCode)
	}

	// The code is exchanged once for an HttpOnly, SameSite=Strict cookie,
	// and the browser is sent on to a URL without it.
	user := noRedirect(t)
	resp, _ := doReq(t, user, "GET", login)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login = %d Location %q, want 303 /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{dashCookie + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	if resp, _ := doReq(t, noRedirect(t), "GET", login); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reused one-time code = %d, want 403", resp.StatusCode)
	}

	resp, page := doReq(t, user, "GET", base+"/ui/")
	if resp.StatusCode != 200 || !strings.Contains(page, "app.js") {
		t.Fatalf("GET /ui/ with the session = %d: %s", resp.StatusCode, page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("the page's CSP %q", csp)
	}
	_, js := doReq(t, user, "GET", base+"/ui/app.js")
	resp, nodes := doReq(t, user, "GET", base+"/v1/nodes")
	if resp.StatusCode != 200 || !strings.Contains(nodes, `"b1"`) {
		t.Errorf("GET /v1/nodes with the session = %d: %s", resp.StatusCode, nodes)
	}
	for what, s := range map[string]string{"page": page, "app.js": js, "nodes": nodes, "Set-Cookie": sc} {
		if strings.Contains(s, harnessToken) {
			t.Errorf("the API token is in the %s", what)
		}
	}

	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		want               int
	}{
		{"post", "POST", "/v1/apply", nil, http.StatusMethodNotAllowed},
		{"delete", "DELETE", "/v1/nodes/b1", nil, http.StatusMethodNotAllowed},
		{"put", "PUT", "/v1/deployments/web/scale", nil, http.StatusMethodNotAllowed},
		{"foreign host", "GET", "/v1/nodes", []string{"Host", "evil.example:" + lu.Port()}, http.StatusMisdirectedRequest},
		{"localhost host", "GET", "/v1/nodes", []string{"Host", "localhost:" + lu.Port()}, http.StatusMisdirectedRequest},
		{"foreign origin", "GET", "/v1/nodes", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"other port origin", "GET", "/v1/nodes", []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
		{"own origin", "GET", "/v1/nodes", []string{"Origin", base}, http.StatusOK},
		{"not the API", "GET", "/metrics", nil, http.StatusNotFound},
		{"dot dot", "GET", "/ui/%2e%2e/v1/status", nil, http.StatusBadRequest},
		{"root", "GET", "/", nil, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, user, tc.method, base+tc.path, tc.hdr...)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s = %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.want, body)
			}
		})
	}
	for _, c := range h.Calls() {
		if !strings.HasPrefix(c, "forward /ui/") && !strings.HasPrefix(c, "forward /v1/") {
			t.Errorf("the dashboard made a call other than a forwarded GET: %s", c)
		}
	}
}

// dashNode is a board as its agent reports it.
func dashNode(name string, phase api.NodePhase, addr string) *api.Node {
	return &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name},
		Status: api.NodeStatus{Phase: phase, Since: time.Now().Add(-10 * time.Minute), Address: addr, BoardFacts: api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", Model: "Raspberry Pi 4 Model B", CPUs: 4, MemoryBytes: 4 << 30, Kernel: "6.1.0-rpi7", Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "memory", "pids"}}, Version: "v0.9.0", Server: true,
			Conditions: []api.Condition{{Type: api.ConditionReady, Status: api.ConditionTrue}}}}
}

// dashPod is a deployment's pod placed on node.
func dashPod(name, node string, phase api.PodPhase, ready bool) *api.Pod {
	return &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "web"}, Node: node,
			Template: api.PodTemplate{Exec: []string{"/usr/bin/web"}}},
		Status: api.PodStatus{Phase: phase, Ready: ready}}
}

// putEvent records an event in the store as the leader's recorder does.
func (h *harness) putEvent(rv uint64, spec api.EventSpec) {
	h.t.Helper()
	e := &api.Event{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: api.EventName(rv, 0), Labels: api.EventLabels(spec)}, Spec: spec}
	if err := api.ValidateEvent(e); err != nil {
		h.t.Fatal(err)
	}
	h.put(e)
}

// oldAgent answers as an agent that predates the dashboard.
type oldAgent struct{}

func (oldAgent) ForwardGet(_ context.Context, path, _ string, _ bool) (*http.Response, context.CancelFunc, error) {
	return nil, nil, &api.APIError{StatusCode: http.StatusNotFound, Code: api.CodeNotFound,
		Message: "no route " + path + ": the API lives under /v1/"}
}

func TestDashboardOnAnOlderAgent(t *testing.T) {
	d, err := newDashServer(oldAgent{}, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9/login?code="+url.QueryEscape(strings.TrimPrefix(d.loginURL(), "http://127.0.0.1:9/login?code=")), nil))
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies", len(cookies))
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1:9/ui/", nil)
	req.AddCookie(cookies[0])
	rec = httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "upgrade herd") {
		t.Errorf("GET /ui/ of an older agent = %d %q, want 404 saying to upgrade", rec.Code, rec.Body.String())
	}
}
