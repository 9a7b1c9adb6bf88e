package raftstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/testutil"
)

// TestSuspicionSteps walks the decision through a leader's life: heard,
// silent past the (stretched) threshold, an election, a new leader heard.
func TestSuspicionSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(n int) time.Time { return t0.Add(ms(n)) }
	stretch := ms(100)
	sp := newSuspicion(ms(500), t0, func() time.Duration { return stretch })

	type look struct {
		name          string
		leading       bool
		known         bool
		last, now     time.Time
		change, quick bool
		next          time.Duration
	}
	looks := []look{
		{name: "never heard: counts from open", now: at(200), next: ms(400)},
		{name: "never heard, past 600 ms: quick", now: at(600), change: true, quick: true, next: ms(100)},
		{name: "still nobody: stays quick", now: at(700), quick: true, next: ms(100)},
		{name: "a leader heard: calm", known: true, last: at(750), now: at(760), change: true, next: ms(590)},
		{name: "heard again, threshold drawn anew", known: true, last: at(900), now: at(1000), next: ms(500)},
		{name: "silent 550 ms: below the stretched threshold", known: true, last: at(900), now: at(1450), next: ms(50)},
		{name: "silent 600 ms: quick", known: true, last: at(900), now: at(1500), change: true, quick: true, next: ms(100)},
		{name: "leader still known but silent: stays quick", known: true, last: at(900), now: at(1600), quick: true, next: ms(100)},
		{name: "this server won: calm", leading: true, last: at(900), now: at(1700), change: true, next: ms(500)},
		{name: "leading, nothing to change", leading: true, last: at(900), now: at(2200), next: ms(500)},
	}
	for _, l := range looks {
		change, quick, next := sp.step(l.leading, l.known, l.last, l.now)
		got := look{name: l.name, leading: l.leading, known: l.known, last: l.last, now: l.now, change: change, quick: quick, next: next}
		if diff := cmp.Diff(l, got, cmp.AllowUnexported(look{})); diff != "" {
			t.Fatalf("%s: (-want +got)\n%s", l.name, diff)
		}
	}
}

// TestSuspicionStretchIsPerSilence: the random stretch is drawn once per
// silence, not at every look, so a look does not move the threshold.
func TestSuspicionStretchIsPerSilence(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	draws := 0
	sp := newSuspicion(500*time.Millisecond, t0, func() time.Duration { draws++; return 200 * time.Millisecond })
	last := t0.Add(time.Second)
	for i := range 5 {
		if change, _, _ := sp.step(false, true, last, last.Add(time.Duration(100*i)*time.Millisecond)); change {
			t.Fatalf("look %d changed the timeouts %v into a silence below 700 ms", i, time.Duration(100*i)*time.Millisecond)
		}
	}
	if draws != 1 {
		t.Errorf("stretch drawn %d times in one silence, want 1", draws)
	}
	if change, quick, _ := sp.step(false, true, last, last.Add(700*time.Millisecond)); !change || !quick {
		t.Errorf("at 700 ms of silence: change %v quick %v, want quick timeouts", change, quick)
	}
}

// TestDefaultJitterInRange: the default stretch stays in [0, after/2].
func TestDefaultJitterInRange(t *testing.T) {
	sp := newSuspicion(500*time.Millisecond, time.Time{}, nil)
	for range 1000 {
		if j := sp.jitter(); j < 0 || j > 250*time.Millisecond {
			t.Fatalf("stretch %v outside [0, 250ms]", j)
		}
	}
}

// TestQuickElectionAfterSilence: in a cluster whose raft runs with the calm
// timeouts, cutting the leader off makes a follower give raft the quick
// ones (which starts its election), a new leader is elected, and every
// survivor goes back to the calm timeouts once it hears it.
func TestQuickElectionAfterSilence(t *testing.T) {
	c := NewTestCluster(t, 3)
	calm, _ := c.Stores[0].cfg.calmTimeouts()
	if quick := c.Stores[0].cfg.HeartbeatTimeout; calm <= quick {
		t.Fatalf("test config: calm timeout %v not above the quick %v", calm, quick)
	}
	raftTimeout := func(i int) time.Duration { return c.Stores[i].raft.ReloadableConfig().HeartbeatTimeout }
	old := c.Leader()
	for i := range c.Stores {
		testutil.Until(t, 10*time.Second, "calm timeouts once the first leader is heard", func() bool { return raftTimeout(i) == calm })
	}
	before := map[int]uint64{}
	for i, s := range c.Stores {
		before[i] = s.Stats().Suspicions
	}
	c.Isolate(old)
	c.NewLeader(old)
	suspected := 0
	for i, s := range c.Stores {
		if i != old && s.Stats().Suspicions > before[i] {
			suspected++
		}
	}
	if suspected == 0 {
		t.Errorf("no survivor gave raft its quick timeouts before the new leader was elected")
	}
	for i := range c.Stores {
		if i == old {
			continue
		}
		testutil.Until(t, 10*time.Second, "the survivors back on calm timeouts", func() bool { return raftTimeout(i) == calm })
	}
}
