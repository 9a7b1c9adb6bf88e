package raftstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/testutil"
)

// drain returns what ch holds right now.
func drain(ch <-chan bool) []bool {
	var out []bool
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return append(out, false) // mark: closed
			}
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestLeadershipFanout(t *testing.T) {
	l := newLeadership()
	a, cancelA := l.subscribe()
	if d := cmp.Diff([]bool{false}, drain(a)); d != "" {
		t.Errorf("initial value (-want +got):\n%s", d)
	}
	l.set(false) // a repeated false is dropped
	if got := drain(a); len(got) != 0 {
		t.Errorf("repeated false delivered: %v", got)
	}
	l.set(true)
	b, cancelB := l.subscribe()
	defer cancelB()
	if d := cmp.Diff([]bool{true}, drain(b)); d != "" {
		t.Errorf("late subscriber's first value (-want +got):\n%s", d)
	}
	// A slow reader keeps only the latest value.
	l.set(false)
	l.set(true)
	if d := cmp.Diff([]bool{true}, drain(a)); d != "" {
		t.Errorf("slow reader (-want +got):\n%s", d)
	}
	// true after true is delivered: leadership was lost and regained.
	l.set(true)
	if d := cmp.Diff([]bool{true}, drain(a)); d != "" {
		t.Errorf("true after true (-want +got):\n%s", d)
	}
	cancelA()
	cancelA()
	if _, ok := <-a; ok {
		t.Error("channel open after cancel")
	}
	l.close()
	drain(b)
	if _, ok := <-b; ok {
		t.Error("channel open after close")
	}
	c, _ := l.subscribe()
	if _, ok := <-c; ok {
		t.Error("subscription after close is open")
	}
}

// LeaderSilence is 0 on the leader and short on a follower that hears the
// heartbeats; when the leader is cut off it grows on the survivors until a new
// leader is heard from.
func TestLeaderSilence(t *testing.T) {
	c := NewTestCluster(t, 3) // HeartbeatTimeout 300ms: heartbeats every 30ms
	old := c.Leader()
	if got := c.Stores[old].LeaderSilence(); got != 0 {
		t.Errorf("leader's LeaderSilence = %v, want 0", got)
	}
	f := c.Follower()
	hearing := func(i int) bool { s := c.Stores[i].LeaderSilence(); return s > 0 && s < 100*time.Millisecond }
	testutil.Until(t, 5*time.Second, "the follower to hear heartbeats", func() bool { return hearing(f) })
	c.Isolate(old) // Stop would hand leadership over first
	testutil.Until(t, 10*time.Second, "the follower's silence to pass 150ms", func() bool {
		return c.Stores[f].LeaderSilence() >= 150*time.Millisecond
	})
	leader := c.NewLeader(old)
	for i := range c.Stores {
		if i == leader || i == old {
			continue
		}
		testutil.Until(t, 10*time.Second, "the survivor to hear the new leader", func() bool { return hearing(i) })
	}
}
