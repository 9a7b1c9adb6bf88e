package raftstore

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/internal/testutil"
)

// TestIsolateLeader: a cut-off leader keeps running but steps down, the
// others elect a new one, and once healed it follows that one.
func TestIsolateLeader(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	c.Isolate(old)
	testutil.Until(t, 10*time.Second, "the cut-off leader to step down", func() bool {
		return c.Stores[old].raft.State() != raft.Leader
	})
	leader := c.Leader()
	if leader == old {
		t.Fatalf("the cut-off server %d is leader", old)
	}
	c.Heal(old)
	want, _ := c.Stores[leader].Leader()
	testutil.Until(t, 10*time.Second, "the healed server to follow the new leader", func() bool {
		id, _ := c.Stores[old].Leader()
		return id == want
	})
}
