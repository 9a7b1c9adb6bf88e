package agent

import (
	"context"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/raftstore"
)

// notifier fans "gossip membership changed" out to several consumers as
// coalesced wake-ups: a consumer only learns that something changed and
// re-reads Members(), so a slow consumer never blocks gossip.
type notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func newNotifier() *notifier { return &notifier{subs: make(map[chan struct{}]struct{})} }

func (n *notifier) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// pumpGossip turns gossip events into notifications until ctx ends.
func (a *Agent) pumpGossip(ctx context.Context, n *notifier) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-a.gossip.Events():
			if !ok {
				return
			}
			a.log.Debug("gossip event", "event", ev.Type.String(), "member", ev.Member.Name, "state", string(ev.Member.State))
			n.notify()
		}
	}
}

// bootstrapLoop forms the first Raft configuration once bootstrap_expect
// servers are visible in gossip (the first bootstrap_expect of them by name
// become the voters, so every server computes the same set). A server with
// existing Raft state, or one not among the chosen, never bootstraps: the
// leader adds it.
func (a *Agent) bootstrapLoop(ctx context.Context, changes <-chan struct{}) {
	expect := a.cfg.BootstrapExpect
	if expect == 0 {
		return
	}
	has, err := a.store.HasExistingState()
	if err != nil || has {
		return
	}
	lastErr := ""
	retry := time.NewTimer(time.Second)
	defer retry.Stop()
	for {
		if id, _ := a.store.Leader(); id != "" {
			a.log.Info("a leader exists; not bootstrapping", "leader", id)
			a.stopAnnouncingBootstrap()
			return
		}
		peers, ok, err := gossip.BootstrapPeers(a.cfg.Name, expect, a.gossip.Members())
		if err != nil {
			if err.Error() != lastErr {
				a.log.Warn("cannot bootstrap yet", "err", err)
				lastErr = err.Error()
			}
		} else if ok {
			servers := make([]raftstore.Server, 0, len(peers))
			for _, p := range peers {
				servers = append(servers, raftstore.Server{ID: p.Name, Address: p.Meta.RaftAddr, Voter: true})
			}
			if err := a.store.Bootstrap(servers); err != nil {
				a.log.Error("raft bootstrap failed", "err", err)
			} else {
				a.log.Info("raft bootstrapped", "voters", len(servers))
			}
			a.stopAnnouncingBootstrap()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-retry.C:
			retry.Reset(time.Second)
		}
	}
}

// stopAnnouncingBootstrap tells gossip that this server belongs to a
// cluster now, so it is no longer a bootstrap candidate.
func (a *Agent) stopAnnouncingBootstrap() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bootDone {
		return
	}
	a.bootDone = true
	m := a.gossip.LocalMember().Meta
	m.BootstrapExpect = 0
	if err := a.gossip.UpdateMeta(m); err != nil {
		a.log.Warn("gossip meta update", "err", err)
	}
}

// leaderLoop runs the leader's duties while this server leads and stops them
// when it loses leadership; while it does not lead, it stands by
// (standby.go).
func (a *Agent) leaderLoop(ctx context.Context, n *notifier) {
	ch, unsub := a.store.LeadershipChanges()
	defer unsub()
	var warms sync.WaitGroup
	defer warms.Wait()
	var stop func()
	end := func() {
		if stop != nil {
			stop()
			stop = nil
		}
	}
	defer end()
	stop = a.startStandby(ctx, &warms)
	leading := false
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader, ok := <-ch:
			if !ok {
				return
			}
			if isLeader == leading {
				continue
			}
			leading = isLeader
			end()
			if !isLeader {
				a.log.Info("lost leadership")
				stop = a.startStandby(ctx, &warms)
				continue
			}
			a.log.Info("gained leadership")
			a.stopAnnouncingBootstrap()
			stop = a.startLeading(ctx, n)
		}
	}
}

// startStandby runs runStandby in the background; the returned func stops
// it and waits for its loop (not for the warm-ups, which warms covers).
func (a *Agent) startStandby(ctx context.Context, warms *sync.WaitGroup) func() {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.runStandby(sctx, ctx, warms) }()
	return func() { cancel(); <-done }
}

// startLeading runs lead in the background; the returned func stops it and
// waits for it to finish.
func (a *Agent) startLeading(ctx context.Context, n *notifier) func() {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.lead(lctx, n) }()
	return func() { cancel(); <-done }
}

// lead runs everything the leader does until ctx ends.
func (a *Agent) lead(ctx context.Context, n *notifier) {
	changes, unsub := n.subscribe()
	defer unsub()
	var wg sync.WaitGroup
	defer wg.Wait()
	a.startControllers(ctx, &wg, n)
	resync := time.NewTimer(0)
	defer resync.Stop()
	for {
		a.reconcileRaftMembers()
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-resync.C:
			resync.Reset(30 * time.Second)
		}
	}
}

// reconcileRaftMembers brings the Raft configuration in line with the
// servers gossip sees (raftstore.PlanMembership decides; this applies the
// plan in order and stops at the first failure, which the next change or
// resync plans again).
func (a *Agent) reconcileRaftMembers() {
	servers, err := a.store.Configuration()
	if err != nil {
		a.log.Warn("raft configuration", "err", err)
		return
	}
	var cands []raftstore.Candidate
	for _, m := range a.gossip.Members() {
		if !m.Meta.Server || m.MetaErr != "" {
			continue
		}
		cands = append(cands, raftstore.Candidate{ID: m.Name, Address: m.Meta.RaftAddr,
			Alive: m.State == api.MemberAlive, Left: m.State == api.MemberLeft})
	}
	for _, c := range raftstore.PlanMembership(servers, cands, a.cfg.BootstrapExpect, a.cfg.Name) {
		var err error
		switch c.Type {
		case raftstore.AddVoter:
			err = a.store.AddVoter(c.ID, c.Address)
		case raftstore.AddNonvoter:
			err = a.store.AddNonvoter(c.ID, c.Address)
		case raftstore.RemoveServer:
			err = a.store.RemoveServer(c.ID)
		}
		if err != nil {
			a.log.Warn("raft membership change failed", "change", c.Type, "member", c.ID, "err", err)
			return
		}
		a.log.Info("raft membership changed", "change", c.Type, "member", c.ID, "addr", c.Address, "why", c.Reason)
	}
}
