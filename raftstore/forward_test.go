package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// TestForwardFollowsNewLeader: a write through a follower just after the
// leader vanished (cut off, not closed: nothing answers its address) is
// committed by the new leader as soon as one is elected, not after the
// caller's whole timeout.
func TestForwardFollowsNewLeader(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	f := (old + 1) % 3
	mustTxn(t, c.Stores[f], op(OpCreate, deployment("before", `{}`)))
	if _, addr := c.Stores[f].Leader(); addr != c.Stores[old].Addr() {
		t.Fatalf("follower's leader = %s, want %s", addr, c.Stores[old].Addr())
	}

	c.Isolate(old)
	const callerTimeout = 30 * time.Second
	start := time.Now()
	objs, err := c.Stores[f].Txn(ctxTimeout(t, callerTimeout), []Op{op(OpCreate, deployment("during", `{}`))})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("write through the follower after %s: %v", took, err)
	}
	t.Logf("write through the follower acknowledged %s after the leader vanished", took)
	// An election (about 1 s here) plus a round trip; far below the
	// caller's timeout, which the write used to wait out.
	if limit := 10 * time.Second; took > limit {
		t.Errorf("write took %s, want well under %s (caller timeout %s)", took, limit, callerTimeout)
	}
	leader := c.Leader()
	if leader == old {
		t.Fatalf("the cut-off server %d is still leader", old)
	}
	got := waitObject(t, c.Stores[leader], api.KindDeployment, "during", objs[0].Metadata.ResourceVersion)
	if got.Metadata.ResourceVersion != objs[0].Metadata.ResourceVersion {
		t.Errorf("new leader has RV %d, the write returned %d", got.Metadata.ResourceVersion, objs[0].Metadata.ResourceVersion)
	}
	// Healed, the old leader follows the new one and catches up.
	c.Heal(old)
	waitObject(t, c.Stores[old], api.KindDeployment, "during", objs[0].Metadata.ResourceVersion)
}

// TestForwardInFlightLeaderVanishes: a forwarded write the leader received
// but never answered, because it vanished, fails as soon as a new leader
// is known, with an error that says the outcome is unknown (it may still
// commit), instead of after the caller's whole timeout.
func TestForwardInFlightLeaderVanishes(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	f := (old + 1) % 3
	received := make(chan struct{}, 1)
	c.Stores[old].mux.setForward(func(conn net.Conn) { // receives, never answers
		defer conn.Close()
		var b [1]byte
		if _, err := conn.Read(b[:]); err == nil {
			received <- struct{}{}
		}
		_, _ = io.Copy(io.Discard, conn)
	})
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := c.Stores[f].Txn(ctxTimeout(t, 30*time.Second), []Op{op(OpCreate, deployment("lost", `{}`))})
		done <- result{err, time.Since(start)}
	}()
	select {
	case <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader never received the forwarded write")
	}
	c.Isolate(old)
	r := <-done
	t.Logf("in-flight write failed %s after it was sent: %v", r.took, r.err)
	if r.err == nil {
		t.Fatal("write succeeded though the leader never answered")
	}
	if !errors.Is(r.err, errLeaderMoved) || !errors.Is(r.err, ErrOutcomeUnknown) {
		t.Errorf("error = %v, want an unknown outcome because the leader changed", r.err)
	}
	for _, sentinel := range []error{ErrNoLeader, ErrNotLeader, ErrConflict, ErrNotFound} {
		if errors.Is(r.err, sentinel) {
			t.Errorf("error wraps %v; an unknown outcome must wrap no other sentinel", sentinel)
		}
	}
	if limit := 10 * time.Second; r.took > limit {
		t.Errorf("write failed after %s, want well under %s", r.took, limit)
	}
	c.Heal(old)
	c.Leader()
}

func TestWireErrorKeepsSentinel(t *testing.T) {
	for _, sentinel := range []error{ErrOutcomeUnknown, ErrNoLeader, ErrConflict} {
		err := toWire(fmt.Errorf("%w: txn: %w", sentinel, context.DeadlineExceeded)).toError()
		if !errors.Is(err, sentinel) {
			t.Errorf("%v across the wire = %v, which does not wrap it", sentinel, err)
		}
	}
}
