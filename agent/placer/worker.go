package placer

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units"
)

// worker passes over one board. Everything it does to the board happens in
// its one goroutine, so calls for a node are never concurrent.
type worker struct {
	p    *Placer
	node string
	log  *slog.Logger

	wake chan struct{} // cap 1: a pass is wanted
	done chan struct{} // closed when run has returned

	// Owned by the dispatcher goroutine.
	fp     uint64
	cancel context.CancelFunc

	// Owned by the worker goroutine.
	probes map[string]probeMemo // by pod name
	// failures counts each ready pod's readiness checks that failed in a
	// row (api.Probe.Failures), by pod name.
	failures map[string]int
	// reached: the executor has reached the board in this worker's life
	// (an SSH listing, or Warm); readiness checks wait for it. Set from
	// the warm goroutine too.
	reached     atomic.Bool
	renderNoted map[string]string // pod → error already logged
	noopPlan    uint64            // planKey of the last empty plan
	// pendingRestart: units rewritten for a changed pod whose restart has
	// not succeeded yet, with the hash of the content written.
	pendingRestart map[string]string
	// fileRefused: pods whose files the board refused (ErrFileRefused), by
	// pod name. Their units are not written or started; observe gives the
	// pod a FilesWritten=False condition.
	fileRefused map[string]fileRefusal

	// The worker's view of the board's units: the last SSH listing or
	// report (current, haveCurrent), the newest report mark either covered
	// (seen), when the board was last listed over SSH and when that is due
	// again while it reports (see Placer.Report).
	current     []units.UnitState
	haveCurrent bool
	seen        unitreport.Mark
	listedAt    time.Time
	listDue     time.Time
}

// fileRefusal is why and when the board last refused a pod's file.
type fileRefusal struct {
	content string // units.Hash of the unit file that was to be written
	at      time.Time
	msg     string
}

func (p *Placer) newWorker(node string) *worker {
	return &worker{
		p:    p,
		node: node,
		// A reporting board is first listed over SSH an ObserveInterval
		// into the worker's life (see listed): a new leader's first
		// passes take its units from the report, and a pod bound there
		// meanwhile is placed without waiting for a listing.
		listDue:     p.clock.Now().Add(backoff.Stretch(p.cfg.ObserveInterval, p.cfg.ObserveJitter, p.jitter())),
		log:         p.log.With("node", node),
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		probes:      make(map[string]probeMemo),
		failures:    make(map[string]int),
		renderNoted: make(map[string]string),

		pendingRestart: make(map[string]string),
		fileRefused:    make(map[string]fileRefusal),
	}
}

// poke asks for a pass; it never blocks.
func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run passes over the board until ctx is done: at once, then whenever
// poked (except while waiting out a failure), after QuickObserve pauses
// when it acted or pods are still coming up, after a backoff when a pass
// failed, every WitnessInterval while the pass is a witness, and
// otherwise every ObserveInterval. A board that gets no passes
// (down, or not a node any more) is left alone until poked.
func (w *worker) run(ctx context.Context) {
	defer w.p.reports.attach(w)()
	w.warm(ctx)
	var ps pacing
	for {
		if (ps.idle || ps.delay > 0) && !w.park(ctx, ps) {
			return
		}
		// This pass reads fresh state: a poke that came before it is
		// answered by it.
		select {
		case <-w.wake:
		default:
		}
		res := w.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		w.pace(ctx, &ps, res)
		w.log.Debug("pass done", "witness", res.witness, "sweep", res.sweep, "acted", res.acted, "err", res.err,
			"next", ps.delay, "idle", ps.idle, "retrying", ps.retrying)
	}
}

// warm starts warming the executor's way to a board that reports (see
// Warmer): its first pass takes the units from the report and calls
// nothing, so without it the first pod bound there (a failover right
// after a new leader took over) would wait for the dial and the board
// session's start. It does not wait.
func (w *worker) warm(ctx context.Context) {
	wm := w.p.warmer
	if wm == nil || !w.reporting(w.p.clock.Now()) {
		return
	}
	go func() {
		err := wm.Warm(ctx, w.node)
		switch {
		case err == nil:
			w.reached.Store(true)
		case ctx.Err() == nil:
			w.log.Debug("warming the connection to the board failed", "err", err)
		}
	}()
}

// pacing is when a worker passes next, and what it remembers to decide it.
type pacing struct {
	delay    time.Duration // before the next pass; 0 = at once
	idle     bool          // wait for a poke only
	retrying bool          // waiting out a failure: pokes wait too
	failures int
	quick    int // next QuickObserve index
}

// park waits as ps says: for its delay (unless idle), or a poke (unless
// retrying). It returns false once ctx is done.
func (w *worker) park(ctx context.Context, ps pacing) bool {
	var (
		t     clock.Timer
		fired <-chan time.Time
	)
	if !ps.idle {
		tm := w.p.clock.NewTimer(ps.delay)
		t, fired = tm, tm.C()
	}
	wake := w.wake
	if ps.retrying {
		wake = nil
	}
	if w.p.onPark != nil {
		w.p.onPark(park{node: w.node, delay: ps.delay, idle: ps.idle, retry: ps.retrying})
	}
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-fired:
	}
	return true
}

// pace sets when the next pass comes after res.
func (w *worker) pace(ctx context.Context, ps *pacing, res passResult) {
	cfg := w.p.cfg
	switch {
	case res.sweep:
		// A down board: try it again soon (its stale units stop the
		// moment it answers), slower after a minute of silence.
		if res.err != nil {
			ps.failures++
		} else {
			ps.failures = 0
		}
		ps.retrying, ps.idle, ps.quick = false, false, 0
		ps.delay = cfg.WitnessInterval
		if ps.failures > 60 {
			ps.delay = cfg.RetryMax
		}
	case res.witness:
		// A Ready board gossip calls dead: witness it again soon,
		// whether it answered or not (the node controller needs a
		// fresh word), and let a state change cut the pause short.
		if res.err != nil {
			ps.failures++
			if ps.failures == 1 || ps.failures%20 == 0 {
				w.log.Warn("witness pass failed", "failures", ps.failures, "err", res.err)
			}
		} else {
			ps.failures = 0
		}
		ps.retrying, ps.idle, ps.quick = false, false, 0
		ps.delay = cfg.WitnessInterval
	case res.err != nil:
		ps.failures++
		// A board gone silent is about to be declared dead: let that
		// change wake the worker for its witness at once.
		ps.retrying, ps.idle = !errors.Is(res.err, errSilent), false
		ps.delay = backoff.Double(ps.failures, cfg.RetryBase, cfg.RetryMax)
		level := slog.LevelDebug
		if ps.failures == 1 || ps.failures%20 == 0 {
			level = slog.LevelWarn
		}
		w.log.Log(ctx, level, "pass failed; retrying", "failures", ps.failures, "delay", ps.delay, "err", res.err)
	case res.skip:
		if ps.failures > 0 {
			w.log.Info("board no longer gets passes", "failures", ps.failures)
		}
		ps.failures, ps.retrying, ps.idle, ps.quick = 0, false, true, 0
	default:
		if ps.failures > 0 {
			w.log.Info("pass succeeded after failures", "failures", ps.failures)
		}
		ps.failures, ps.retrying, ps.idle = 0, false, false
		if res.acted > 0 || res.doubt {
			ps.quick = 0
		}
		now := w.p.clock.Now()
		switch {
		case (res.acted > 0 || res.unsettled) && ps.quick < len(cfg.QuickObserve):
			ps.delay = cfg.QuickObserve[ps.quick]
			ps.quick++
		case w.reporting(now) && !res.probing && !res.unsettled:
			// The board's reports wake the worker: pass again only
			// for the safety-net SSH listing.
			ps.delay = max(0, w.listDue.Sub(now))
		default:
			ps.delay = backoff.Stretch(cfg.ObserveInterval, cfg.ObserveJitter, w.p.jitter())
		}
	}
}

// errStale: the state moved under a pass (a pod was unbound, changed, or
// the node stopped being eligible) before a unit was brought up; the pass
// stopped and is retried against fresh state.
var errStale = errors.New("placer: state changed during the pass")
