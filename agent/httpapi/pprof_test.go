package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herd-dev/herd/agent/httpapi"
)

// TestPprofRoutes: with Pprof on, the profiles answer the API token only;
// with it off (the default) they are not there for anyone.
func TestPprofRoutes(t *testing.T) {
	on := newEnv(t, func(c *httpapi.Config) {
		c.Pprof = true
		c.MetricsTokens = httpapi.StaticTokens{metricsToken}
	})
	off := newEnv(t, func(c *httpapi.Config) {
		c.MetricsTokens = httpapi.StaticTokens{metricsToken}
	})
	for _, c := range []struct {
		name   string
		e      *env
		method string
		path   string
		token  string
		want   int
		body   string // a substring of the body, when set
	}{
		{"on: no token", on, "GET", "/debug/pprof/", "", http.StatusUnauthorized, "missing bearer token"},
		{"on: wrong token", on, "GET", "/debug/pprof/heap", "wrong-token-0123456789abcdef", http.StatusUnauthorized, "invalid bearer token"},
		{"on: metrics token", on, "GET", "/debug/pprof/heap", metricsToken, http.StatusForbidden, "grants only GET /metrics"},
		{"on: no token, cpu profile", on, "GET", "/debug/pprof/profile?seconds=1", "", http.StatusUnauthorized, ""},
		{"on: index", on, "GET", "/debug/pprof/", testToken, http.StatusOK, "goroutine"},
		{"on: heap", on, "GET", "/debug/pprof/heap?debug=1", testToken, http.StatusOK, "heap profile"},
		{"on: goroutine", on, "GET", "/debug/pprof/goroutine?debug=1", testToken, http.StatusOK, "goroutine profile"},
		{"on: cmdline", on, "GET", "/debug/pprof/cmdline", testToken, http.StatusOK, ""},
		{"on: cpu profile", on, "GET", "/debug/pprof/profile?seconds=1", testToken, http.StatusOK, "\x1f\x8b"},
		{"on: trace", on, "GET", "/debug/pprof/trace?seconds=1", testToken, http.StatusOK, "go 1."},
		{"on: unknown profile", on, "GET", "/debug/pprof/nope", testToken, http.StatusNotFound, `no profile "nope"`},
		{"on: bad seconds", on, "GET", "/debug/pprof/profile?seconds=0", testToken, http.StatusBadRequest, "want a whole number from 1 to 600"},
		{"on: bad debug", on, "GET", "/debug/pprof/heap?debug=x", testToken, http.StatusBadRequest, "?debug="},
		{"on: post", on, "POST", "/debug/pprof/symbol", testToken, http.StatusMethodNotAllowed, ""},
		{"off: api token", off, "GET", "/debug/pprof/", testToken, http.StatusNotFound, "profiling is off"},
		{"off: heap", off, "GET", "/debug/pprof/heap", testToken, http.StatusNotFound, "profiling is off"},
		{"off: no token", off, "GET", "/debug/pprof/heap", "", http.StatusUnauthorized, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := c.e.raw(t, c.method, c.path, "", "Authorization", bearer(c.token))
			if code != c.want {
				t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
			}
			if !strings.Contains(body, c.body) {
				t.Errorf("%s %s: body %q does not contain %q", c.method, c.path, body, c.body)
			}
		})
	}
}

// TestPprofNotOnMetricsListener: a metrics listener serves /metrics only,
// even with Pprof on and the API token.
func TestPprofNotOnMetricsListener(t *testing.T) {
	e := newEnv(t)
	cfg := httpapi.DefaultConfig()
	cfg.Store = e.store
	cfg.Token = testToken
	cfg.Pprof = true
	cfg.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("herd_test 1\n")) })
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(ts.Close)
	req, err := http.NewRequest("GET", ts.URL+"/debug/pprof/heap", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/heap on the metrics listener: %d, want 404", resp.StatusCode)
	}
}
