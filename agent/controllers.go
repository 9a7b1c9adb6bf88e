package agent

import (
	"context"
	"sync"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/agent/svcview"
	"github.com/herd-dev/herd/internal/clock"
)

// startControllers starts the leader-only controllers under ctx; they stop
// when ctx ends (leadership lost or agent stopping).
func (a *Agent) startControllers(ctx context.Context, wg *sync.WaitGroup, n *notifier) {
	state := newClusterState(a.store, a.gossip, n)
	rcfg := controller.DefaultRunnerConfig()
	rcfg.Observer = a.metrics
	runner, err := controller.NewRunner(rcfg, state, state, clock.RealClock(), a.log.With("component", "controller"))
	if err != nil {
		a.log.Error("controllers not started", "err", err)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := runner.Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("controllers stopped", "err", err)
		}
	}()
	rec := newRecorder(a.store, clock.RealClock(), a.log.With("component", "events"), a.cfg.Name)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rec.run(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("event recorder stopped", "err", err)
		}
	}()
	if a.exec == nil {
		a.log.Warn("not placing pods on boards: no cluster SSH key", "sshKeyFile", a.cfg.SSHKeyFile)
		return
	}
	pub := svcview.NewPublisher(a.view, viewWriter{a.exec}, clock.RealClock(), a.log.With("component", "svcview"))
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = pub.Run(ctx) // returns ctx's error
	}()
	pcfg := placer.DefaultConfig()
	pcfg.RecordWitness = state.recordWitness
	pcfg.Observer = a.metrics
	pcfg.Reports = a.reports
	if a.ring != nil {
		pcfg.Credentials = credentials(a.store, a.ring)
	}
	pl, err := placer.New(pcfg, a.exec, state, state, clock.RealClock(), a.log.With("component", "placer"))
	if err != nil {
		a.log.Error("placer not started", "err", err)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := pl.Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("placer stopped", "err", err)
		}
	}()
}
