package agent

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/internal/testutil"
)

func TestStandbyStepWarmsOncePerSilence(t *testing.T) {
	sb := standby{warmAfter: 300 * time.Millisecond}
	var got []bool
	for _, ms := range []int{0, 60, 299, 300, 500, 900, 40, 80, 310, 2000} {
		got = append(got, sb.step(time.Duration(ms)*time.Millisecond))
	}
	want := []bool{false, false, false, true, false, false, false, false, true, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warm decisions (-want +got):\n%s", diff)
	}
}

func TestWarmTargetsAreTheLiveMembers(t *testing.T) {
	members := []gossip.Member{
		{Name: "b4", State: api.MemberAlive},
		{Name: "b1", State: api.MemberAlive},
		{Name: "b2", State: api.MemberDead},
		{Name: "b3", State: api.MemberAlive},
		{Name: "b5", State: api.MemberLeft},
	}
	if diff := cmp.Diff([]string{"b1", "b3", "b4"}, warmTargets(members)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

// fakeStandbyStore is a leader whose silence the test sets.
type fakeStandbyStore struct {
	silence atomic.Int64
	leader  atomic.Value // string
}

func (s *fakeStandbyStore) LeaderSilence() time.Duration { return time.Duration(s.silence.Load()) }
func (s *fakeStandbyStore) Leader() (string, string) {
	id, _ := s.leader.Load().(string)
	return id, ""
}

// fakeStandbyExec records warm-ups and idle closes.
type fakeStandbyExec struct {
	mu     sync.Mutex
	warmed []string
	cools  int
}

func (e *fakeStandbyExec) Warm(ctx context.Context, node string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.warmed = append(e.warmed, node)
	return nil
}

func (e *fakeStandbyExec) CloseIdle(idle time.Duration) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cools++
	return nil
}

func (e *fakeStandbyExec) state() ([]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.warmed...), e.cools
}

// The loop warms every live board once when the leader has gone silent, not again in the same silence, again in the next one,
// and closes idle connections on its own period.
func TestStandbyLoopWarmsOnTheLeadersSilence(t *testing.T) {
	st := &fakeStandbyStore{}
	st.leader.Store("b1")
	st.silence.Store(int64(50 * time.Millisecond))
	ex := &fakeStandbyExec{}
	members := func() []gossip.Member {
		return []gossip.Member{{Name: "b1", State: api.MemberAlive}, {Name: "b2", State: api.MemberAlive}, {Name: "b3", State: api.MemberDead}}
	}
	sb := standby{tick: 5 * time.Millisecond, warmAfter: 300 * time.Millisecond, coolEvery: 20 * time.Millisecond, idle: time.Minute, warmFor: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		standbyLoop(ctx, context.Background(), &wg, sb, st, ex, members, testutil.Logger(t))
	}()
	t.Cleanup(func() { cancel(); <-done; wg.Wait() })

	testutil.Until(t, 5*time.Second, "an idle close", func() bool { _, cools := ex.state(); return cools > 0 })
	if warmed, _ := ex.state(); len(warmed) != 0 {
		t.Fatalf("warmed %v while the leader was heard", warmed)
	}
	st.leader.Store("") // an election clears the leader's id
	st.silence.Store(int64(400 * time.Millisecond))
	testutil.Until(t, 5*time.Second, "a warm-up", func() bool { w, _ := ex.state(); return len(w) == 2 })
	_, cools := ex.state()
	testutil.Until(t, 5*time.Second, "two more ticks of idle closes", func() bool { _, c := ex.state(); return c >= cools+2 })
	warmed, _ := ex.state()
	if diff := cmp.Diff([]string{"b1", "b2"}, sorted(warmed)); diff != "" {
		t.Fatalf("warmed in one silence (-want +got):\n%s", diff)
	}
	st.leader.Store("b2")
	st.silence.Store(int64(20 * time.Millisecond))
	testutil.Until(t, 5*time.Second, "the next idle close", func() bool { _, c := ex.state(); return c >= cools+3 })
	st.silence.Store(int64(time.Second))
	testutil.Until(t, 5*time.Second, "a second warm-up", func() bool { w, _ := ex.state(); return len(w) == 4 })
	warmed, _ = ex.state()
	if diff := cmp.Diff([]string{"b1", "b2"}, sorted(warmed[2:])); diff != "" {
		t.Errorf("second warm-up (-want +got):\n%s", diff)
	}
}

// sorted returns a sorted copy of s: warm-ups run concurrently.
func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
