package agent

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
)

// A following server stands by to lead. Its own SSH connections are what a
// new leader's first placements wait for: dial, handshake and the board
// session's start through the gate and sudo take 0.6–1.1 s on a busy board,
// and on a leader's power pull they used to come after the election.
// So while a server follows:
//
//   - when the Raft leader has been silent for 400 ms (heartbeats come
//     every 150–300 ms, a write's appends at once), it warms its
//     connection to every live board, once per silence: the dials overlap
//     with gossip's verdict and the election instead of following them.
//     The silent leader's own board is among them: if it lost power, that
//     connect stays unanswered, and the executor counts the board's
//     silence from it, so a new leader's witness finds the board silent
//     at once instead of waiting 300 ms on a connect of its own;
//   - every 30 s it closes the connections nobody has used for two
//     minutes: those it warmed for an election it did not win, and those
//     kept from a term of its own that ended, which would otherwise hold an
//     sshd process and keepalives on every board for good.
//
// The leader keeps its connections (the placer uses them); standby runs
// only while this server does not lead.
var defaultStandby = standby{
	tick:      200 * time.Millisecond,
	warmAfter: 400 * time.Millisecond,
	coolEvery: 30 * time.Second,
	idle:      2 * time.Minute,
	warmFor:   5 * time.Second,
}

// standbyWarmers bounds a standby's warm-ups in flight.
const standbyWarmers = 16

// standbyExecutor is what standby needs of the agent's executor
// (sshexec.Executor through boardExecutor).
type standbyExecutor interface {
	Warm(ctx context.Context, node string) error
	CloseIdle(idle time.Duration) []string
}

// standby decides when a following server warms its connections: once per
// silence of the leader that reaches warmAfter. Pure; standbyLoop is its
// shell.
type standby struct {
	tick      time.Duration // how often the leader's silence is read
	warmAfter time.Duration // the silence that starts a warm-up
	coolEvery time.Duration // how often idle connections are closed
	idle      time.Duration // what counts as idle
	warmFor   time.Duration // bound on one board's warm-up

	warmed bool // in the current silence
}

// step is one look at the leader: it returns whether to warm now.
func (s *standby) step(silence time.Duration) bool {
	if silence < s.warmAfter {
		s.warmed = false
		return false
	}
	if s.warmed {
		return false
	}
	s.warmed = true
	return true
}

// warmTargets returns the live members, sorted: the boards a new leader
// may place on first, and the silent leader's, which it may witness.
func warmTargets(members []gossip.Member) []string {
	var out []string
	for _, m := range members {
		if m.State == api.MemberAlive {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// standbyStore is what standby reads of the Raft store.
type standbyStore interface {
	LeaderSilence() time.Duration
	Leader() (id, addr string)
}

// runStandby stands by until ctx ends (this server leads, or the agent
// stops). Warm-ups run under runCtx, the agent's: winning the election
// must not cancel the dials begun for it. It returns at once without an
// executor that can warm; wg covers the warm-ups.
func (a *Agent) runStandby(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	ex, ok := a.exec.(standbyExecutor)
	if !ok || a.store == nil {
		return
	}
	standbyLoop(ctx, runCtx, wg, defaultStandby, a.store, ex, a.gossip.Members, a.log.With("component", "standby"))
}

// standbyLoop is runStandby's loop over its parts.
func standbyLoop(ctx, runCtx context.Context, wg *sync.WaitGroup, sb standby, st standbyStore, ex standbyExecutor,
	members func() []gossip.Member, log *slog.Logger) {
	tick := time.NewTicker(sb.tick)
	defer tick.Stop()
	cool := time.NewTicker(sb.coolEvery)
	defer cool.Stop()
	var leader string
	for {
		select {
		case <-ctx.Done():
			return
		case <-cool.C:
			if closed := ex.CloseIdle(sb.idle); len(closed) > 0 {
				log.Info("closed idle SSH connections", "boards", closed, "idle", sb.idle)
			}
		case <-tick.C:
			if id, _ := st.Leader(); id != "" {
				leader = id
			}
			silence := st.LeaderSilence()
			if !sb.step(silence) {
				continue
			}
			targets := warmTargets(members())
			log.Info("leader silent; warming SSH connections to the boards", "leader", leader,
				"silence", silence.Round(time.Millisecond), "boards", len(targets))
			// At most standbyWarmers handshakes at once: a large fleet's
			// burst would otherwise land on a small follower all at once.
			sem := make(chan struct{}, standbyWarmers)
			for _, node := range targets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					select {
					case sem <- struct{}{}:
						defer func() { <-sem }()
					case <-runCtx.Done():
						return
					}
					wctx, cancel := context.WithTimeout(runCtx, sb.warmFor)
					defer cancel()
					if err := ex.Warm(wctx, node); err != nil && runCtx.Err() == nil {
						log.Debug("standby warm-up failed", "node", node, "err", err)
					}
				}()
			}
		}
	}
}
