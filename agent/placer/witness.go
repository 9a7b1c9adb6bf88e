package placer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/units"
)

// errSilent: the executor's connection to the board has stopped answering
// keepalives (Silencer), so the witness did not wait for its timeout.
var errSilent = errors.New("placer: the board's SSH connection stopped answering")

// witness lists the board's units as the second witness on a Ready board
// gossip calls dead: the listing must come back within
// Config.WitnessTimeout, and fails at once when the executor's connection
// has been silent for longer than Config.WitnessSilence. The outcome goes
// to Config.RecordWitness with the time it ended. A board that answers
// proves its sshd and its systemd alive: only its agent is down.
func (w *worker) witness(ctx context.Context) ([]units.UnitState, error) {
	p := w.p
	wctx, cancel := context.WithTimeoutCause(ctx, p.cfg.WitnessTimeout,
		fmt.Errorf("no answer within %v", p.cfg.WitnessTimeout))
	defer cancel()
	var silent <-chan struct{}
	if s, ok := p.exec.(Silencer); ok && p.cfg.WitnessSilence > 0 {
		silent = w.watchSilence(wctx, s, cancel)
	}
	observed, err := p.exec.ShowUnits(wctx, w.node)
	if err != nil {
		select {
		case <-silent:
			err = fmt.Errorf("%w (keepalive unanswered for over %v): %w", errSilent, p.cfg.WitnessSilence, err)
		default:
			if cause := context.Cause(wctx); cause != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w: %w", cause, err)
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the placer stopping is no verdict on the board
	}
	rec := controller.Witness{At: p.clock.Now()}
	if err == nil {
		rec.OKAt = rec.At
	}
	if err != nil {
		rec.Err = err.Error()
		w.log.Info("witness: the board does not answer over SSH", "err", err)
	} else {
		w.log.Debug("witness: the board answers over SSH", "units", len(observed))
	}
	if p.cfg.RecordWitness != nil {
		p.cfg.RecordWitness(w.node, rec)
	}
	return observed, err
}

// silencePoll is how often a witness looks at the connection's silence.
const silencePoll = 25 * time.Millisecond

// watchSilence cancels the witness (cancel) once s reports the node's
// connection silent for longer than Config.WitnessSilence; the returned
// channel is closed when it did. It stops with ctx. Real time: it bounds
// real I/O.
func (w *worker) watchSilence(ctx context.Context, s Silencer, cancel context.CancelFunc) <-chan struct{} {
	fired := make(chan struct{})
	limit := w.p.cfg.WitnessSilence
	if s.Silence(w.node) > limit {
		close(fired)
		cancel()
		return fired
	}
	go func() {
		t := time.NewTicker(silencePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.Silence(w.node) > limit {
					close(fired)
					cancel()
					return
				}
			}
		}
	}()
	return fired
}
