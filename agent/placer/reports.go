package placer

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units"
)

// MarkedLister is an Executor whose listing also returns the mark of the
// newest unit report the board had begun when the listing was taken
// (sshexec reads the board's seq file in the same round trip; zero when the
// board keeps none). A report the listing already covers is then dropped,
// so a report older than a listing never moves a pod's status backwards.
type MarkedLister interface {
	ShowUnitsMarked(ctx context.Context, node string) ([]units.UnitState, unitreport.Mark, error)
}

// boardReport is the newest unit report of one board.
type boardReport struct {
	mark  unitreport.Mark
	units []units.UnitState
	at    time.Time // when it was received
}

// Reports holds the newest unit report of every board and wakes the
// worker of a board that reported. One Reports outlives the placers that
// use it (Config.Reports): a server keeps what boards told it while it
// was a follower, so its placer starts a term with the boards' reports in
// hand. Its methods are safe for concurrent use and never block.
type Reports struct {
	clock  clock.Clock
	mu     sync.Mutex
	byNode map[string]boardReport
	wake   map[string]chan struct{}
}

// NewReports returns an empty Reports that stamps reports with clk (nil:
// the real clock).
func NewReports(clk clock.Clock) *Reports {
	if clk == nil {
		clk = clock.RealClock()
	}
	return &Reports{clock: clk, byNode: make(map[string]boardReport), wake: make(map[string]chan struct{})}
}

// Put keeps what a board's agent says about its own herd units (a
// verified unitreport.Report: the caller checked its signature against
// the board's host key). The newest report of each board is kept, one not
// After the kept one is ignored (Put then returns false), and the board's
// worker, if one runs, is woken: its next pass folds the report into pod
// status without calling the board, and calls it over SSH only to act
// (see "Reports" in the package documentation).
func (b *Reports) Put(node string, mark unitreport.Mark, us []units.UnitState) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byNode[node]; ok && !mark.After(old.mark) {
		return false
	}
	b.byNode[node] = boardReport{mark: mark, units: slices.Clone(us), at: b.clock.Now()}
	if ch := b.wake[node]; ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}

// Forget drops what Put kept for node (it left the cluster).
func (b *Reports) Forget(node string) {
	b.mu.Lock()
	delete(b.byNode, node)
	b.mu.Unlock()
}

// Report is p's Reports' Put.
func (p *Placer) Report(node string, mark unitreport.Mark, us []units.UnitState) {
	p.reports.Put(node, mark, us)
}

// attach registers w's wake channel for Put; the returned func undoes it.
func (b *Reports) attach(w *worker) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wake[w.node] = w.wake
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.wake[w.node] == w.wake {
			delete(b.wake, w.node)
		}
	}
}

// get returns node's newest report.
func (b *Reports) get(node string) (boardReport, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.byNode[node]
	return r, ok
}

// reporting reports whether node's agent has sent a report within
// Config.ReportTTL: its unit changes then reach the placer as reports, and
// the worker lists the board over SSH only every ReportedListInterval.
func (w *worker) reporting(now time.Time) bool {
	r, ok := w.p.reports.get(w.node)
	return ok && now.Sub(r.at) < w.p.cfg.ReportTTL
}

// listSSH lists the board's units over SSH (with the report mark when the
// executor is a MarkedLister) and remembers the listing as the worker's
// current view of the board.
func (w *worker) listSSH(ctx context.Context) ([]units.UnitState, error) {
	var (
		us   []units.UnitState
		mark unitreport.Mark
		err  error
	)
	if ml, ok := w.p.exec.(MarkedLister); ok {
		us, mark, err = ml.ShowUnitsMarked(ctx, w.node)
	} else {
		us, err = w.p.exec.ShowUnits(ctx, w.node)
	}
	if err != nil {
		return nil, err
	}
	w.listedAt = w.p.clock.Now()
	w.reached.Store(true)
	if mark.After(w.seen) {
		w.seen = mark
	}
	w.current, w.haveCurrent = us, true
	return us, nil
}

// listed returns the worker's view of the board for a pass that is not a
// witness, and whether it came without calling the board: a report newer
// than everything seen so far, or, while the board is reporting and its
// SSH listing is not yet due, the last view (the pass then only refolds
// status and runs readiness checks). Otherwise the board is listed over
// SSH.
func (w *worker) listed(ctx context.Context) ([]units.UnitState, bool, error) {
	now := w.p.clock.Now()
	if w.reporting(now) && now.Before(w.listDue) {
		if r, ok := w.p.reports.get(w.node); ok && r.mark.After(w.seen) {
			w.seen = r.mark
			w.current, w.haveCurrent = r.units, true
			return r.units, true, nil
		}
		if w.haveCurrent {
			return w.current, true, nil
		}
	}
	us, err := w.listSSH(ctx)
	w.listDue = w.listedAt.Add(backoff.Stretch(w.p.cfg.ReportedListInterval, w.p.cfg.ObserveJitter, w.p.jitter()))
	return us, false, err
}
