package placer

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// report sends the placer what the board's agent would report now.
func report(h *harness, node string) unitreport.Mark {
	m, us := h.fleet.Board(node).Report()
	h.p.Report(node, m, us)
	return m
}

// placed runs a placer pass that places web-1 on n1 and returns the worker,
// the board and its calls reset.
func placed(t *testing.T, h *harness) (*worker, *fakeboard.Board) {
	t.Helper()
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := webPod("web-1", "n1")
	pod.Spec.Template.Readiness = nil
	h.st.putPod(pod)
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil || res.acted == 0 {
		t.Fatalf("placing pass = %+v", res)
	}
	b := h.fleet.Board("n1")
	b.ResetCalls()
	return w, b
}

func TestReportedCrashWithoutSSH(t *testing.T) {
	h := newHarness(t)
	w, b := placed(t, h)
	report(h, "n1")
	if err := b.Crash("herd-web-1.service", 137); err != nil {
		t.Fatal(err)
	}
	report(h, "n1")

	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Fatalf("pass after the report = %+v", res)
	}
	wantCalls(t, b) // nothing: the report said it all
	p := h.st.pod("web-1")
	if p.Status.Restarts != 1 || p.Status.Phase != api.PodRunning {
		t.Errorf("pod status = %+v, want Running with 1 restart", p.Status)
	}

	// A failure is reported the same way; the Failed pod's unit then has
	// to go, and the worker lists the board over SSH before it acts.
	if err := b.Fail("herd-web-1.service", 3); err != nil {
		t.Fatal(err)
	}
	report(h, "n1")
	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Fatalf("pass after the failure report = %+v", res)
	}
	wantCalls(t, b)
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodFailed {
		t.Errorf("pod phase = %s, want Failed", p.Status.Phase)
	}
	if res := h.pass(w); res.err != nil || res.acted == 0 {
		t.Fatalf("pass removing the Failed pod's unit = %+v", res)
	}
	if got := b.CallStrings(); len(got) < 2 || got[0] != "ShowUnits" || got[len(got)-1] != "ShowUnits" {
		t.Errorf("calls = %v, want a listing first and last", got)
	}
}

func TestReportOlderThanListingIsIgnored(t *testing.T) {
	h := newHarness(t)
	w, b := placed(t, h)
	// A report begun before the crash, arriving after a listing that saw
	// the crash, must not undo what the listing saw.
	oldMark, oldUnits := b.Report()
	if err := b.Crash("herd-web-1.service", 137); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(h.p.cfg.ReportedListInterval * 2) // the SSH listing is due
	h.p.Report("n1", unitreport.Mark{Epoch: fakeboard.ReportEpoch, Seq: oldMark.Seq + 1}, b.Units())
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	if n := b.CallCount("ShowUnits"); n != 1 {
		t.Fatalf("ShowUnits calls = %d, want 1 (the listing was due)", n)
	}
	b.ResetCalls()
	h.p.Report("n1", oldMark, oldUnits) // late and old: dropped by Report itself
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	if p := h.st.pod("web-1"); p.Status.Restarts != 1 {
		t.Errorf("restarts = %d after an old report, want 1", p.Status.Restarts)
	}
	wantCalls(t, b)
}

func TestListingCoversEarlierReports(t *testing.T) {
	h := newHarness(t)
	w, b := placed(t, h)
	report(h, "n1")
	h.pass(w) // takes the report
	// The board begins a report before a crash but it arrives only after
	// the next listing, which saw the crash (mark 2 in the seq file).
	m, us := b.Report()
	if err := b.Crash("herd-web-1.service", 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(h.p.cfg.ReportedListInterval * 2)
	if res := h.pass(w); res.err != nil || b.CallCount("ShowUnits") != 1 {
		t.Fatalf("pass = %+v, calls %v; want one listing", res, b.CallStrings())
	}
	h.p.Report("n1", m, us)
	b.ResetCalls()
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b)
	if p := h.st.pod("web-1"); p.Status.Restarts != 1 {
		t.Errorf("restarts = %d: the report the listing covered moved status back", p.Status.Restarts)
	}
}

func TestResyncRepairsALostReport(t *testing.T) {
	h := newHarness(t)
	w, b := placed(t, h)
	report(h, "n1")
	if res := h.pass(w); res.err != nil {
		t.Fatal(res.err)
	}
	// The crash's report is lost. Until the listing is due, passes see
	// nothing new and call nothing.
	if err := b.Crash("herd-web-1.service", 137); err != nil {
		t.Fatal(err)
	}
	b.ResetCalls()
	h.clock.Advance(h.p.cfg.ReportedListInterval / 2)
	h.pass(w)
	wantCalls(t, b)
	if p := h.st.pod("web-1"); p.Status.Restarts != 0 {
		t.Fatalf("restarts = %d before the resync, want 0", p.Status.Restarts)
	}
	h.clock.Advance(h.p.cfg.ReportedListInterval)
	h.pass(w)
	wantCalls(t, b, "ShowUnits")
	if p := h.st.pod("web-1"); p.Status.Restarts != 1 {
		t.Errorf("restarts = %d after the resync, want 1", p.Status.Restarts)
	}
}

func TestReportingPacing(t *testing.T) {
	h := newHarness(t)
	w, _ := placed(t, h)
	var ps pacing
	ps.quick = len(h.p.cfg.QuickObserve)
	w.pace(t.Context(), &ps, passResult{})
	if ps.delay != h.p.cfg.ObserveInterval {
		t.Errorf("delay without reports = %v, want ObserveInterval", ps.delay)
	}
	report(h, "n1")
	h.pass(w) // an SSH listing: sets when the next one is due
	w.pace(t.Context(), &ps, passResult{})
	if ps.delay != h.p.cfg.ReportedListInterval {
		t.Errorf("delay while reporting = %v, want ReportedListInterval %v", ps.delay, h.p.cfg.ReportedListInterval)
	}
	w.pace(t.Context(), &ps, passResult{probing: true})
	if ps.delay != h.p.cfg.ObserveInterval {
		t.Errorf("delay with readiness checks = %v, want ObserveInterval", ps.delay)
	}
	h.clock.Advance(h.p.cfg.ReportTTL + time.Second)
	w.pace(t.Context(), &ps, passResult{})
	if ps.delay != h.p.cfg.ObserveInterval {
		t.Errorf("delay after the reports stopped = %v, want ObserveInterval", ps.delay)
	}
}

func TestReportWakesTheWorker(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.run()
	h.waitPark("n1", 1)
	n := len(h.parksOf("n1"))
	report(h, "n1")
	h.waitPark("n1", n+1)
}

// A pod bound to a board whose report shows no unit for it is placed
// without listing the board first; anything that takes a unit down still
// waits for a listing.
func TestReportedBoardPlacesWithoutListingFirst(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	w := h.p.newWorker("n1")
	b := h.fleet.Board("n1")
	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Fatalf("pass over the empty board = %+v", res)
	}
	report(h, "n1")
	pod := webPod("web-1", "n1")
	pod.Spec.Template.Readiness = nil
	h.st.putPod(pod)
	b.ResetCalls()

	if res := h.pass(w); res.err != nil || res.acted == 0 {
		t.Fatalf("placing pass = %+v", res)
	}
	wantCalls(t, b,
		"PutFile /etc/herd/env/herd-web-1.env",
		"PutFile /etc/web/web-1.conf",
		"PutFile "+unitDir+"herd-web-1.service",
		"systemctl enable-now herd-web-1.service",
		"ShowUnits",
	)
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning {
		t.Errorf("pod phase = %s, want Running", p.Status.Phase)
	}

	// The pod moves away: its unit comes down only after a listing.
	report(h, "n1")
	moved := h.st.pod("web-1")
	moved.Spec.Node = "n2"
	h.st.putPod(moved)
	if res := h.pass(w); res.err != nil || res.acted == 0 {
		t.Fatalf("pass taking the unit down = %+v", res)
	}
	if got := b.CallStrings(); len(got) == 0 || got[0] != "ShowUnits" {
		t.Errorf("calls = %v, want a listing first", got)
	}
}

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

func (nopObserver) Placed(string, time.Duration)                   {}
func (nopObserver) BoardCall(string, string, time.Duration, error) {}

// warmFleet is a fake fleet that is also a Warmer.
type warmFleet struct {
	*fakeboard.Fleet
	warmed chan string
}

func (f warmFleet) Warm(ctx context.Context, node string) error {
	f.warmed <- node
	return nil
}

// A new worker (a new leader's) on a reporting board takes the units from
// the report: a pod bound there is placed without a listing first, and the
// connection to the board is warmed meanwhile.
func TestNewWorkerStartsFromTheReport(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	b := h.fleet.Board("n1")
	report(h, "n1")
	w := h.p.newWorker("n1")
	pod := webPod("web-1", "n1")
	pod.Spec.Template.Readiness = nil
	h.st.putPod(pod)
	if res := h.pass(w); res.err != nil || res.acted == 0 {
		t.Fatalf("first pass = %+v, want it to place web-1", res)
	}
	if got := b.CallStrings(); len(got) == 0 || got[0] == "ShowUnits" {
		t.Errorf("calls = %v, want the placement first (no listing before it)", got)
	}
	if got := b.ActiveUnits(); len(got) != 1 {
		t.Errorf("active units = %v, want web-1's", got)
	}

	warmed := make(chan string, 1)
	cfg := h.p.cfg
	cfg.Observer = nopObserver{} // as the agent's: the executor gets wrapped
	p, err := New(cfg, warmFleet{h.fleet, warmed}, h.st, h.st, h.clock, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	report(h, "n1")
	h.run()
	select {
	case node := <-warmed:
		if node != "n1" {
			t.Errorf("warmed %q, want n1", node)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a new worker on a reporting board did not warm the connection")
	}
}

// A new worker that has not reached its board yet (its first pass comes
// from a report, perhaps of a board that just lost power) runs no
// readiness check: each pod keeps its Ready. Once the board was reached
// (a listing), checks run again.
func TestNewWorkerChecksReadinessOnceItReachedTheBoard(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	// One failed check is enough to tell (TestPassReadinessFailureThreshold
	// covers the threshold).
	pod := probePod(port, &api.Probe{HTTP: "/", HTTPPort: "http", FailureThreshold: 1})
	h.st.putPod(pod)
	b := h.fleet.Board("n1")
	if res := h.pass(h.p.newWorker("n1")); res.err != nil || res.acted == 0 { // the old leader places it
		t.Fatalf("placing pass = %+v", res)
	}
	h.st.updatePod("web-1", func(p *api.Pod) { p.Status.Ready = true }) // as the old leader last saw it
	hits = 0
	b.ResetCalls()
	report(h, "n1")

	w := h.p.newWorker("n1") // the new leader's
	if res := h.pass(w); res.err != nil {
		t.Fatalf("first pass: %v", res.err)
	}
	if hits != 0 {
		t.Errorf("readiness checks before the board was reached = %d, want 0", hits)
	}
	if p := h.st.pod("web-1"); !p.Status.Ready {
		t.Errorf("pod Ready = false after the first pass, want it kept true")
	}
	wantCalls(t, b)

	if _, err := w.listSSH(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass after a listing: %v", res.err)
	}
	if hits == 0 {
		t.Error("no readiness check once the board was reached")
	}
	if p := h.st.pod("web-1"); p.Status.Ready {
		t.Error("pod still Ready after its check failed")
	}
}
