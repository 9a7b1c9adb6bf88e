package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
)

// ErrInvalidConfig: a RunnerConfig failed Validate.
var ErrInvalidConfig = errors.New("controller: invalid config")

// ErrTerminal is matched by the errors of Terminal: writes that would fail
// the same way however often they were retried (the store refused them as
// invalid or too large). The Runner does not retry a key whose actions
// failed with one; a later change to the key's objects, or the periodic
// resync, reconciles it again.
var ErrTerminal = errors.New("controller: terminal error")

// Terminal marks err as terminal (matching ErrTerminal and still err).
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string        { return e.err.Error() }
func (e *terminalError) Unwrap() error        { return e.err }
func (e *terminalError) Is(target error) bool { return target == ErrTerminal }

// Change says that an object (or a gossip member) may have changed. It only
// names what to look at: the Runner re-reads State before reconciling.
type Change struct {
	// Kind and Name of the object. An empty Kind means "anything may have
	// changed" (a relist): every key is reconciled.
	Kind api.Kind
	Name string
	// Object is the object after the change (the last stored state for a
	// delete), used only to find dependent keys (a pod's owner and the
	// services selecting it). Nil for gossip member changes (Kind nodes).
	Object api.Object
}

// State is the Runner's read side. Implementations must be safe for
// concurrent use. Objects returned are shared with the implementation and
// must not be modified by either side afterwards.
type State interface {
	// Snapshot returns the current objects and gossip members. It is called
	// once per reconciled key, so it must be cheap (served from a cache,
	// not a store scan).
	Snapshot(ctx context.Context) (*Cluster, error)
	// Watch returns a channel of changes that ends (is closed) when ctx is
	// done or the watch breaks; the Runner then relists and watches again.
	// A missed change costs only latency: the Runner also resyncs every
	// key periodically.
	Watch(ctx context.Context) (<-chan Change, error)
}

// Writer is the Runner's write side. It is called from one goroutine at a
// time.
type Writer interface {
	// Apply writes the actions in order, one transaction per element of
	// Transactions(actions): a run of actions with the same Txn all
	// together or none of them, every other action alone (ActionBind as
	// one transaction of spec then status). It stops at the first failed
	// transaction and returns its error. A compare-and-swap conflict is an
	// ordinary error: the key is retried against fresh state. When Apply
	// returns nil, the next State.Snapshot must reflect every action (read
	// your writes), or a following reconcile could repeat them. An error
	// that retrying cannot fix (the store refused the write as invalid)
	// should be wrapped with Terminal, so the Runner does not retry it.
	//
	// A delete needs only the object's kind, name and resourceVersion and
	// a status write only those and the status; a Writer sends no more, as
	// the reconcilers size their transactions assuming so (createBudget).
	Apply(ctx context.Context, actions []Action) error
}

// RunnerConfig tunes a Runner.
type RunnerConfig struct {
	// ResyncPeriod is how often every key is reconciled regardless of
	// changes; each period is stretched by a random fraction up to
	// ResyncJitter (0.2 means 1.0–1.2×) so agents do not resync in step.
	ResyncPeriod time.Duration
	ResyncJitter float64
	// RewatchDelay is the pause before watching again after a watch broke
	// or failed to start.
	RewatchDelay time.Duration
	// Queue tunes the retry backoff and rate limit.
	Queue QueueConfig
	// Scheduler tunes placement.
	Scheduler scheduler.Config
	// Jitter returns a number in [0, 1) for the ResyncJitter stretch. Nil
	// means math/rand/v2. Tests inject a seeded source.
	Jitter func() float64
	// Observer, when set, is told the queue's depth and how each key's
	// reconcile went (metrics). Nil observes nothing.
	Observer Observer
}

// DefaultRunnerConfig returns a 5-minute resync with 20% jitter, a 1 s
// rewatch delay, and the default queue and scheduler configurations.
func DefaultRunnerConfig() RunnerConfig {
	return RunnerConfig{
		ResyncPeriod: 5 * time.Minute,
		ResyncJitter: 0.2,
		RewatchDelay: time.Second,
		Queue:        DefaultQueueConfig(),
		Scheduler:    scheduler.DefaultConfig(),
	}
}

// Validate reports whether c is usable.
func (c RunnerConfig) Validate() error {
	switch {
	case c.ResyncPeriod <= 0:
		return fmt.Errorf("%w: ResyncPeriod %v must be positive", ErrInvalidConfig, c.ResyncPeriod)
	case c.ResyncJitter < 0 || c.ResyncJitter > 1:
		return fmt.Errorf("%w: ResyncJitter %v must be between 0 and 1", ErrInvalidConfig, c.ResyncJitter)
	case c.RewatchDelay <= 0:
		return fmt.Errorf("%w: RewatchDelay %v must be positive", ErrInvalidConfig, c.RewatchDelay)
	}
	if err := c.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrInvalidConfig, err)
	}
	if err := c.Scheduler.Validate(); err != nil {
		return fmt.Errorf("%w: scheduler: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Runner drives the reconcilers: changes and periodic resyncs put keys in
// a work queue; one worker takes a key, reads State, runs the key's
// reconciler and hands the actions to the Writer, retrying failures with
// backoff. Keys are processed one at a time, so two reconciles never race
// on the same pods. A Runner runs on the leader only; Run it again after
// regaining leadership.
type Runner struct {
	cfg    RunnerConfig
	state  State
	writer Writer
	clock  clock.Clock
	log    *slog.Logger
	jitter func() float64 // cfg.Jitter or math/rand/v2
	obs    Observer       // cfg.Observer or a no-op

	mu  sync.Mutex
	idx *Index // last index built, reused while State's Version is unchanged
}

// NewRunner returns a Runner. A nil clock means the real clock, a nil
// logger discards.
func NewRunner(cfg RunnerConfig, state State, writer Writer, clk clock.Clock, log *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if state == nil || writer == nil {
		return nil, fmt.Errorf("%w: State and Writer are required", ErrInvalidConfig)
	}
	if clk == nil {
		clk = clock.RealClock()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	jitter := cfg.Jitter
	if jitter == nil {
		jitter = rand.Float64
	}
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	return &Runner{cfg: cfg, state: state, writer: writer, clock: clk, log: log, jitter: jitter, obs: obs}, nil
}

// Run reconciles until ctx is done, starting with every key (a full
// resync), and returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	q, err := NewQueue(r.cfg.Queue, r.clock)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r.obs.QueueStarted(q.Depth)
	defer func() {
		cancel()
		q.ShutDown()
		wg.Wait()
		r.obs.QueueStopped()
	}()

	r.enqueueAll(ctx, q)
	wg.Go(func() { r.watchLoop(ctx, q) })
	wg.Go(func() { r.resyncLoop(ctx, q) })
	for {
		key, shutdown := q.Get(ctx)
		if shutdown {
			return ctx.Err()
		}
		r.process(ctx, q, key)
		q.Done(key)
	}
}

// index returns an Index of the current state, reusing the last one while
// the state's Version is unchanged.
func (r *Runner) index(ctx context.Context) (*Index, error) {
	c, err := r.state.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idx != nil && c.Version != 0 && r.idx.c.Version == c.Version {
		return r.idx, nil
	}
	r.idx = NewIndex(c)
	return r.idx, nil
}

// process reconciles key and tells the Observer how it went.
func (r *Runner) process(ctx context.Context, q *Queue, key Key) {
	start := time.Now() // real time: a metric, not a decision
	retried, err := r.reconcileKey(ctx, q, key)
	if ctx.Err() == nil {
		r.obs.Reconciled(ControllerOf(key), time.Since(start), err, retried)
	}
}

// reconcileKey reads state, reconciles key and applies its actions. It
// returns whether the key was queued again with backoff and why it failed
// (nil on success).
func (r *Runner) reconcileKey(ctx context.Context, q *Queue, key Key) (retried bool, err error) {
	ix, err := r.index(ctx)
	if err != nil {
		r.log.Warn("reading state", "key", key, "err", err)
		q.AddRateLimited(key)
		return true, err
	}
	now := r.clock.Now()
	acts := ix.Reconcile(now, r.cfg.Scheduler, key)
	if d := ix.WakeAfter(now, key); d > 0 {
		q.AddAfter(key, d) // a job's next attempt is due then
	}
	if len(acts) == 0 {
		q.Forget(key)
		return false, nil
	}
	for _, a := range acts {
		r.log.Info("reconcile", "key", key, "action", string(a.Type), "kind", string(a.Kind), "name", a.Name, "reason", a.Reason, "txn", a.Txn)
	}
	if err := r.writer.Apply(ctx, acts); err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		if errors.Is(err, ErrTerminal) {
			r.log.Error("applying actions failed for good; not retrying", "key", key, "err", err)
			q.Forget(key)
			return false, err
		}
		r.log.Warn("applying actions", "key", key, "retries", q.NumRequeues(key), "err", err)
		q.AddRateLimited(key)
		return true, err
	}
	q.Forget(key)
	return false, nil
}

func (r *Runner) enqueueAll(ctx context.Context, q *Queue) {
	ix, err := r.index(ctx)
	if err != nil {
		r.log.Warn("reading state for a resync", "err", err)
		return
	}
	for _, k := range ix.Keys() {
		q.Add(k)
	}
}

// keysFor returns the keys a change affects.
func (r *Runner) keysFor(ctx context.Context, ch Change) []Key {
	switch ch.Kind {
	case api.KindDeployment, api.KindDaemon, api.KindService, api.KindJob:
		return []Key{KeyOf(ch.Kind, ch.Name)}
	case api.KindPod:
		keys := []Key{KeySchedule}
		p, _ := ch.Object.(*api.Pod)
		if p == nil {
			return append(keys, r.allKeys(ctx, api.KindDeployment, api.KindDaemon, api.KindService)...)
		}
		if p.Spec.Owner.Kind != "" && p.Spec.Owner.Name != "" {
			keys = append(keys, KeyOf(p.Spec.Owner.Kind, p.Spec.Owner.Name))
		}
		ix, err := r.index(ctx)
		if err != nil {
			return append(keys, r.allKeys(ctx, api.KindService)...)
		}
		for _, s := range ix.c.Services {
			if s != nil && api.MatchLabels(s.Spec.Selector, p.Metadata.Labels) {
				keys = append(keys, KeyOf(api.KindService, s.Metadata.Name))
			}
		}
		return keys
	case api.KindSecret:
		// A secret's version is part of the revision of the templates
		// that name it: their owners roll.
		ix, err := r.index(ctx)
		if err != nil {
			return r.allKeys(ctx, api.KindDeployment, api.KindDaemon, api.KindJob)
		}
		var keys []Key
		for _, d := range ix.c.Deployments {
			if slices.Contains(d.Spec.Template.Secrets, ch.Name) {
				keys = append(keys, KeyOf(api.KindDeployment, d.Metadata.Name))
			}
		}
		for _, d := range ix.c.Daemons {
			if slices.Contains(d.Spec.Template.Secrets, ch.Name) {
				keys = append(keys, KeyOf(api.KindDaemon, d.Metadata.Name))
			}
		}
		for _, j := range ix.c.Jobs {
			if slices.Contains(j.Spec.Template.Secrets, ch.Name) {
				keys = append(keys, KeyOf(api.KindJob, j.Metadata.Name))
			}
		}
		return keys
	case api.KindNode:
		// A node's phase, address or labels matter to the scheduler, to
		// daemons and to service endpoints; its drain request and cordon
		// to deployments (moves, move.go).
		return append([]Key{KeyOf(api.KindNode, ch.Name), KeySchedule}, r.allKeys(ctx, api.KindDeployment, api.KindDaemon, api.KindService)...)
	}
	return nil
}

// allKeys returns the keys of every object of the given kinds.
func (r *Runner) allKeys(ctx context.Context, kinds ...api.Kind) []Key {
	ix, err := r.index(ctx)
	if err != nil {
		return nil
	}
	var keys []Key
	for _, k := range kinds {
		switch k {
		case api.KindDeployment:
			for _, d := range ix.c.Deployments {
				keys = append(keys, KeyOf(k, d.Metadata.Name))
			}
		case api.KindDaemon:
			for _, d := range ix.c.Daemons {
				keys = append(keys, KeyOf(k, d.Metadata.Name))
			}
		case api.KindService:
			for _, s := range ix.c.Services {
				keys = append(keys, KeyOf(k, s.Metadata.Name))
			}
		}
	}
	return keys
}

func (r *Runner) watchLoop(ctx context.Context, q *Queue) {
	for first := true; ; first = false {
		if !first {
			if !clock.Sleep(ctx, r.clock, r.cfg.RewatchDelay) {
				return
			}
			r.enqueueAll(ctx, q) // changes may have been missed
		}
		ch, err := r.state.Watch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("watching state", "err", err)
			continue
		}
		for c := range ch {
			if c.Kind == "" {
				r.enqueueAll(ctx, q)
				continue
			}
			for _, k := range r.keysFor(ctx, c) {
				q.Add(k)
			}
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Info("watch ended; watching again", "delay", r.cfg.RewatchDelay)
	}
}

func (r *Runner) resyncLoop(ctx context.Context, q *Queue) {
	for {
		d := backoff.Stretch(r.cfg.ResyncPeriod, r.cfg.ResyncJitter, r.jitter())
		if !clock.Sleep(ctx, r.clock, d) {
			return
		}
		r.log.Debug("periodic resync")
		r.enqueueAll(ctx, q)
	}
}
