package raftstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// TestLeaderReadCoversWhatAFollowerApplied: a follower may apply a
// committed entry before the leader's own FSM does. Once a linearizable
// read on that follower has returned the entry, a linearizable read on
// the leader must not return the state before it: it waits until its FSM
// has caught up. (Found by TestLinearizable in cmd/herd: a read through a
// follower saw a scale, the next read, on the leader, did not.)
func TestLeaderReadCoversWhatAFollowerApplied(t *testing.T) {
	c := NewTestCluster(t, 3)
	l := c.Leader()
	f := (l + 1) % 3
	first := mustTxn(t, c.Stores[l], op(OpCreate, deployment("d", `{"replicas":1}`)))[0]
	waitObject(t, c.Stores[f], api.KindDeployment, "d", first.Metadata.ResourceVersion)

	// Hold the leader's FSM back, then write: the entry commits, the
	// follower applies it, the leader's FSM has not.
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release)
	hold := func(uint64) { <-gate }
	c.Stores[l].fsm.beforeApply.Store(&hold)
	upd := first
	upd.Spec = []byte(`{"replicas":2}`)
	written := make(chan error, 1)
	go func() {
		_, err := c.Stores[l].Txn(ctxTimeout(t, 15*time.Second), []Op{op(OpUpdate, upd)})
		written <- err
	}()
	second := waitObject(t, c.Stores[f], api.KindDeployment, "d", first.Metadata.ResourceVersion+1)

	if err := c.Stores[f].ReadBarrier(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("ReadBarrier on the follower: %v", err)
	}
	if got, err := c.Stores[f].Get(api.KindDeployment, "d"); err != nil || got.Metadata.ResourceVersion != second.Metadata.ResourceVersion {
		t.Fatalf("follower read: %+v, %v; want RV %d", got.Metadata, err, second.Metadata.ResourceVersion)
	}
	// The leader's read, while its FSM is held: it must wait (and here
	// give up at its deadline), never answer the older state.
	err := c.Stores[l].ReadBarrier(ctxTimeout(t, 500*time.Millisecond))
	if err == nil {
		got, gerr := c.Stores[l].Get(api.KindDeployment, "d")
		if gerr != nil || got.Metadata.ResourceVersion < second.Metadata.ResourceVersion {
			t.Fatalf("leader read after the follower's: RV %d (%v), older than the follower's %d", got.Metadata.ResourceVersion, gerr, second.Metadata.ResourceVersion)
		}
	} else if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("leader ReadBarrier while its FSM is behind: %v, want it to wait (ErrNoLeader at the deadline)", err)
	}

	c.Stores[l].fsm.beforeApply.Store(nil)
	release()
	if err := <-written; err != nil {
		t.Fatalf("the held write: %v", err)
	}
	if err := c.Stores[l].ReadBarrier(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("leader ReadBarrier after catching up: %v", err)
	}
	if got, err := c.Stores[l].Get(api.KindDeployment, "d"); err != nil || got.Metadata.ResourceVersion != second.Metadata.ResourceVersion {
		t.Errorf("leader read after catching up: %+v, %v; want RV %d", got.Metadata, err, second.Metadata.ResourceVersion)
	}
}
