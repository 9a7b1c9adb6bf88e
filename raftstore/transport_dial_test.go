package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDialBoundedByHandshakeTimeout: dialing a peer that never answers
// gives up after the handshake timeout, however long the caller would
// wait.
func TestDialBoundedByHandshakeTimeout(t *testing.T) {
	c := NewTestCluster(t, 3)
	c.Isolate(1)
	defer func() { c.Heal(1); c.Leader() }()
	hs := c.Configs[0].HandshakeTimeout
	start := time.Now()
	conn, err := c.Stores[0].mux.dial(ctxTimeout(t, 30*time.Second), c.Stores[1].Addr(), protoForward)
	took := time.Since(start)
	if err == nil {
		conn.Close()
		t.Fatal("dial to a cut-off server succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial error = %v, want a deadline", err)
	}
	if took < hs || took > hs+5*time.Second {
		t.Errorf("dial gave up after %s, want about the handshake timeout %s", took, hs)
	}
}
