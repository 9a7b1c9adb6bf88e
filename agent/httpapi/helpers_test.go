package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

var _ httpapi.Store = (*raftstore.MemStore)(nil)

// t0 is the fixed time of the test clock.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testToken is the token newEnv's server accepts and its client sends.
const testToken = "test-token-0123456789abcdef"

// env is a server on httptest over a raftstore.MemStore and a client of it.
type env struct {
	store *raftstore.MemStore
	srv   *httptest.Server
	c     *client.Client
}

func newEnv(t *testing.T, mutate ...func(*httpapi.Config)) *env {
	t.Helper()
	st := raftstore.NewMemStore(clock.NowFunc(func() time.Time { return t0 }))
	cfg := httpapi.DefaultConfig()
	cfg.Store = st
	cfg.Clock = clocktest.New(t0)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	cfg.Status = func(context.Context) api.ClusterStatus {
		return api.ClusterStatus{Node: "pi1", Leader: "pi1", Version: "test",
			Servers: []api.RaftServer{{ID: "pi1", Address: "10.0.0.1:7947", Suffrage: "voter", Leader: true}},
			Members: []api.GossipMember{{Name: "pi1", Addr: "10.0.0.1", State: "alive", Server: true}}}
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.URL}, client.Options{Token: cfg.Token, Retries: -1}) // the server's own answers
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return &env{store: st, srv: srv, c: c}
}

// raw sends a request and returns the status code and body.
func (e *env) raw(t *testing.T, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func intp(i int) *int { return &i }

func deployment(name string, replicas *int, argv ...string) *api.Deployment {
	if len(argv) == 0 {
		argv = []string{"/usr/bin/" + name, "--port=8080"}
	}
	return &api.Deployment{
		Kind:     api.KindDeployment,
		Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"team": "web"}},
		Spec: api.DeploymentSpec{
			Replicas: replicas,
			Template: api.PodTemplate{
				Labels: map[string]string{"app": name},
				Exec:   argv,
				Ports:  []api.Port{{Name: "http", Port: 8080}},
			},
		},
	}
}

func service(name string) *api.Service {
	return &api.Service{
		Kind:     api.KindService,
		Metadata: api.ObjectMeta{Name: name},
		Spec: api.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []api.ServicePort{{Target: "http"}},
		},
	}
}

// typed decodes a raw object.
func typed[T api.Object](t *testing.T, r api.RawObject) T {
	t.Helper()
	o, err := api.FromRaw(r)
	if err != nil {
		t.Fatalf("FromRaw(%s/%s): %v", r.Kind, r.Metadata.Name, err)
	}
	return o.(T)
}

// apiErr asserts err is an *api.APIError with status and code.
func apiErr(t *testing.T, err error, status int, code string) *api.APIError {
	t.Helper()
	ae, ok := err.(*api.APIError)
	if !ok {
		t.Fatalf("error %v (%T), want *api.APIError", err, err)
	}
	if ae.StatusCode != status || ae.Code != code {
		t.Fatalf("error %d %q (%s), want %d %q", ae.StatusCode, ae.Code, ae.Message, status, code)
	}
	return ae
}

func diff(t *testing.T, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func decodeErr(t *testing.T, body string) api.APIError {
	t.Helper()
	var ae api.APIError
	if err := json.Unmarshal([]byte(body), &ae); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", body, err)
	}
	return ae
}

func decodeEvent(t *testing.T, line string) api.WatchEvent {
	t.Helper()
	var ev api.WatchEvent
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("watch line %q: %v", line, err)
	}
	return ev
}
