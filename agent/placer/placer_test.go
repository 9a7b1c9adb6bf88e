package placer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(*Config)
		want  string // substring of the error; empty for valid
	}{
		{"default", func(*Config) {}, ""},
		{"no jitter, no quick observe", func(c *Config) { c.ObserveJitter, c.QuickObserve = 0, nil }, ""},
		{"zero interval", func(c *Config) { c.ObserveInterval = 0 }, "ObserveInterval"},
		{"jitter above 1", func(c *Config) { c.ObserveJitter = 1.5 }, "ObserveJitter"},
		{"bad quick observe", func(c *Config) { c.QuickObserve = []time.Duration{time.Second, 0} }, "QuickObserve[1]"},
		{"zero retry base", func(c *Config) { c.RetryBase = 0 }, "RetryBase"},
		{"retry max below base", func(c *Config) { c.RetryMax = time.Millisecond }, "RetryMax"},
		{"zero resync", func(c *Config) { c.ResyncInterval = 0 }, "ResyncInterval"},
		{"zero rewatch", func(c *Config) { c.RewatchDelay = 0 }, "RewatchDelay"},
		{"zero pass timeout", func(c *Config) { c.PassTimeout = 0 }, "PassTimeout"},
		{"zero probe timeout", func(c *Config) { c.ProbeTimeout = 0 }, "ProbeTimeout"},
		{"no probes", func(c *Config) { c.MaxParallelProbes = 0 }, "MaxParallelProbes"},
		{"relative unit dir", func(c *Config) { c.UnitDir = "etc/systemd" }, "UnitDir"},
		{"unclean unit dir", func(c *Config) { c.UnitDir = "/etc/systemd/system/" }, "UnitDir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.tweak(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig naming %s", err, tt.want)
			}
		})
	}
}

func TestNewNeedsDependencies(t *testing.T) {
	st := newFakeState(t)
	if _, err := New(DefaultConfig(), nil, st, st, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New without an Executor: %v", err)
	}
}

// TestRunPlacesOnBindAndObservesQuickly: a bind wakes the board's worker
// at once; after acting it re-observes quickly while the unit comes up,
// then settles on the steady interval.
func TestRunPlacesOnBindAndObservesQuickly(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	b := h.fleet.Board("n1")
	b.StartAs("herd-web-1.service", "activating", "start")
	h.run()

	if pk := h.waitPark("n1", 1); pk.delay != 5*time.Second || pk.idle || pk.retry {
		t.Fatalf("first park = %+v, want the 5 s steady interval", pk)
	}
	h.st.putPod(webPod("web-1", "n1"))
	quick := DefaultConfig().QuickObserve
	if pk := h.waitPark("n1", 2); pk.delay != quick[0] {
		t.Fatalf("park after placing = %+v, want the first quick pause %v", pk, quick[0])
	}
	if got := b.ActiveUnits(); len(got) != 1 {
		t.Fatalf("active units = %v", got)
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodStarting {
		t.Fatalf("pod phase = %s, want Starting", p.Status.Phase)
	}
	h.clock.Advance(quick[0])
	if pk := h.waitPark("n1", 3); pk.delay != quick[1] {
		t.Fatalf("park while starting = %+v, want the second quick pause %v", pk, quick[1])
	}
	if err := b.SetState("herd-web-1.service", "active", "running"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(quick[1])
	if pk := h.waitPark("n1", 4); pk.delay != 5*time.Second {
		t.Fatalf("park once running = %+v, want 5s", pk)
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning || !p.Status.Ready {
		t.Fatalf("pod status = %+v, want Running and ready", p.Status)
	}
	if n := b.CallCount("ShowUnits"); n != 5 {
		t.Errorf("ShowUnits calls = %d, want 5 (idle, place + re-list, two quick passes)", n)
	}
}

// TestRunQuickObserveRunsOut: a unit that never settles gets the quick
// re-observations once, then the steady interval.
func TestRunQuickObserveRunsOut(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	h.fleet.Board("n1").StartAs("herd-web-1.service", "activating", "auto-restart")
	h.run()
	want := append(DefaultConfig().QuickObserve, 5*time.Second, 5*time.Second)
	var got []time.Duration
	for n := 1; n <= len(want); n++ {
		pk := h.waitPark("n1", n)
		got = append(got, pk.delay)
		h.clock.Advance(pk.delay)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

// TestRunUnreachableBoardNoHotLoop: an unreachable board that still counts
// as Ready is retried with a capped exponential backoff; state changes do
// not cut the backoff short; it gets nothing but listings.
func TestRunUnreachableBoardNoHotLoop(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	b.SetUnreachable(true)
	h.run()

	var delays []time.Duration
	var elapsed time.Duration
	n := 1
	for ; elapsed < time.Minute; n++ {
		pk := h.waitPark("n1", n)
		if !pk.retry {
			t.Fatalf("park %d = %+v, want a retry", n, pk)
		}
		delays = append(delays, pk.delay)
		// A change concerning the board while it waits out the backoff.
		h.st.updatePod("web-1", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"N": time.Duration(n).String()} })
		h.clock.Advance(pk.delay)
		elapsed += pk.delay
	}
	h.waitPark("n1", n)
	calls := b.Calls()
	for _, c := range calls {
		if c.Op != "ShowUnits" {
			t.Errorf("unreachable board was told %s", c)
		}
	}
	if len(calls) != n || len(calls) > 20 {
		t.Errorf("%d calls in %v for %d passes: want one per pass and at most 20", len(calls), elapsed, n)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond}
	if diff := cmp.Diff(want, delays[:len(want)]); diff != "" {
		t.Errorf("first pauses (-want +got):\n%s", diff)
	}
	for _, d := range delays[len(want):] {
		if d != 5*time.Second {
			t.Errorf("pause %v, want the 5s cap", d)
		}
	}
	if h.st.applyCount() != 0 {
		t.Errorf("status written for an unreachable board")
	}

	// Back: the next retry places the pod.
	b.SetUnreachable(false)
	h.clock.Advance(5 * time.Second)
	h.waitFor("web-1 running", func() bool { return h.st.pod("web-1").Status.Phase == api.PodRunning })
}

// TestRunDownBoardIsSweptThenFenced: a board declared dead gets only
// sweeps, every WitnessInterval: while it does not answer, nothing is done
// to it; once it answers, its stale unit is stopped and removed at once,
// though gossip still calls it dead and it stays NotReady; when gossip calls
// it alive it is fenced and turns Ready.
func TestRunDownBoardIsSweptThenFenced(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(downNode(t, "n1", "127.0.0.1"))
	h.st.setMember(controller.MemberInfo{Name: "n1", Addr: "127.0.0.1", State: api.MemberDead})
	lost := webPod("web-1", "n1")
	lost.Status.Phase = api.PodLost
	h.st.putPod(lost)
	b := h.fleet.Board("n1")
	b.Install("herd-web-1.service", render(t, h.st.pod("web-1")))
	b.SetUnreachable(true)
	h.run()

	if pk := h.waitPark("n1", 1); pk.idle || pk.retry || pk.delay != time.Second {
		t.Fatalf("park of a dead board = %+v, want a 1s pause before the next sweep", pk)
	}
	if got := b.ActiveUnits(); len(got) != 1 {
		t.Fatalf("an unreachable board's units changed: %v", got)
	}
	b.SetUnreachable(false)
	h.clock.Advance(time.Second)
	h.waitFor("the stale unit swept", func() bool { return len(b.ActiveUnits()) == 0 })
	if ph := h.st.node("n1").Status.Phase; ph != api.NodeNotReady {
		t.Errorf("a swept board is %s, want NotReady until gossip calls it alive", ph)
	}

	h.st.setMember(controller.MemberInfo{Name: "n1", Addr: "127.0.0.1", State: api.MemberAlive})
	h.st.putNode(fencingNode(t, "n1", "127.0.0.1"))
	h.waitFor("n1 Ready", func() bool { return h.st.node("n1").Status.Phase == api.NodeReady })
	if got := b.ActiveUnits(); len(got) != 0 {
		t.Errorf("active units after fencing: %v", got)
	}
	if got := b.Units(); len(got) != 0 {
		t.Errorf("units left after fencing: %+v", got)
	}
	if !h.st.node("n1").Status.Fenced {
		t.Errorf("node not marked fenced")
	}
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.run()
	h.waitPark("n1", 1)
	if err := h.p.Run(t.Context()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
}

// TestRunNodeDeletedAndBack: a deleted node's worker stops; a node of the
// same name gets a new worker that places its pods.
func TestRunNodeDeletedAndBack(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.run()
	h.waitPark("n1", 1)
	h.st.deleteNode("n1")
	h.waitFor("n1's worker to exit", func() bool {
		for _, p := range h.parksOf("n1") {
			if p.exit {
				return true
			}
		}
		return false
	})
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	h.waitFor("web-1 running", func() bool { return h.st.pod("web-1").Status.Phase == api.PodRunning })
}

// TestRunFailedCheckOfAReadyPodIsRecheckedSoon: long after the quick
// passes ran out, a ready pod's failed check starts them again, so the
// checks that may take it out follow within the quick pauses, not a
// period apart.
func TestRunFailedCheckOfAReadyPodIsRecheckedSoon(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	l, port := listen(t)
	h.st.putPod(probePod(port, &api.Probe{TCP: "http"}))
	h.run()
	quick := DefaultConfig().QuickObserve
	n := 1
	for ; ; n++ { // place, then the quick passes until the steady interval
		pk := h.waitPark("n1", n)
		if pk.delay >= 5*time.Second {
			break
		}
		h.clock.Advance(pk.delay)
	}
	if p := h.st.pod("web-1"); !p.Status.Ready {
		t.Fatalf("pod status = %+v, want ready before the check fails", p.Status)
	}
	l.Close()
	h.clock.Advance(6 * time.Second)
	var got []time.Duration
	for range api.DefaultProbeFailureThreshold {
		n++
		pk := h.waitPark("n1", n)
		got = append(got, pk.delay)
		h.clock.Advance(pk.delay)
	}
	if diff := cmp.Diff(quick[:api.DefaultProbeFailureThreshold], got); diff != "" {
		t.Errorf("pauses after the failed checks (-want +got):\n%s", diff)
	}
	if p := h.st.pod("web-1"); p.Status.Ready {
		t.Errorf("pod still ready after %d failed checks", api.DefaultProbeFailureThreshold)
	}
}
