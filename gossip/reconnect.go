package gossip

import (
	"context"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
)

// Reconnect runs until ctx ends (or the member shuts down). Every
// Config.ReconnectInterval (jittered ±20%) it tries once to join every
// member gossip has declared dead, each at its last address; members that
// left gracefully are not tried. memberlist never probes or syncs with a
// member it declared dead, so without this the two sides of a healed
// partition would each keep the other dead forever (a powered-off board
// that boots again finds the others through its join list instead). A dead
// board costs one TCP connection attempt per interval.
func (g *Gossip) Reconnect(ctx context.Context) {
	interval := g.cfg.ReconnectInterval
	if interval <= 0 {
		return
	}
	for {
		d := spread(interval, g.jitter())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if g.closed.Load() {
			return
		}
		g.reconnectOnce()
	}
}

// spread scales d into [0.8·d, 1.2·d) by r in [0, 1), so that boards
// started together do not act in lockstep.
func spread(d time.Duration, r float64) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*r))
}

// reconnectOnce joins each dead member in parallel (an unreachable one
// costs up to Timing.TCPTimeout, and must not delay the others).
func (g *Gossip) reconnectOnce() {
	var addrs []string
	for _, m := range g.Members() {
		if m.State == api.MemberDead && m.Addr != "" {
			addrs = append(addrs, m.Address())
		}
	}
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, err := g.ml.Join([]string{a}); n > 0 {
				g.log.Info("gossip reconnected to a member declared dead", "addr", a)
			} else {
				g.log.Debug("gossip reconnect failed", "addr", a, "err", err)
			}
		}()
	}
	wg.Wait()
}
