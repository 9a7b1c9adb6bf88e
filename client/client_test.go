package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// testToken is the token of the test servers.
const testToken = "client-test-token-0123456789"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// agent starts an API server over a raftstore.MemStore.
func agent(t *testing.T, node string) *httptest.Server {
	t.Helper()
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Token = testToken
	cfg.Status = func(context.Context) api.ClusterStatus { return api.ClusterStatus{Node: node} }
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// noWait is a backoff that retries at once.
func noWait(int) time.Duration { return 0 }

func TestNewValidatesAddresses(t *testing.T) {
	tests := []struct {
		name  string
		addrs []string
		err   string // substring; "" means valid
	}{
		{"http", []string{"http://127.0.0.1:7948"}, ""},
		{"https no port", []string{"https://pi1.local"}, ""},
		{"unix", []string{"unix:///run/herd/api.sock"}, ""},
		{"several", []string{"http://10.0.0.1:7948", "unix:///run/herd/api.sock"}, ""},
		{"none", nil, "no agent address"},
		{"no scheme", []string{"127.0.0.1:7948"}, "127.0.0.1:7948"},
		{"no scheme host", []string{"pi1"}, "missing scheme"},
		{"bad scheme", []string{"ftp://pi1:21"}, `unsupported scheme "ftp"`},
		{"no host", []string{"http://:7948"}, "missing host"},
		{"bad port", []string{"http://pi1:99999"}, "bad port"},
		{"path", []string{"http://pi1:7948/api"}, "without path"},
		{"unix relative", []string{"unix://run/herd.sock"}, "unix:///absolute"},
		{"unix empty", []string{"unix://"}, "unix:///absolute"},
		{"second bad", []string{"http://pi1:7948", "tcp://pi2"}, `"tcp://pi2"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.addrs, client.Options{Token: testToken})
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("New(%q) = %v, want ok", tc.addrs, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("New(%q) = %v, want an error containing %q", tc.addrs, err, tc.err)
			}
		})
	}
}

func TestFailover(t *testing.T) {
	dead := "http://" + testutil.FreeAddr(t)
	live := agent(t, "pi2")
	c, err := client.New([]string{dead, live.URL}, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctxT(t))
	if err != nil {
		t.Fatalf("Status with the first address refusing: %v", err)
	}
	if st.Node != "pi2" {
		t.Errorf("answered by %q, want pi2", st.Node)
	}
	if c.Addr() != live.URL {
		t.Errorf("Addr() = %q, want the address that answered, %q", c.Addr(), live.URL)
	}
	// A write is safe to send on: the refused address never saw it.
	if _, err := c.Apply(ctxT(t), []api.Object{&api.Service{Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Target: "http"}}}}}, false); err != nil {
		t.Errorf("Apply after failover: %v", err)
	}
	// An HTTP error is an answer: no failover past it.
	c2, _ := client.New([]string{live.URL, agent(t, "pi3").URL}, client.Options{Token: testToken})
	_, err = c2.Get(ctxT(t), api.KindDeployment, "missing")
	if !api.IsCode(err, "not_found") || c2.Addr() != live.URL {
		t.Errorf("Get missing = %v via %s, want not_found from the first address", err, c2.Addr())
	}
}

func TestAllUnreachable(t *testing.T) {
	a, b := "http://"+testutil.FreeAddr(t), "http://"+testutil.FreeAddr(t)
	c, _ := client.New([]string{a, b, "unix:///nonexistent/herd.sock"}, client.Options{Token: testToken, Backoff: noWait})
	_, err := c.Status(ctxT(t))
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Status = %v, want ErrUnreachable", err)
	}
	for _, want := range []string{a, b, "/nonexistent/herd.sock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := c.Watch(ctxT(t), "", 0); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("Watch = %v, want ErrUnreachable", err)
	}
}

func TestAPIErrorDecoding(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   *api.APIError
	}{
		{"api error", 400, `{"code":"invalid","message":"bad","fields":[{"object":"deployments/x","field":"spec.replicas","message":"too many"}]}`,
			&api.APIError{StatusCode: 400, Code: "invalid", Message: "bad",
				Fields: []api.FieldError{{Object: "deployments/x", Field: "spec.replicas", Message: "too many"}}}},
		{"proxy page", 502, "<html>bad gateway</html>",
			&api.APIError{StatusCode: 502, Code: "no_leader", Message: "502 Bad Gateway: <html>bad gateway</html>"}},
		{"empty", 409, "", &api.APIError{StatusCode: 409, Code: "conflict", Message: "409 Conflict"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, _ := client.New([]string{srv.URL}, client.Options{Token: testToken, Retries: -1})
			_, err := c.Get(ctxT(t), api.KindDeployment, "x")
			var ae *api.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want *api.APIError", err, err)
			}
			if d := cmp.Diff(tc.want, ae); d != "" {
				t.Errorf("api.APIError (-want +got):\n%s", d)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	c, _ := client.New([]string{srv.URL}, client.Options{Token: testToken, Timeout: 50 * time.Millisecond})
	if _, err := c.Status(ctxT(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Status against a hung agent = %v, want a deadline error", err)
	}
}
