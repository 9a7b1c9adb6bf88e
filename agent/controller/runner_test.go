package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
)

// fakeState serves a world as the Runner's State and Writer: Apply writes
// into the world (read your writes) and then emits a Change per action to
// every watcher.
type fakeState struct {
	mu       sync.Mutex
	w        *world
	watchers []chan Change
	failNext int // Apply calls to fail
	applies  int
}

var (
	_ State  = (*fakeState)(nil)
	_ Writer = (*fakeState)(nil)
)

func (s *fakeState) Snapshot(ctx context.Context) (*Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.cluster(), nil
}

func (s *fakeState) Watch(ctx context.Context) (<-chan Change, error) {
	ch := make(chan Change, 1000)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, c := range s.watchers {
			if c == ch {
				s.watchers = append(s.watchers[:i], s.watchers[i+1:]...)
				close(ch)
				break
			}
		}
	}()
	return ch, nil
}

var errInjected = errors.New("injected failure")

func (s *fakeState) Apply(ctx context.Context, acts []Action) error {
	s.mu.Lock()
	s.applies++
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		return errInjected
	}
	var changes []Change
	for _, txn := range Transactions(acts) {
		if err := s.w.applyTxn(txn); err != nil {
			s.mu.Unlock()
			return err
		}
		for _, a := range txn {
			changes = append(changes, Change{Kind: a.Kind, Name: a.Name, Object: s.w.get(a.Kind, a.Name)})
			if a.Type == ActionDelete {
				changes[len(changes)-1].Object = a.Object
			}
		}
	}
	s.mu.Unlock()
	s.notify(changes...)
	return nil
}

// notify sends changes to every watcher, dropping them for a watcher
// that is 1000 behind (the resync covers it, as in a real store).
func (s *fakeState) notify(changes ...Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.watchers {
		for _, c := range changes {
			select {
			case ch <- c:
			default:
			}
		}
	}
}

// do runs f on the world under the lock.
func (s *fakeState) do(f func(w *world)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.w)
}

func (s *fakeState) count(f func(w *world) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(s.w)
}

func scheduledPods(w *world) int {
	n := 0
	for _, p := range w.pods {
		if p.Spec.Owner.Name == "web" && p.Status.Phase == api.PodScheduled {
			n++
		}
	}
	return n
}

func TestRunner(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"a", "b"} {
		node := readyNode(n)
		w.add(node)
		w.members[n] = MemberInfo{Name: n, Addr: node.Status.Address, State: api.MemberAlive,
			Facts: NodeFacts{BoardFacts: api.BoardFacts{Arch: "arm64", Model: "Pi 4", MemoryBytes: 4 * gib, CPUs: 4}}}
	}
	w.add(deployment("web", 2))
	wantNames := createdNames(ReconcileDeployment(t0, w.deployments["web"], w.podList(), w.nodeList()))
	slices.Sort(wantNames)
	st := &fakeState{w: w, failNext: 1}

	clk := clocktest.New(t0)
	cfg := DefaultRunnerConfig()
	cfg.ResyncJitter = 0
	cfg.Queue.QPS = 0
	log := testutil.Logger(t)
	r, err := NewRunner(cfg, st, st, clk, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}()

	// The initial resync reconciles the deployment first (keys are
	// sorted); its write fails, so nothing happens until the backoff has
	// passed on the clock.
	clk.WaitTimer(t, t0.Add(5*time.Millisecond))
	if got := st.count(func(w *world) int { return len(w.pods) }); got != 0 {
		t.Fatalf("%d pods before the retry, want 0", got)
	}
	clk.Advance(5 * time.Millisecond)
	testutil.Until(t, 10*time.Second, "2 scheduled web pods after the retry", func() bool { return st.count(scheduledPods) == 2 })
	var gotNames []string
	st.do(func(w *world) { gotNames = podNamesOf(w.owned(api.KindDeployment, "web")) })
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("pods after the failed write and its retry: %v, want the first pass's names %v", gotNames, wantNames)
	}

	// An object nobody was told about is caught by the periodic resync.
	st.do(func(w *world) { w.add(deployment("api", 1)) })
	clk.WaitTimer(t, t0.Add(cfg.ResyncPeriod))
	apiPods := func(w *world) int { return len(w.owned(api.KindDeployment, "api")) }
	if got := st.count(apiPods); got != 0 {
		t.Fatalf("%d api pods before the resync, want 0", got)
	}
	clk.Advance(cfg.ResyncPeriod - 5*time.Millisecond)
	testutil.Until(t, 10*time.Second, "the resync to create the api pod", func() bool { return st.count(apiPods) == 1 })
}

func TestRunnerConfigValidate(t *testing.T) {
	if err := DefaultRunnerConfig().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for name, mut := range map[string]func(*RunnerConfig){
		"resync":  func(c *RunnerConfig) { c.ResyncPeriod = 0 },
		"jitter":  func(c *RunnerConfig) { c.ResyncJitter = 2 },
		"rewatch": func(c *RunnerConfig) { c.RewatchDelay = 0 },
		"queue":   func(c *RunnerConfig) { c.Queue.BaseDelay = 0 },
		"sched":   func(c *RunnerConfig) { c.Scheduler.PortMin = 0 },
	} {
		c := DefaultRunnerConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := NewRunner(DefaultRunnerConfig(), nil, nil, clock.RealClock(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewRunner without State: %v", err)
	}
}

// failingWriter fails every Apply with err.
type failingWriter struct{ err error }

func (f failingWriter) Apply(context.Context, []Action) error { return f.err }

// TestRunnerTerminalErrorNotRetried: a write the store refuses for good
// is not retried (no backoff entry for the key), an ordinary failure is.
func TestRunnerTerminalErrorNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		retries int
	}{
		{"transient", errInjected, 1},
		{"terminal", Terminal(fmt.Errorf("agent: bind pods/web-x: %w", errInjected)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.add(deployment("web", 1))
			st := &fakeState{w: w}
			cfg := DefaultRunnerConfig()
			cfg.Queue.QPS = 0
			clk := clocktest.New(t0)
			r, err := NewRunner(cfg, st, failingWriter{tc.err}, clk, testutil.LevelLogger(t, slog.LevelInfo))
			if err != nil {
				t.Fatal(err)
			}
			q, err := NewQueue(cfg.Queue, clk)
			if err != nil {
				t.Fatal(err)
			}
			defer q.ShutDown()
			key := KeyOf(api.KindDeployment, "web")
			r.process(context.Background(), q, key)
			if got := q.NumRequeues(key); got != tc.retries {
				t.Errorf("NumRequeues = %d, want %d", got, tc.retries)
			}
		})
	}
	if !errors.Is(Terminal(errInjected), errInjected) || !errors.Is(Terminal(errInjected), ErrTerminal) || Terminal(nil) != nil {
		t.Error("Terminal(err) must match both err and ErrTerminal, and Terminal(nil) be nil")
	}
}

// podNamesOf returns the pods' names, in order.
func podNamesOf(ps []*api.Pod) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Metadata.Name)
	}
	return out
}

// TestRunnerNodeChangeWakesDeployments: a node's drain request or cordon
// changes what a deployment must do (move.go), so a node change enqueues
// every deployment, beside the scheduler, daemons and services.
func TestRunnerNodeChangeWakesDeployments(t *testing.T) {
	w := newWorld(t)
	w.add(readyNode("a"))
	w.add(deployment("web", 1))
	st := &fakeState{w: w}
	r, err := NewRunner(DefaultRunnerConfig(), st, st, clocktest.New(t0), testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	keys := r.keysFor(context.Background(), Change{Kind: api.KindNode, Name: "a", Object: w.nodes["a"]})
	if !slices.Contains(keys, KeyOf(api.KindDeployment, "web")) {
		t.Errorf("keys for a node change: %v, want deployment web among them", keys)
	}
}
