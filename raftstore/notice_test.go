package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// TestCommitNoticeTellsFollowers: with a CommitTimeout far longer than the
// test, a follower can only learn that the last write of a burst committed
// from the leader's commit notice. It applies the write directly, a write
// forwarded through it returns as soon as it holds it, and a burst costs
// fewer notices than writes.
func TestCommitNoticeTellsFollowers(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 3, Configure: func(_ int, cfg *Config) {
		cfg.CommitTimeout = time.Hour
	}})
	l := c.Leader()
	f := c.Follower()

	// One write on the leader: both followers apply it.
	d := mustTxn(t, c.Stores[l], op(OpCreate, deployment("d", `{"replicas":1}`)))[0]
	for i := range c.Stores {
		waitObject(t, c.Stores[i], api.KindDeployment, "d", d.Metadata.ResourceVersion)
	}

	// A burst: every write's entry carries the commit index of the one
	// before, one notice the last.
	const writes = 20
	before := c.Stores[l].raft.LastIndex()
	for i := range writes {
		d = mustTxn(t, c.Stores[l], op(OpCreate, deployment(fmt.Sprintf("b%d", i), `{"replicas":1}`)))[0]
	}
	waitObject(t, c.Stores[f], api.KindDeployment, d.Metadata.Name, d.Metadata.ResourceVersion)
	c.Eventually(10*time.Second, "the burst's notice to commit", func() bool {
		return c.Stores[l].raft.CommitIndex() > d.Metadata.ResourceVersion
	})
	if notices := c.Stores[l].raft.LastIndex() - before - writes; notices < 1 || notices > writes/2 {
		t.Errorf("a burst of %d writes took %d notices, want at least 1 and far fewer than writes", writes, notices)
	}

	// A write through a follower: its Txn waits until the follower holds
	// it, which without a notice would take the whole CommitTimeout.
	start := time.Now()
	fw, err := c.Stores[f].Txn(ctxTimeout(t, 20*time.Second), []Op{op(OpCreate, deployment("fw", `{"replicas":1}`))})
	if err != nil {
		t.Fatalf("forwarded txn: %v", err)
	}
	got, err := c.Stores[f].Get(api.KindDeployment, "fw")
	if err != nil || got.Metadata.ResourceVersion != fw[0].Metadata.ResourceVersion {
		t.Fatalf("follower after its forwarded txn returned (%v): %+v, %v; want RV %d", time.Since(start), got.Metadata, err, fw[0].Metadata.ResourceVersion)
	}
}
