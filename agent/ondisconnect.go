package agent

import (
	"context"
	"sync"

	"github.com/herd-dev/herd/agent/disconnect"
	"github.com/herd-dev/herd/agent/unitwatch"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/sshexec"
)

// startOnDisconnect starts the loop that stops this board's on_disconnect
// units while it is cut off from the servers (package agent/disconnect),
// on a board that can: root on systemd, as for unit reports. The board is
// connected while its gossip shows a majority of the servers alive and,
// on a server, its Raft knows a leader.
func (a *Agent) startOnDisconnect(ctx context.Context, wg *sync.WaitGroup) {
	if !unitwatch.Available() {
		a.log.Info("on_disconnect off: needs root on a systemd board; units run on while this board is cut off")
		return
	}
	marks := disconnect.Marks{Dir: units.DisconnectDir}
	cfg := disconnect.DefaultConfig()
	cfg.Connected = a.connectedToServers
	cfg.Units = func() ([]disconnect.Unit, error) { return disconnect.ReadUnits(sshexec.UnitDir) }
	cfg.Marks = marks.List
	cfg.Mark = marks.Mark
	cfg.Unmark = marks.Unmark
	cfg.List = unitwatch.CollectLocal
	cfg.Stop = disconnect.Stop
	cfg.Logger = a.log.With("component", "ondisconnect")
	l, err := disconnect.New(cfg)
	if err != nil {
		a.log.Warn("on_disconnect off", "err", err)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = l.Run(ctx) // returns ctx's error
	}()
}

// connectedToServers reports whether this board sees a quorum of the
// servers: a majority of them alive in gossip, and on a server a Raft
// leader.
func (a *Agent) connectedToServers() bool {
	if !disconnect.Quorum(a.gossip.Members()) {
		return false
	}
	if a.store != nil {
		if id, _ := a.store.Leader(); id == "" {
			return false
		}
	}
	return true
}
