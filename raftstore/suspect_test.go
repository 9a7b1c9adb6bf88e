package raftstore

import (
	"sync/atomic"
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
		{name: "this server won: calm", leading: true, last: at(900), now: at(1700), change: true, next: leaderLook},
		{name: "leading, nothing to change", leading: true, last: at(900), now: at(2200), next: leaderLook},
	}
	for _, l := range looks {
		change, quick, ask, next := sp.step(l.leading, l.known, l.last, l.now)
		if ask {
			t.Fatalf("%s: asked for a second opinion without LeaderAnswers", l.name)
		}
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
		if change, _, _, _ := sp.step(false, true, last, last.Add(time.Duration(100*i)*time.Millisecond)); change {
			t.Fatalf("look %d changed the timeouts %v into a silence below 700 ms", i, time.Duration(100*i)*time.Millisecond)
		}
	}
	if draws != 1 {
		t.Errorf("stretch drawn %d times in one silence, want 1", draws)
	}
	if change, quick, _, _ := sp.step(false, true, last, last.Add(700*time.Millisecond)); !change || !quick {
		t.Errorf("at 700 ms of silence: change %v quick %v, want quick timeouts", change, quick)
	}
}

// TestSuspicionSecondOpinion: with second opinions a follower asks from
// 150 ms before the threshold; a yes holds the election back while it is
// fresh and the silence is below the patience; no answer (or a no) by the
// threshold starts it at once, as without them.
func TestSuspicionSecondOpinion(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(n int) time.Time { return t0.Add(ms(n)) }
	last := at(1000) // the leader's last contact; threshold 500 + 100 stretch = 600 ms of silence
	sp := newSuspicion(ms(500), t0, func() time.Duration { return ms(100) }).withOpinions(opinionTimings(ms(500)))

	type look struct {
		name               string
		now                time.Time
		answer             *bool // an answer to the question in flight, before this look
		change, quick, ask bool
		next               time.Duration
	}
	yes, no := true, false
	looks := []look{
		{name: "silent 300 ms: nothing yet", now: at(1300), next: ms(150)},
		{name: "silent 450 ms: ask", now: at(1450), ask: true, next: ms(150)},
		{name: "no second question while one is out", now: at(1500), next: ms(100)},
		{name: "yes: the next question when due", now: at(1500), answer: &yes, next: ms(50)},
		{name: "due again: ask", now: at(1550), ask: true, next: ms(50)},
		{name: "threshold, held by the yes asked at 450 ms", now: at(1600), next: ms(100)},
		{name: "yes again", now: at(1600), answer: &yes, next: ms(50)},
		{name: "ask every 100 ms while held", now: at(1650), ask: true, next: ms(150)},
		{name: "no: the yes of 550 ms still holds", now: at(1700), answer: &no, next: ms(50)},
		{name: "that yes lapsed at 800 ms: quick", now: at(1800), change: true, quick: true, next: ms(100)},
	}
	for _, l := range looks {
		if l.answer != nil {
			sp.answered(sp.asked, *l.answer)
		}
		change, quick, ask, next := sp.step(false, true, last, l.now)
		got := look{name: l.name, now: l.now, answer: l.answer, change: change, quick: quick, ask: ask, next: next}
		if diff := cmp.Diff(l, got, cmp.AllowUnexported(look{})); diff != "" {
			t.Fatalf("%s: (-want +got)\n%s", l.name, diff)
		}
	}

	// Patience: answers hold an election back only up to 3×500 ms of
	// silence, however fresh.
	sp = newSuspicion(ms(500), t0, func() time.Duration { return 0 }).withOpinions(opinionTimings(ms(500)))
	for now := 1350; now < 2500; now += 50 {
		change, quick, ask, _ := sp.step(false, true, last, at(now))
		if ask {
			sp.answered(at(now), true)
		}
		if silence := now - 1000; (quick && change) != (silence >= 1500) {
			t.Fatalf("silence %d ms with every question answered: change %v quick %v, want quick from 1500 ms on", silence, change, quick)
		}
		if quick {
			break
		}
	}

	// A leader that never answers: the election starts at the threshold,
	// not later, with a question still out.
	sp = newSuspicion(ms(500), t0, func() time.Duration { return ms(100) }).withOpinions(opinionTimings(ms(500)))
	if _, _, ask, _ := sp.step(false, true, last, at(1460)); !ask {
		t.Fatal("no question at 460 ms of silence")
	}
	if change, quick, _, _ := sp.step(false, true, last, at(1600)); !change || !quick {
		t.Errorf("at the threshold with the question unanswered: change %v quick %v, want quick", change, quick)
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

// TestSecondOpinionHoldsThenYields: followers whose second opinion says
// the Raft-silent leader still answers hold their election back (counted
// in SilencesHeld), and still elect a new leader once the silence passes
// their patience.
func TestSecondOpinionHoldsThenYields(t *testing.T) {
	if testing.Short() {
		// A follower asks 150 ms before its threshold; under emulation
		// (make test-arm) its loop can wake later than that and elect
		// without asking, which is the fallback, not a failure.
		t.Skip("needs the suspect loop to wake within 150 ms")
	}
	var asked atomic.Int64
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 3, Configure: func(_ int, cfg *Config) {
		cfg.LeaderAnswers = func(string) bool { asked.Add(1); return true }
	}})
	old := c.Leader()
	held := func() (n uint64) {
		for i, s := range c.Stores {
			if i != old {
				n += s.Stats().SilencesHeld
			}
		}
		return n
	}
	before := held()
	c.Isolate(old)
	c.NewLeader(old)
	if asked.Load() == 0 || held() == before {
		t.Errorf("a new leader without a second opinion held: %d questions, %d held", asked.Load(), held()-before)
	}
}
