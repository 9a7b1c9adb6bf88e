package placer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/units"
)

// errSilent: the executor's connection to the board stopped answering
// (Silencer), so the pass was cut short rather than left to hang until the
// connection is closed or the dial times out.
var errSilent = errors.New("placer: the board stopped answering over SSH")

// witness lists the board's units as the second witness on a Ready board
// gossip calls dead: the listing must come back within
// Config.WitnessTimeout, and fails at once when the pass is cut short
// because the executor's connection went silent (watchSilence). The
// outcome goes to Config.RecordWitness with the time it ended; the placer
// stopping is no verdict and is not recorded. A board that answers proves
// its sshd and its systemd alive: only its agent is down.
func (w *worker) witness(ctx context.Context) ([]units.UnitState, error) {
	p := w.p
	wctx, cancel := context.WithTimeoutCause(ctx, p.cfg.WitnessTimeout,
		fmt.Errorf("no answer within %v", p.cfg.WitnessTimeout))
	defer cancel()
	observed, err := w.listSSH(wctx)
	if err != nil {
		if cause := context.Cause(wctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return nil, ctx.Err() // the placer stopping is no verdict on the board
	}
	rec := controller.Witness{At: p.clock.Now()}
	if err == nil {
		rec.OKAt = rec.At
		w.log.Debug("witness: the board answers over SSH", "units", len(observed))
	} else {
		rec.Err = err.Error()
		w.log.Info("witness: the board does not answer over SSH", "err", err)
	}
	if p.cfg.RecordWitness != nil {
		p.cfg.RecordWitness(w.node, rec)
	}
	return observed, err
}

// silencePoll is how often a pass looks at the connection's silence.
const silencePoll = 25 * time.Millisecond

// watchSilence cuts the pass short (cancel, with an errSilent cause) once
// the executor (a Silencer) reports the board silent for longer than
// Config.WitnessSilence: a call on a pooled connection to a board that
// lost power would otherwise hang until the keepalives close it (≈3–4 s),
// and a dial until its timeout, holding up the witness that must follow.
// It stops with ctx. Real time: it bounds real I/O.
func (w *worker) watchSilence(ctx context.Context, cancel context.CancelCauseFunc) {
	s := w.p.silencer
	limit := w.p.cfg.WitnessSilence
	if s == nil || limit <= 0 {
		return
	}
	check := func() bool {
		if d := s.Silence(w.node); d > limit {
			cancel(fmt.Errorf("%w: a keepalive or connect unanswered for %v", errSilent, d.Round(time.Millisecond)))
			return true
		}
		return false
	}
	if check() {
		return
	}
	go func() {
		t := time.NewTicker(silencePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if check() {
					return
				}
			}
		}
	}()
}

// sweep is the pass over a board that is down while gossip calls it dead
// (nodeSweep): its pods are Lost and replaced, and if the board is only cut
// off (a partition, not a power loss) its systemd still runs their units.
// The sweep lists the board's units within Config.WitnessTimeout (cut
// short when the connection is silent) and, if the board answers, stops,
// disables and removes every herd unit that no pod bound to the board
// wants: units.PlanBoard's sweep plan (Board.SweepOnly), never a bring-up
// (execute's stillWanted refuses those too, as the board does not get full
// passes).
// It writes no status and records no witness: the board turns Ready only
// through fencing once gossip calls it alive again. So the overlap a
// partition causes ends when the leader reaches the board, not when gossip
// notices it is back.
func (w *worker) sweep(ctx context.Context, cancel context.CancelCauseFunc, v *view) passResult {
	p := w.p
	w.watchSilence(ctx, cancel)
	wctx, stop := context.WithTimeout(ctx, p.cfg.WitnessTimeout)
	observed, err := w.listSSH(wctx)
	stop()
	if err != nil {
		return passResult{sweep: true, err: fmt.Errorf("sweep: listing units: %w", err)}
	}
	acts, _ := units.PlanBoard(units.Board{Desired: v.desired(w.node), Observed: observed, SweepOnly: true})
	if len(acts) == 0 {
		return passResult{sweep: true}
	}
	n, err := w.execute(ctx, acts)
	w.log.Info("swept a down board: stopped the units it must no longer run", "actions", n, "err", err)
	return passResult{sweep: true, acted: n, err: err}
}
