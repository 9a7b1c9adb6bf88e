package agent

import (
	"context"
	"path/filepath"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/agent/unitwatch"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/sshexec"
)

// Unit reports (see packages agent/unitwatch and agent/unitreport): every
// agent on a systemd board, as root, watches its own herd units and sends
// a signed report of them to every alive server over gossip's reliable
// channel; servers verify each report against the host key the board
// announces (the one the leader's SSH connections pin) and keep the newest
// per board in a.reports, which the placer reads while this server leads.
// Gossip rather than the API: a worker holds no API credential, and
// gossip is already the channel every board has to every server.

// onGossipMessage receives user messages on a server.
func (a *Agent) onGossipMessage(kind byte, body []byte) {
	if kind != unitreport.Kind || a.reports == nil {
		return
	}
	a.receiveReport(body)
}

// receiveReport opens a report and keeps it; a report that does not open
// is dropped and logged (a misbehaving peer cannot make it cost more than
// decoding and one signature check of at most gossip.MaxMessage bytes).
func (a *Agent) receiveReport(body []byte) {
	r, err := unitreport.Open(body, func(node string) (ssh.PublicKey, error) {
		_, k, err := announcedHost(a.gossip, node)
		return k, err
	})
	if err != nil {
		a.metrics.UnitReport("refused")
		a.log.Debug("unit report refused", "err", err)
		return
	}
	if a.reports.Put(r.Node, r.Mark, r.Units) {
		a.metrics.UnitReport("kept")
	} else {
		a.metrics.UnitReport("stale")
	}
}

// sendReport hands a board's report to every alive server: to this agent
// directly when it is one, over gossip to the others, concurrently.
func (a *Agent) sendReport(ctx context.Context, body []byte) {
	var wg sync.WaitGroup
	for _, m := range a.gossip.Members() {
		if m.State != api.MemberAlive || !m.Meta.Server {
			continue
		}
		if m.Name == a.cfg.Name {
			if a.reports != nil {
				a.receiveReport(body)
			}
			continue
		}
		wg.Add(1)
		go func(to string) {
			defer wg.Done()
			if err := a.gossip.Send(to, unitreport.Kind, body); err != nil && ctx.Err() == nil {
				a.log.Debug("unit report not delivered", "server", to, "err", err)
			}
		}(m.Name)
	}
	wg.Wait()
}

// startUnitWatch starts this board's unit watcher when unit_reports allows
// it and the board can: root on systemd, with its host key's private half
// readable. Otherwise the leader lists the board over SSH as before.
func (a *Agent) startUnitWatch(ctx context.Context, wg *sync.WaitGroup) {
	cfg := a.cfg
	if cfg.UnitReports == "off" {
		return
	}
	if !unitwatch.Available() {
		a.log.Info("not reporting unit changes: needs root on a systemd board; the leader lists this board over SSH")
		return
	}
	signer, err := unitwatch.LoadHostSigner(cfg.SSHHostKeyFile)
	if err != nil {
		a.log.Warn("not reporting unit changes: no host key to sign with; the leader lists this board over SSH", "err", err)
		return
	}
	wc := unitwatch.DefaultConfig(sshexec.ReportSeqFile)
	wc.Node = cfg.Name
	wc.Signer = signer
	wc.EpochFile = filepath.Join(cfg.DataDir, "unitreport.epoch")
	wc.Collect = unitwatch.CollectLocal
	wc.Send = a.sendReport
	wc.Source = unitwatch.DBus{}
	wc.Logger = a.log.With("component", "unitwatch")
	w, err := unitwatch.New(wc)
	if err != nil {
		a.log.Warn("not reporting unit changes", "err", err)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(ctx) // returns ctx's error
	}()
}
