package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/agent/metrics"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

const metricsToken = "metrics-token-0123456789abcdef"

// metricsEnv is newEnv with the metrics of its MemStore at /metrics and a
// metrics token, and two stored pods (one Running, one Pending).
func metricsEnv(t *testing.T) (*env, *httpapi.Server) {
	t.Helper()
	e := newEnv(t, func(c *httpapi.Config) {
		reg := metrics.New("test")
		reg.AddState(c.Store.(*raftstore.MemStore))
		c.Metrics = reg.Handler()
		c.MetricsTokens = httpapi.StaticTokens{metricsToken}
	})
	for _, p := range []*api.Pod{
		{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-1"}, Spec: api.PodSpec{Node: "pi2", Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
			Status: api.PodStatus{Phase: api.PodRunning}},
		{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-2"}, Spec: api.PodSpec{Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
			Status: api.PodStatus{Phase: api.PodPending}},
	} {
		raw, err := api.ToRaw(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Txn(ctxT(t), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := httpapi.DefaultConfig()
	cfg.Store = e.store
	cfg.Token = testToken
	cfg.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("herd_test 1\n")) })
	cfg.MetricsTokens = httpapi.StaticTokens{metricsToken}
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, srv
}

// TestMetricsRoute: /metrics answers the API token and the metrics token,
// nobody else; the metrics token reaches nothing else.
func TestMetricsRoute(t *testing.T) {
	e, _ := metricsEnv(t)
	for _, c := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"no token", "GET", "/metrics", "", http.StatusUnauthorized},
		{"wrong token", "GET", "/metrics", "wrong-token-0123456789abcdef", http.StatusUnauthorized},
		{"api token", "GET", "/metrics", testToken, http.StatusOK},
		{"metrics token", "GET", "/metrics", metricsToken, http.StatusOK},
		{"metrics token head", "HEAD", "/metrics", metricsToken, http.StatusOK},
		{"post", "POST", "/metrics", testToken, http.StatusMethodNotAllowed},
		{"metrics token on a list", "GET", "/v1/pods", metricsToken, http.StatusForbidden},
		{"metrics token on status", "GET", "/v1/status", metricsToken, http.StatusForbidden},
		{"metrics token on a write", "DELETE", "/v1/pods/web-1", metricsToken, http.StatusForbidden},
		{"api token on a list", "GET", "/v1/pods", testToken, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := e.raw(t, c.method, c.path, "", "Authorization", bearer(c.token))
			if code != c.want {
				t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
			}
		})
	}
	code, body := e.raw(t, "GET", "/metrics", "", "Authorization", bearer(metricsToken))
	for _, want := range []string{`herd_pods{phase="Running"} 1`, `herd_pods{phase="Pending"} 1`, `herd_pods{phase="Lost"} 0`, `herd_build_info{`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// TestMetricsHandlerServesOnlyMetrics: the metrics listener's handler
// serves /metrics behind the same checks, and no API route.
func TestMetricsHandlerServesOnlyMetrics(t *testing.T) {
	_, srv := metricsEnv(t)
	ts := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(ts.Close)
	e := &env{srv: ts}
	for _, c := range []struct {
		name, path, token, host string
		want                    int
	}{
		{"metrics token", "/metrics", metricsToken, "", http.StatusOK},
		{"api token", "/metrics", testToken, "", http.StatusOK},
		{"no token", "/metrics", "", "", http.StatusUnauthorized},
		{"rebinding host", "/metrics", metricsToken, "evil.example:7949", http.StatusMisdirectedRequest},
		{"api route", "/v1/pods", testToken, "", http.StatusNotFound},
		{"metrics token on an api route", "/v1/pods", metricsToken, "", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := []string{"Authorization", bearer(c.token)}
			if c.host != "" {
				hdr = append(hdr, "Host", c.host)
			}
			code, body := e.raw(t, "GET", c.path, "", hdr...)
			if code != c.want {
				t.Errorf("GET %s: %d %s, want %d", c.path, code, body, c.want)
			}
		})
	}
}

func bearer(tok string) string {
	if tok == "" {
		return ""
	}
	return "Bearer " + tok
}
