package placer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/api"
)

// witnesses records what the placer reports through Config.RecordWitness.
type witnesses struct {
	mu  sync.Mutex
	got []controller.Witness
}

func (r *witnesses) record(node string, w controller.Witness) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, w)
}

func (r *witnesses) all() []controller.Witness {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]controller.Witness(nil), r.got...)
}

// deadReadyBoard sets up n1 Ready with web-1 bound to it while gossip calls
// it dead: every pass over it is a witness.
func deadReadyBoard(t *testing.T, tweak ...func(*Config)) (*harness, *witnesses) {
	rec := &witnesses{}
	h := newHarness(t, append([]func(*Config){func(c *Config) { c.RecordWitness = rec.record }}, tweak...)...)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.setMember(controller.MemberInfo{Name: "n1", State: api.MemberDead})
	h.st.putPod(webPod("web-1", "n1"))
	return h, rec
}

func TestWitnessReachableBoard(t *testing.T) {
	h, rec := deadReadyBoard(t)
	res := h.pass(h.p.newWorker("n1"))
	if !res.witness || res.err != nil || res.skip {
		t.Fatalf("pass = %+v, want a successful witness pass", res)
	}
	got := rec.all()
	if len(got) != 1 || got[0].Err != "" || !got[0].At.Equal(t0) {
		t.Fatalf("witnesses = %+v, want one success at %v", got, t0)
	}
	// The pass goes on: the board is Ready, its pods are placed and
	// observed as on any other board.
	if !slices.Contains(h.fleet.Board("n1").ActiveUnits(), "herd-web-1.service") {
		t.Error("a witnessed board's pod was not started")
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning {
		t.Errorf("web-1 = %s, want Running", p.Status.Phase)
	}
}

// A pooled connection to a board that lost power hangs: the witness fails
// at its deadline, not the pass's.
func TestWitnessPoweredOffBoardFailsInTime(t *testing.T) {
	h, rec := deadReadyBoard(t, func(c *Config) { c.WitnessTimeout = 150 * time.Millisecond })
	h.fleet.Board("n1").SetHang(true)
	start := time.Now()
	res := h.pass(h.p.newWorker("n1"))
	took := time.Since(start)
	if !res.witness || res.err == nil {
		t.Fatalf("pass = %+v, want a failed witness", res)
	}
	if took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("witness took %v, want about its 150ms deadline", took)
	}
	got := rec.all()
	if len(got) != 1 || !strings.Contains(got[0].Err, "no answer within 150ms") {
		t.Fatalf("witnesses = %+v, want one failure naming the deadline", got)
	}
	if n := h.st.applyCount(); n != 0 {
		t.Errorf("a failed witness wrote status %d times", n)
	}
}

// With a connection known to be silent the witness does not wait for its
// deadline at all.
func TestWitnessSilentConnectionFailsAtOnce(t *testing.T) {
	h, rec := deadReadyBoard(t, func(c *Config) { c.WitnessTimeout = time.Minute })
	b := h.fleet.Board("n1")
	b.SetHang(true)
	b.SetSilence(time.Second)
	start := time.Now()
	res := h.pass(h.p.newWorker("n1"))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("witness took %v with a silent connection", took)
	}
	got := rec.all()
	if res.err == nil || len(got) != 1 || !strings.Contains(got[0].Err, "stopped answering") {
		t.Fatalf("pass = %+v, witnesses = %+v; want a failure naming the silence", res, got)
	}

	// The silence is noticed during the call too.
	b.SetSilence(0)
	silentOnCall(b, "ShowUnits") // the connection goes quiet mid-call
	if res := h.pass(h.p.newWorker("n1")); res.err == nil {
		t.Fatalf("pass = %+v, want a failure", res)
	}
	if got := rec.all(); len(got) != 2 || !strings.Contains(got[1].Err, "stopped answering") {
		t.Fatalf("witnesses = %+v, want a second failure naming the silence", got)
	}
}

// The worker witnesses every WitnessInterval, failed or not, with no
// backoff, and a state change still wakes it.
func TestWitnessWorkerCadence(t *testing.T) {
	h, rec := deadReadyBoard(t, func(c *Config) { c.WitnessTimeout = 20 * time.Millisecond })
	h.fleet.Board("n1").SetHang(true)
	h.run()
	for i := 1; i <= 2; i++ {
		pk := h.waitPark("n1", i)
		if pk.delay != time.Second || pk.retry || pk.idle {
			t.Fatalf("park %d = %+v, want a 1s pause that a poke may cut short", i, pk)
		}
		if i == 1 {
			h.clock.Advance(time.Second)
		}
	}
	if got := rec.all(); len(got) < 2 || got[0].Err == "" {
		t.Fatalf("witnesses = %+v, want two failures", got)
	}
	// The node controller declares it NotReady: sweeps follow at the
	// same pace, and record no witness.
	n := len(rec.all())
	h.st.putNode(downNode(t, "n1", "127.0.0.1"))
	// Each park is followed by a clock step once it is seen (its timer
	// exists by then), so the next pass comes whether the state change
	// woke the worker first or not.
	for i := 3; i <= 4; i++ {
		pk := h.waitPark("n1", i)
		if pk.idle || pk.delay != time.Second {
			t.Fatalf("park %d = %+v, want a 1s pause before the next sweep (board down)", i, pk)
		}
		h.clock.Advance(time.Second)
	}
	if got := rec.all(); len(got) > n+1 {
		t.Errorf("sweeps recorded witnesses: %+v", got[n:])
	}
}

// An ordinary pass in flight when a board loses power is cut short as soon
// as the connection goes silent, so the witness that follows gossip's
// verdict is not held up behind it.
func TestPassOnSilentBoardIsCutShort(t *testing.T) {
	rec := &witnesses{}
	h := newHarness(t, func(c *Config) { c.RecordWitness = rec.record })
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	b.SetHang(true)
	silentOnCall(b, "ShowUnits") // the power goes mid-pass
	start := time.Now()
	res := h.pass(h.p.newWorker("n1"))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("pass took %v on a silent board", took)
	}
	if res.witness || !errors.Is(res.err, errSilent) {
		t.Fatalf("pass = %+v, want an ordinary pass failed with errSilent", res)
	}
	if got := rec.all(); len(got) != 0 {
		t.Errorf("an ordinary pass recorded witnesses %+v", got)
	}
}

// After a pass cut short by silence the worker still takes a poke, so the
// witness follows gossip's verdict at once instead of after a backoff.
func TestSilentBoardWitnessedWithoutBackoff(t *testing.T) {
	rec := &witnesses{}
	h := newHarness(t, func(c *Config) { c.RecordWitness = rec.record })
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	b.SetHang(true)
	b.SetSilence(time.Second)
	h.run()
	if pk := h.waitPark("n1", 1); pk.retry || pk.delay <= 0 {
		t.Fatalf("park after the silent pass = %+v, want a backoff that a poke may cut short", pk)
	}
	h.st.setMember(controller.MemberInfo{Name: "n1", State: api.MemberDead})
	h.waitFor("a failed witness, with the clock standing still", func() bool {
		got := rec.all()
		return len(got) == 1 && strings.Contains(got[0].Err, "stopped answering")
	})
}

// A pass that finds the board silent from its start still writes what the
// board's last report says, and the silence cuts that write short: the
// pass fails for the silence all the same, so the worker takes gossip's
// verdict at once instead of after a backoff (a lab pull once lost 275 ms
// that way).
func TestSilenceCuttingAStatusWriteIsSilence(t *testing.T) {
	h := newHarness(t)
	w, b := placed(t, h)
	report(h, "n1")
	if err := b.Crash("herd-web-1.service", 137); err != nil {
		t.Fatal(err)
	}
	report(h, "n1") // a restart to write down
	b.SetSilence(time.Second)
	res := h.pass(w)
	if !errors.Is(res.err, errSilent) {
		t.Fatalf("pass = %+v, want it failed with errSilent", res)
	}
	var ps pacing
	w.pace(context.Background(), &ps, res)
	if ps.retrying {
		t.Errorf("pacing after the pass = %+v, want a backoff a poke may cut short", ps)
	}
}

// silentOnCall makes b's connection silent (for a second, as a keepalive
// left unanswered would) the moment a call op begins, so the call is in
// flight, hanging, when the silence comes.
func silentOnCall(b *fakeboard.Board, op string) {
	b.SetHook(func(c fakeboard.Call) error {
		if c.Op == op {
			b.SetSilence(time.Second)
		}
		return nil
	})
}
