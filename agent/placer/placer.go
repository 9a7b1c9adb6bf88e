package placer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/internal/clock"
)

// ErrRunning: Run was called while an earlier Run had not returned.
var ErrRunning = errors.New("placer: already running")

// Placer makes every board's systemd match the pods bound to it, observes
// what runs there and reports it back as pod and node status. It runs on
// the leader only: Run it while leading, cancel it on losing leadership,
// Run it again after regaining it.
type Placer struct {
	cfg  Config
	exec Executor
	// silencer is exec's Silencer, nil when it is none (exec may be
	// wrapped for the Observer).
	silencer Silencer
	// warmer is exec's Warmer, nil when it is none (taken before exec is
	// wrapped, like silencer).
	warmer Warmer
	obs    Observer // nil: none
	state  controller.State
	writer controller.Writer
	clock  clock.Clock
	log    *slog.Logger
	http   *http.Client
	jitter func() float64 // cfg.Jitter or math/rand/v2

	viewMu   sync.Mutex
	lastView *view

	// applyMu serialises writer.Apply: workers of different nodes write
	// concurrently, the Writer contract wants one caller at a time.
	applyMu sync.Mutex

	running atomic.Bool

	// reports: the newest unit report of each board (Config.Reports).
	reports *Reports

	// onPark, set by tests only, is called each time a worker is about to
	// wait, after arming its timer.
	onPark func(park)
}

// park describes a worker about to wait: for delay (or, idle, for a
// wake-up only).
type park struct {
	node  string
	delay time.Duration // 0 when idle
	idle  bool
	retry bool // waiting out a failure backoff
	exit  bool // the worker is returning
}

// New returns a Placer. exec reaches the boards; state and writer are the
// same read and write sides the controller Runner uses. A nil clock means
// the real clock, a nil logger discards.
func New(cfg Config, exec Executor, state controller.State, writer controller.Writer, clk clock.Clock, log *slog.Logger) (*Placer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if exec == nil || state == nil || writer == nil {
		return nil, fmt.Errorf("%w: Executor, State and Writer are required", ErrInvalidConfig)
	}
	if clk == nil {
		clk = clock.RealClock()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	cfg.QuickObserve = slices.Clone(cfg.QuickObserve)
	p := &Placer{cfg: cfg, exec: exec, state: state, writer: writer, clock: clk, log: log, jitter: cfg.Jitter, obs: cfg.Observer}
	p.silencer, _ = exec.(Silencer)
	p.warmer, _ = exec.(Warmer)
	if cfg.Observer != nil {
		p.exec = &observedExecutor{exec: exec, obs: cfg.Observer}
	}
	if p.jitter == nil {
		p.jitter = rand.Float64
	}
	p.reports = cfg.Reports
	if p.reports == nil {
		p.reports = NewReports(clk)
	}
	p.http = &http.Client{
		Transport: &http.Transport{
			Proxy:             nil, // probes go straight to the board
			DialContext:       dial,
			DisableKeepAlives: true,
		},
		// A 3xx passes the check: do not follow it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	p.cfg.Dial = dial
	return p, nil
}

// Run places and observes until ctx is done, then stops every worker and
// returns ctx's error. It keeps one worker goroutine per Node in the state,
// started when the node appears and stopped when it is deleted; a worker
// passes over its board when state that concerns the board changes, soon
// after it acted, and otherwise every ObserveInterval. A second Run while
// one is running returns ErrRunning at once.
func (p *Placer) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	d := &dispatcher{p: p, ctx: ctx, workers: make(map[string]*worker)}
	defer func() {
		cancel()
		d.wg.Wait()
	}()
	for first := true; ; first = false {
		if !first && !clock.Sleep(ctx, p.clock, p.cfg.RewatchDelay) {
			return ctx.Err()
		}
		ch, err := p.state.Watch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.log.Warn("watching state", "err", err)
			d.sync() // keep the workers in line with what can be read
			continue
		}
		d.sync()
		if !d.follow(ch) {
			return ctx.Err()
		}
		p.log.Info("state watch ended; watching again", "delay", p.cfg.RewatchDelay)
	}
}

// dispatcher owns the workers of one Run.
type dispatcher struct {
	p       *Placer
	ctx     context.Context
	wg      sync.WaitGroup
	workers map[string]*worker
	// retired holds the done channels of stopped workers, so a node that
	// comes back waits for its old worker to end: calls for one node are
	// never concurrent.
	retired map[string]chan struct{}
	// synced is the view of the last sync.
	synced *view
}

// follow handles changes until the watch ends (true) or ctx is done
// (false). Changes are only hints: a burst is drained and answered by one
// sync against a fresh snapshot.
func (d *dispatcher) follow(ch <-chan controller.Change) bool {
	p := d.p
	for {
		t := p.clock.NewTimer(p.cfg.ResyncInterval)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return false
		case <-t.C():
			d.sync()
			continue
		case _, ok := <-ch:
			t.Stop()
			if !ok {
				return d.ctx.Err() == nil
			}
		}
	drain:
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					d.sync()
					return d.ctx.Err() == nil
				}
			default:
				break drain
			}
		}
		d.sync()
	}
}

// sync starts a worker for every node without one, stops the workers of
// nodes that are gone, and wakes the workers whose fingerprint changed.
func (d *dispatcher) sync() {
	v, err := d.p.view(d.ctx)
	if err != nil {
		if d.ctx.Err() == nil {
			d.p.log.Warn("reading state", "err", err)
		}
		return
	}
	if v == d.synced {
		return // same state as last time: nothing to wake
	}
	d.synced = v
	for _, n := range v.c.Nodes {
		if n == nil {
			continue
		}
		name := n.Metadata.Name
		fp := v.fingerprint(name)
		w := d.workers[name]
		if w == nil {
			d.start(name, fp)
			continue
		}
		if w.fp != fp {
			w.fp = fp
			w.poke()
		}
	}
	for name, done := range d.retired {
		select {
		case <-done:
			delete(d.retired, name)
		default:
		}
	}
	for name, w := range d.workers {
		if v.ix.Node(name) != nil {
			continue
		}
		d.p.log.Info("node gone; stopping its worker", "node", name)
		w.cancel()
		if d.retired == nil {
			d.retired = make(map[string]chan struct{})
		}
		d.retired[name] = w.done
		delete(d.workers, name)
	}
}

func (d *dispatcher) start(name string, fp uint64) {
	ctx, cancel := context.WithCancel(d.ctx)
	w := d.p.newWorker(name)
	w.fp, w.cancel = fp, cancel
	prev := d.retired[name]
	delete(d.retired, name)
	d.workers[name] = w
	d.wg.Go(func() {
		defer close(w.done)
		if d.p.onPark != nil {
			defer d.p.onPark(park{node: name, exit: true})
		}
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		w.run(ctx)
	})
}
