package raftstore

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// TestReadBarrierOnLaggingFollower: a follower that missed writes while it
// was cut off serves them after ReadBarrier, however far behind it was.
func TestReadBarrierOnLaggingFollower(t *testing.T) {
	c := NewTestCluster(t, 3)
	leader := c.Leader()
	f := (leader + 1) % 3
	c.Isolate(f)
	for _, name := range []string{"a", "b", "c"} {
		mustTxn(t, c.Stores[leader], op(OpCreate, deployment(name, `{}`)))
	}
	c.Heal(f)
	if err := c.Stores[f].ReadBarrier(ctxTimeout(t, 15*time.Second)); err != nil {
		t.Fatalf("ReadBarrier on the healed follower: %v", err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := c.Stores[f].Get(api.KindDeployment, name); err != nil {
			t.Errorf("after ReadBarrier, Get %s on the follower: %v", name, err)
		}
	}
}

// TestReadBarrierOnEveryServer: ReadBarrier passes on the leader and on
// every follower, and covers a write acknowledged just before.
func TestReadBarrierOnEveryServer(t *testing.T) {
	c := NewTestCluster(t, 3)
	for i, s := range c.Stores {
		objs := mustTxn(t, c.Stores[(i+1)%3], op(OpCreate, deployment(s.NodeID(), `{}`)))
		if err := s.ReadBarrier(ctxTimeout(t, 15*time.Second)); err != nil {
			t.Fatalf("ReadBarrier on %s: %v", s.NodeID(), err)
		}
		got, err := s.Get(api.KindDeployment, s.NodeID())
		if err != nil || got.Metadata.ResourceVersion != objs[0].Metadata.ResourceVersion {
			t.Errorf("on %s after ReadBarrier: %+v, %v; want RV %d", s.NodeID(), got.Metadata, err, objs[0].Metadata.ResourceVersion)
		}
	}
}

// TestDeposedLeaderCannotRead: a leader cut off from the others fails
// VerifyLeader and ReadBarrier instead of serving its old state, even
// while raft on it still says Leader; healed, it reads the new leader's
// writes.
func TestDeposedLeaderCannotRead(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	if err := c.Stores[old].VerifyLeader(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("VerifyLeader on the leader: %v", err)
	}
	c.Isolate(old)
	if err := c.Stores[old].VerifyLeader(ctxTimeout(t, 10*time.Second)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("VerifyLeader on the cut-off leader = %v, want ErrNotLeader", err)
	}
	leader := c.Leader()
	objs := mustTxn(t, c.Stores[leader], op(OpCreate, deployment("new", `{}`)))
	if err := c.Stores[old].ReadBarrier(ctxTimeout(t, 2*time.Second)); !errors.Is(err, ErrNoLeader) {
		t.Errorf("ReadBarrier on the cut-off old leader = %v, want ErrNoLeader", err)
	}
	c.Heal(old)
	if err := c.Stores[old].ReadBarrier(ctxTimeout(t, 15*time.Second)); err != nil {
		t.Fatalf("ReadBarrier on the healed old leader: %v", err)
	}
	if got, err := c.Stores[old].Get(api.KindDeployment, "new"); err != nil || got.Metadata.ResourceVersion != objs[0].Metadata.ResourceVersion {
		t.Errorf("healed old leader: Get = %+v, %v", got.Metadata, err)
	}
}

// TestVerifiedLeader: every server names the leader once it confirmed
// itself; a cut-off old leader names none.
func TestVerifiedLeader(t *testing.T) {
	c := NewTestCluster(t, 3)
	leader := c.Leader()
	for _, s := range c.Stores {
		id, _, err := s.VerifiedLeader(ctxTimeout(t, 10*time.Second))
		if err != nil || id != c.Stores[leader].NodeID() {
			t.Errorf("VerifiedLeader on %s = %q, %v; want %s", s.NodeID(), id, err, c.Stores[leader].NodeID())
		}
	}
	c.Isolate(leader)
	if id, _, err := c.Stores[leader].VerifiedLeader(ctxTimeout(t, time.Second)); err == nil {
		t.Errorf("VerifiedLeader on the cut-off leader = %q, want an error", id)
	}
	c.Heal(leader)
	c.Leader()
}

// TestReadBarrierOlderLeader: a leader that refuses read index requests
// as invalid (a version from before them, during a rolling upgrade) does
// not make followers' reads fail.
func TestReadBarrierOlderLeader(t *testing.T) {
	c := NewTestCluster(t, 3)
	leader := c.Leader()
	c.Stores[leader].mux.setForward(func(conn net.Conn) {
		defer conn.Close()
		var req struct {
			Ops           []Op  `json:"ops"`
			TimeoutMillis int64 `json:"timeoutMillis"`
		}
		err := readFrame(conn, 1<<20, &req) // unknown field readIndex
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("old leader decoding a read index request: %v, want ErrInvalid", err)
		}
		_ = writeFrame(conn, forwardResponse{Error: toWire(fmt.Errorf("%w: forwarded request: %v", ErrInvalid, err))})
	})
	f := (leader + 1) % 3
	if err := c.Stores[f].ReadBarrier(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("ReadBarrier on a follower of an older leader: %v", err)
	}
	if id, _, err := c.Stores[f].VerifiedLeader(ctxTimeout(t, 10*time.Second)); err != nil || id != c.Stores[leader].NodeID() {
		t.Errorf("VerifiedLeader on a follower of an older leader = %q, %v; want %s", id, err, c.Stores[leader].NodeID())
	}
}

func TestVerifyRounds(t *testing.T) {
	got := map[int]int{}
	for v := 0; v <= 7; v++ {
		got[v] = verifyRounds(v)
	}
	want := map[int]int{0: 1, 1: 1, 2: 3, 3: 5, 4: 4, 5: 5, 6: 4, 7: 5}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("verifyRounds (-want +got):\n%s", d)
	}
}
