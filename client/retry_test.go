package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// fault is how a flaky agent fails a request.
type fault int

const (
	noLeader       fault = iota // 503 no_leader: certainly not applied
	outcomeUnknown              // 503 outcome_unknown: maybe applied
	reset                       // the connection closes after the request was read
	appliedReset                // the request is applied, then the connection closes
)

func (f fault) String() string {
	return [...]string{"no_leader", "outcome_unknown", "reset", "applied_reset"}[f]
}

// flaky is an agent that fails the next `fails` requests with fault, then
// passes them to the real API, counting every request it receives.
type flaky struct {
	next  http.Handler
	front string // its URL

	// between, when set, runs after a request applied by appliedReset
	// and before its connection is cut: another client's write.
	between func()

	mu       sync.Mutex
	fails    int
	fault    fault
	requests int
	ids      []string // the Herd-Request-Id of every request
}

func (f *flaky) arm(n int, ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails, f.fault, f.requests, f.ids = n, ft, 0, nil
}

func (f *flaky) requestIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	f.ids = append(f.ids, r.Header.Get(api.HeaderRequestID))
	fail, ft := f.fails > 0, f.fault
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if !fail {
		f.next.ServeHTTP(w, r)
		return
	}
	switch ft {
	case appliedReset:
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		if f.between != nil {
			f.between()
		}
		fallthrough
	case reset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(api.APIError{Code: ft.String(), Message: "injected " + ft.String()})
	}
}

// flakyAgent starts an API server behind a flaky front and a client of it
// that retries without waiting (backoffs records the retries' numbers).
func flakyAgent(t *testing.T, retries int) (*flaky, *client.Client, *[]int) {
	t.Helper()
	srv := agent(t, "pi1")
	f := &flaky{next: srv.Config.Handler}
	front := httptest.NewServer(f)
	t.Cleanup(front.Close)
	f.front = front.URL
	var backoffs []int
	c, err := client.New([]string{front.URL}, client.Options{
		Token:   testToken,
		Retries: retries,
		Backoff: func(n int) time.Duration { backoffs = append(backoffs, n); return 0 },
		// No connection reuse: net/http would itself resend a GET whose
		// reused connection broke, hiding the client's own count.
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, &backoffs
}

// TestRetries: every request, reads and writes, is sent again after every
// retryable failure: a write carries a request id, the same on each of
// its attempts, which makes a resend safe.
func TestRetries(t *testing.T) {
	ops := []struct {
		name string
		safe bool // may be retried whatever its outcome
		do   func(ctx context.Context, c *client.Client, arm func()) error
	}{
		{"get", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Get(ctx, api.KindDeployment, "web")
			return err
		}},
		{"list", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, _, err := c.List(ctx, api.KindDeployment)
			return err
		}},
		{"status", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Status(ctx)
			return err
		}},
		{"cas update", true, func(ctx context.Context, c *client.Client, arm func()) error {
			cur, err := c.Get(ctx, api.KindDeployment, "web")
			if err != nil {
				return err
			}
			d := deploymentNamed("web")
			d.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
			d.Metadata.Labels = map[string]string{"tier": "front"}
			arm()
			_, err = c.Update(ctx, d)
			return err
		}},
		{"scale", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Scale(ctx, "web", 3)
			return err
		}},
		{"apply", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Apply(ctx, []api.Object{deploymentNamed("web")}, false)
			return err
		}},
		{"create", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Create(ctx, deploymentNamed("new"))
			return err
		}},
		{"unconditional update", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			_, err := c.Update(ctx, deploymentNamed("web"))
			return err
		}},
		{"delete", true, func(ctx context.Context, c *client.Client, arm func()) error {
			arm()
			return c.Delete(ctx, api.KindDeployment, "gone")
		}},
	}
	const failures = 2
	for _, op := range ops {
		for _, ft := range []fault{noLeader, outcomeUnknown, reset, appliedReset} {
			t.Run(op.name+"/"+ft.String(), func(t *testing.T) {
				f, c, backoffs := flakyAgent(t, 5)
				ctx := ctxT(t)
				for _, name := range []string{"web", "gone"} {
					if _, err := c.Create(ctx, deploymentNamed(name)); err != nil {
						t.Fatal(err)
					}
				}
				wantRetried := op.safe || ft == noLeader
				*backoffs = nil
				err := op.do(ctx, c, func() { f.arm(failures, ft) })
				if wantRetried {
					if err != nil {
						t.Fatalf("err = %v, want success after %d retries", err, failures)
					}
					if got := f.count(); got != failures+1 {
						t.Errorf("%d requests, want %d", got, failures+1)
					}
					if len(*backoffs) != failures || (*backoffs)[0] != 1 || (*backoffs)[1] != 2 {
						t.Errorf("backoffs for retries %v, want [1 2]", *backoffs)
					}
					if ids := f.requestIDs(); ids[0] != ids[1] || ids[1] != ids[2] {
						t.Errorf("attempts carried request ids %q, want one id on all", ids)
					}
					return
				}
				if err == nil {
					t.Fatal("succeeded, want the first failure reported")
				}
				if got := f.count(); got != 1 {
					t.Errorf("%d requests, want 1: a write of unknown outcome is never resent", got)
				}
				if ft == outcomeUnknown && !api.IsCode(err, api.CodeOutcomeUnknown) {
					t.Errorf("err = %v, want code %s", err, api.CodeOutcomeUnknown)
				}
			})
		}
	}
}

// TestResentWriteAppliedOnce: a scale whose first attempt was applied,
// and whose connection then broke after another client's write landed, is
// resent and not applied again: the other write stays.
func TestResentWriteAppliedOnce(t *testing.T) {
	f, c, _ := flakyAgent(t, 5)
	ctx := ctxT(t)
	if _, err := c.Create(ctx, deploymentNamed("web")); err != nil {
		t.Fatal(err)
	}
	otherC, err := client.New([]string{f.front}, client.Options{Token: testToken, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.between = func() {
		f.between = nil
		if _, err := otherC.Scale(ctx, "web", 7); err != nil {
			t.Errorf("the other client's scale: %v", err)
		}
	}
	f.arm(1, appliedReset)
	got, err := c.Scale(ctx, "web", 5)
	if err != nil {
		t.Fatalf("scale: %v", err)
	}
	if n := f.count(); n != 3 { // applied+cut, the other's, the resend
		t.Errorf("%d requests, want 3", n)
	}
	if ids := f.requestIDs(); ids[0] == "" || ids[0] != ids[2] || ids[1] == ids[0] {
		t.Errorf("request ids %q: want the resend to carry the first attempt's, the other client its own", ids)
	}
	stored, err := otherC.Get(ctx, api.KindDeployment, "web")
	if err != nil {
		t.Fatal(err)
	}
	for what, o := range map[string]api.RawObject{"answer": got, "stored": stored} {
		d, err := api.FromRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		if r := *d.(*api.Deployment).Spec.Replicas; r != 7 {
			t.Errorf("%s: replicas %d, want the other client's 7 (the resend must not apply again)", what, r)
		}
	}
	// Created at generation 1, scaled to 5 once, to 7 once.
	if stored.Metadata.Generation != 3 {
		t.Errorf("generation %d, want 3: the scale to 5 applied more than once", stored.Metadata.Generation)
	}
}

// TestRetriesBounded: a request that keeps failing is sent 1+Retries
// times, then fails with the last answer.
func TestRetriesBounded(t *testing.T) {
	f, c, _ := flakyAgent(t, 3)
	f.arm(1000, noLeader)
	_, err := c.Get(ctxT(t), api.KindDeployment, "web")
	if !api.IsCode(err, api.CodeNoLeader) {
		t.Errorf("err = %v, want code %s", err, api.CodeNoLeader)
	}
	if got := f.count(); got != 4 {
		t.Errorf("%d requests, want 4", got)
	}
}

// TestRetriesWithinTimeout: a backoff that would pass the request's
// deadline is not waited: the last error is returned at once.
func TestRetriesWithinTimeout(t *testing.T) {
	srv := agent(t, "pi1")
	f := &flaky{next: srv.Config.Handler}
	front := httptest.NewServer(f)
	t.Cleanup(front.Close)
	c, err := client.New([]string{front.URL}, client.Options{
		Token:   testToken,
		Timeout: time.Minute,
		Backoff: func(int) time.Duration { return time.Hour },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.arm(1000, noLeader)
	if _, err := c.Get(context.Background(), api.KindDeployment, "web"); !api.IsCode(err, api.CodeNoLeader) {
		t.Errorf("err = %v, want code %s", err, api.CodeNoLeader)
	}
	if got := f.count(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

// TestRetryMovesToNextAddress: an agent without a leader is left for the
// next address, which answers.
func TestRetryMovesToNextAddress(t *testing.T) {
	bad := &flaky{next: agent(t, "pi1").Config.Handler}
	bad.arm(1000, noLeader)
	front := httptest.NewServer(bad)
	t.Cleanup(front.Close)
	good := agent(t, "pi2")
	c, err := client.New([]string{front.URL, good.URL}, client.Options{
		Token:   testToken,
		Backoff: noWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctxT(t))
	if err != nil || st.Node != "pi2" {
		t.Fatalf("Status = %+v, %v; want pi2's", st, err)
	}
	if got := bad.count(); got != 1 {
		t.Errorf("the leaderless agent got %d requests, want 1", got)
	}
	if c.Addr() != good.URL {
		t.Errorf("Addr = %s, want %s, which answered", c.Addr(), good.URL)
	}
}

func deploymentNamed(name string) *api.Deployment {
	n := 1
	return &api.Deployment{
		Metadata: api.ObjectMeta{Name: name},
		Spec:     api.DeploymentSpec{Replicas: &n, Template: api.PodTemplate{Exec: []string{"/usr/bin/" + name}}},
	}
}
