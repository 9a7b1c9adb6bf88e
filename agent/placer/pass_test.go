package placer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/units"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/placer/boardapi"
	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/api"
)

const unitDir = "/etc/systemd/system/"

func wantCalls(t *testing.T, b *fakeboard.Board, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, b.CallStrings(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("board calls (-want +got):\n%s", diff)
	}
	b.ResetCalls()
}

func TestPassPlacesBoundPod(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	h.st.putPod(webPod("web-2", "n2")) // another board's
	b := h.fleet.Board("n1")
	w := h.p.newWorker("n1")

	res := h.pass(w)
	if res.err != nil || res.acted != 3 || res.skip {
		t.Fatalf("first pass = %+v, want 3 actions", res)
	}
	wantCalls(t, b,
		"ShowUnits",
		"PutFile /etc/herd/env/herd-web-1.env",
		"PutFile /etc/web/web-1.conf",
		"PutFile "+unitDir+"herd-web-1.service",
		"systemctl enable-now herd-web-1.service",
		"ShowUnits",
	)
	if got, _ := b.File("/etc/web/web-1.conf"); string(got) != "greeting = hello\n" {
		t.Errorf("pod file = %q", got)
	}
	if m, _ := b.FileMode("/etc/web/web-1.conf"); m != 0o640 {
		t.Errorf("pod file mode = %v, want 0640", m)
	}
	pod := h.st.pod("web-1")
	if got, _ := b.File(unitDir + "herd-web-1.service"); string(got) != string(render(t, pod)) {
		t.Errorf("unit file differs from the rendered pod:\n%s", got)
	}
	if diff := cmp.Diff([]string{"herd-web-1.service"}, b.ActiveUnits()); diff != "" {
		t.Errorf("active units (-want +got):\n%s", diff)
	}
	if pod.Status.Phase != api.PodRunning || !pod.Status.Ready || !pod.Status.StartedAt.Equal(t0) {
		t.Errorf("pod status = %+v, want Running, ready, started at t0", pod.Status)
	}
	if h.fleet.Board("n2").CallCount("") != 0 {
		t.Errorf("n2 was called by n1's pass")
	}

	// Idempotent: nothing changed, nothing executed, nothing written.
	applies := h.st.applyCount()
	res = h.pass(w)
	if res.err != nil || res.acted != 0 || res.unsettled {
		t.Fatalf("second pass = %+v, want a no-op", res)
	}
	wantCalls(t, b, "ShowUnits")
	if n := h.st.applyCount(); n != applies {
		t.Errorf("second pass wrote status %d times", n-applies)
	}
}

func TestPassRemovesStaleUnit(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	keep := webPod("web-1", "n1")
	keep.Spec.Template.Files = append(keep.Spec.Template.Files, api.File{Path: "/etc/shared.conf", Content: "s", Mode: "0644"})
	h.st.putPod(keep)
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("placing web-1: %v", res.err)
	}

	// A unit of a pod that is not bound here (placed by an older leader,
	// or before the board was partitioned), sharing a file with web-1.
	old := webPod("old-1", "n1")
	old.Metadata.Generation = 1
	old.Spec.Template.Files = append(old.Spec.Template.Files, api.File{Path: "/etc/shared.conf", Content: "s"})
	b := h.fleet.Board("n1")
	b.WriteFile("/etc/web/old-1.conf", []byte("x"), 0o644)
	b.Install("herd-old-1.service", render(t, old))
	b.ResetCalls()

	res := h.pass(w)
	if res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b,
		"ShowUnits",
		"systemctl stop herd-old-1.service",
		"systemctl disable herd-old-1.service",
		"ReadFile "+unitDir+"herd-old-1.service",
		"Remove /etc/web/old-1.conf",
		"Remove "+units.EnvDir+"/herd-old-1.env",
		"Remove "+unitDir+"herd-old-1.service",
		"systemctl daemon-reload",
		"ShowUnits",
	)
	want := []string{units.EnvDir + "/herd-web-1.env", "/etc/shared.conf", unitDir + "herd-web-1.service", "/etc/web/web-1.conf"}
	if diff := cmp.Diff(want, b.Files()); diff != "" {
		t.Errorf("files left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"herd-web-1.service"}, b.ActiveUnits()); diff != "" {
		t.Errorf("active units (-want +got):\n%s", diff)
	}
	if _, ok := b.Unit("herd-old-1.service"); ok {
		t.Errorf("systemd still knows herd-old-1.service")
	}
}

func TestPassRestartsChangedUnit(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("placing: %v", res.err)
	}
	b := h.fleet.Board("n1")
	before, _ := b.Unit("herd-web-1.service")
	b.ResetCalls()

	h.st.updatePod("web-1", func(p *api.Pod) {
		p.Spec.Template.Env = map[string]string{"LEVEL": "debug"}
		p.Spec.Template.Files = []api.File{{Path: "/etc/web/new.conf", Content: "new\n", Mode: "0600"}}
	})
	res := h.pass(w)
	if res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b,
		"ShowUnits",
		"PutFile /etc/herd/env/herd-web-1.env",
		"PutFile /etc/web/new.conf",
		"ReadFile "+unitDir+"herd-web-1.service",
		"PutFile "+unitDir+"herd-web-1.service",
		"Remove /etc/web/web-1.conf",
		"systemctl daemon-reload",
		"systemctl restart herd-web-1.service",
		"ShowUnits",
	)
	after, _ := b.Unit("herd-web-1.service")
	if after.MainPID == before.MainPID || after.ActiveState != "active" || after.NeedDaemonReload {
		t.Errorf("unit after the change = %+v, before %+v: want restarted", after, before)
	}
	if got, _ := b.File(unitDir + "herd-web-1.service"); string(got) != string(render(t, h.st.pod("web-1"))) {
		t.Errorf("unit file is not the new rendering")
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning || !p.Status.Ready {
		t.Errorf("pod status = %+v", p.Status)
	}
}

func TestPassFailedUnit(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("placing: %v", res.err)
	}
	b := h.fleet.Board("n1")
	if err := b.Fail("herd-web-1.service", 3); err != nil {
		t.Fatal(err)
	}
	b.ResetCalls()

	// The failure is reported; Plan does not restart a failed unit.
	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Fatalf("pass = %+v", res)
	}
	wantCalls(t, b, "ShowUnits")
	p := h.st.pod("web-1")
	if p.Status.Phase != api.PodFailed || p.Status.Ready {
		t.Fatalf("pod status = %+v, want Failed", p.Status)
	}

	// A Failed pod is terminal: its unit goes.
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b,
		"ShowUnits",
		"systemctl disable herd-web-1.service",
		"ReadFile "+unitDir+"herd-web-1.service",
		"Remove /etc/web/web-1.conf",
		"Remove "+units.EnvDir+"/herd-web-1.env",
		"Remove "+unitDir+"herd-web-1.service",
		"systemctl daemon-reload",
		"systemctl reset-failed herd-web-1.service",
		"ShowUnits",
	)
	if units := b.Units(); len(units) != 0 {
		t.Errorf("units left: %+v", units)
	}
}

func TestPassStartFailureRetriesThenReports(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	b.StartAs("herd-web-1.service", "failed", "failed")
	w := h.p.newWorker("n1")
	res := h.pass(w)
	if !errors.Is(res.err, fakeboard.ErrCommand) {
		t.Fatalf("pass err = %v, want the failed start", res.err)
	}
	// The status of what was seen after the failure is still reported.
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodFailed {
		t.Errorf("pod phase = %s, want Failed", p.Status.Phase)
	}
}

func TestPassRestartsStoppedUnit(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("placing: %v", res.err)
	}
	b := h.fleet.Board("n1")
	if err := b.SetState("herd-web-1.service", "inactive", "dead"); err != nil {
		t.Fatal(err)
	}
	b.ResetCalls()
	if res := h.pass(w); res.err != nil || res.acted != 1 {
		t.Fatalf("pass = %+v, want one start", res)
	}
	wantCalls(t, b, "ShowUnits", "systemctl start herd-web-1.service", "ShowUnits")
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning {
		t.Errorf("pod phase = %s, want Running", p.Status.Phase)
	}
}

// TestPassRestartsUnitStoppedOnDisconnect: a unit its board stopped while
// cut off from the servers (on_disconnect), whose pod is still bound
// there, is started again and its pod never turns Failed or Succeeded,
// whatever the restart policy and the exit status of the stop.
func TestPassRestartsUnitStoppedOnDisconnect(t *testing.T) {
	for _, policy := range []api.RestartPolicy{api.RestartAlways, api.RestartOnFailure, api.RestartNever} {
		t.Run(string(policy), func(t *testing.T) {
			h := newHarness(t)
			h.st.putNode(readyNode("n1", "127.0.0.1"))
			p := webPod("web-1", "n1")
			p.Spec.Template.RestartPolicy = policy
			p.Spec.Template.OnDisconnect = &api.OnDisconnect{StopAfter: "10s"}
			h.st.putPod(p)
			w := h.p.newWorker("n1")
			if res := h.pass(w); res.err != nil {
				t.Fatalf("placing: %v", res.err)
			}
			if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning {
				t.Fatalf("pod phase = %s, want Running", p.Status.Phase)
			}
			b := h.fleet.Board("n1")
			for _, status := range []int{15, 0} { // SIGTERM, or a clean exit on it
				if err := b.StopOnDisconnect("herd-web-1.service", status); err != nil {
					t.Fatal(err)
				}
				// What the leader sees before it acts: the pod stays
				// Scheduled, never Failed or Succeeded.
				listing, err := h.fleet.ShowUnits(context.Background(), "n1")
				if err != nil {
					t.Fatal(err)
				}
				v, err := h.p.view(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				acts, _, _ := w.observe(context.Background(), v, v.ix.Node("n1"), listing, false)
				if err := h.st.Apply(context.Background(), acts); err != nil {
					t.Fatal(err)
				}
				if p := h.st.pod("web-1"); p.Status.Phase != api.PodScheduled || p.Status.Message != controller.MessageStoppedOnDisconnect {
					t.Errorf("exit %d: pod after the stop = %s %q, want Scheduled %q", status, p.Status.Phase, p.Status.Message, controller.MessageStoppedOnDisconnect)
				}
				b.ResetCalls()
				if res := h.pass(w); res.err != nil || res.acted != 1 {
					t.Fatalf("exit %d: pass = %+v, want one start", status, res)
				}
				wantCalls(t, b, "ShowUnits", "systemctl start herd-web-1.service", "ShowUnits")
				if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning {
					t.Errorf("exit %d: pod phase = %s, want Running", status, p.Status.Phase)
				}
			}
		})
	}
}

func TestPassFencesReturningBoard(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(fencingNode(t, "n2", "127.0.0.2"))
	// The board's pod was declared Lost and replaced while it was away.
	lost := webPod("web-1", "n2")
	lost.Status.Phase = api.PodLost
	h.st.putPod(lost)
	b := h.fleet.Board("n2")
	b.WriteFile("/etc/web/web-1.conf", []byte("x"), 0o640)
	b.Install("herd-web-1.service", render(t, h.st.pod("web-1")))
	b.ResetCalls()

	// First attempt: the stop fails; the node must stay fencing.
	boom := errors.New("boom")
	b.SetHook(func(c fakeboard.Call) error {
		if c.String() == "systemctl stop herd-web-1.service" {
			return boom
		}
		return nil
	})
	w := h.p.newWorker("n2")
	if res := h.pass(w); !errors.Is(res.err, boom) {
		t.Fatalf("pass err = %v, want boom", res.err)
	}
	if n := h.st.node("n2"); n.Status.Phase != api.NodeNotReady || !fencing(n) {
		t.Fatalf("node after a failed fencing pass = %+v", n.Status)
	}
	b.SetHook(nil)
	b.ResetCalls()

	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b,
		"ShowUnits",
		"systemctl stop herd-web-1.service",
		"systemctl disable herd-web-1.service",
		"ReadFile "+unitDir+"herd-web-1.service",
		"Remove /etc/web/web-1.conf",
		"Remove "+units.EnvDir+"/herd-web-1.env",
		"Remove "+unitDir+"herd-web-1.service",
		"systemctl daemon-reload",
		"ShowUnits",
	)
	if got := b.ActiveUnits(); len(got) != 0 {
		t.Errorf("active units after fencing: %v", got)
	}
	n := h.st.node("n2")
	if n.Status.Phase != api.NodeReady || !n.Status.Fenced || fencing(n) {
		t.Errorf("node after fencing = %+v, want Ready and Fenced", n.Status)
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodLost {
		t.Errorf("lost pod became %s", p.Status.Phase)
	}
}

func TestPassFencesCleanBoard(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(fencingNode(t, "n2", "127.0.0.2"))
	w := h.p.newWorker("n2")
	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Fatalf("pass = %+v", res)
	}
	wantCalls(t, h.fleet.Board("n2"), "ShowUnits")
	if n := h.st.node("n2"); n.Status.Phase != api.NodeReady || !n.Status.Fenced {
		t.Errorf("node = %+v, want Ready", n.Status)
	}
}

func TestPassUnreachableBoard(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	b.SetUnreachable(true)
	w := h.p.newWorker("n1")
	res := h.pass(w)
	if !errors.Is(res.err, fakeboard.ErrUnreachable) || res.acted != 0 {
		t.Fatalf("pass = %+v, want ErrUnreachable", res)
	}
	wantCalls(t, b, "ShowUnits")
	if n := h.st.applyCount(); n != 0 {
		t.Errorf("an unreachable board's pass wrote status %d times", n)
	}
}

func TestPassSkipsDownBoards(t *testing.T) {
	tests := []struct {
		name   string
		node   func(t *testing.T) *api.Node
		member api.MemberState
	}{
		{"dead", func(t *testing.T) *api.Node { return downNode(t, "n1", "127.0.0.1") }, ""},
		{"left", func(t *testing.T) *api.Node {
			n := readyNode("n1", "127.0.0.1")
			n.Status.Phase = api.NodeLeft
			return n
		}, ""},
		{"fencing but gossip says left", func(t *testing.T) *api.Node { return fencingNode(t, "n1", "127.0.0.1") }, api.MemberLeft},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.st.putNode(tt.node(t))
			if tt.member != "" {
				h.st.setMember(controller.MemberInfo{Name: "n1", State: tt.member})
			}
			h.st.putPod(webPod("web-1", "n1"))
			if res := h.pass(h.p.newWorker("n1")); !res.skip || res.err != nil {
				t.Fatalf("pass = %+v, want skip", res)
			}
			wantCalls(t, h.fleet.Board("n1"))
		})
	}
}

func TestPassNeverStartsUnboundPod(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	// The pod is deleted while its unit file is being written.
	b.SetHook(func(c fakeboard.Call) error {
		if c.String() == "PutFile "+unitDir+"herd-web-1.service" {
			h.st.deletePod("web-1")
		}
		return nil
	})
	w := h.p.newWorker("n1")
	if res := h.pass(w); !errors.Is(res.err, errStale) {
		t.Fatalf("pass err = %v, want errStale", res.err)
	}
	for _, c := range b.Calls() {
		if c.Op == "systemctl" && len(c.Args) > 0 && (c.Args[0] == VerbEnable || c.Args[0] == VerbStart || c.Args[0] == VerbRestart) {
			t.Errorf("board was told %s for a pod that is gone", c)
		}
	}
	b.SetHook(nil)
	b.ResetCalls()

	if res := h.pass(w); res.err != nil {
		t.Fatalf("cleanup pass: %v", res.err)
	}
	wantCalls(t, b,
		"ShowUnits",
		"systemctl disable herd-web-1.service",
		"ReadFile "+unitDir+"herd-web-1.service",
		"Remove /etc/web/web-1.conf",
		"Remove "+units.EnvDir+"/herd-web-1.env",
		"Remove "+unitDir+"herd-web-1.service",
		"systemctl daemon-reload",
		"ShowUnits",
	)
	if files := b.Files(); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
}

func TestPassUnrenderablePodIsLeftAlone(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	bad := webPod("bad-1", "n1")
	bad.Spec.Template.Exec = nil
	h.st.putPod(bad)
	h.st.putPod(webPod("web-1", "n1"))
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	b := h.fleet.Board("n1")
	if diff := cmp.Diff([]string{"herd-web-1.service"}, b.ActiveUnits()); diff != "" {
		t.Errorf("active units (-want +got):\n%s", diff)
	}
	if p := h.st.pod("bad-1"); p.Status.Phase != api.PodScheduled {
		t.Errorf("unrenderable pod phase = %s", p.Status.Phase)
	}
}

// probePod returns web-1 on n1 listening on port with readiness probe pr.
func probePod(port int, pr *api.Probe) *api.Pod {
	p := webPod("web-1", "n1")
	p.Spec.Template.Ports = []api.Port{{Name: "http", Port: port, Protocol: "tcp"}}
	p.Spec.HostPorts = map[string]int{"http": port}
	if pr.PeriodSeconds == 0 {
		pr.PeriodSeconds = 5
	}
	if pr.TimeoutSeconds == 0 {
		pr.TimeoutSeconds = 2
	}
	p.Spec.Template.Readiness = pr
	return p
}

func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, l.Addr().(*net.TCPAddr).Port
}

func TestPassTCPReadiness(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	l, port := listen(t)
	h.st.putPod(probePod(port, &api.Probe{TCP: "http"}))
	w := h.p.newWorker("n1")

	res := h.pass(w)
	if res.err != nil || res.unsettled {
		t.Fatalf("pass = %+v", res)
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning || !p.Status.Ready {
		t.Fatalf("pod status = %+v, want Running and ready", p.Status)
	}

	// Within the probe period the passing check is not repeated; after
	// it, the closed port fails the check: the pod stays ready, the pass
	// unsettled (so the next check comes soon), until the third failure
	// in a row (the default threshold) makes it not ready.
	l.Close()
	h.clock.Advance(time.Second)
	if res := h.pass(w); res.err != nil || res.unsettled {
		t.Fatalf("pass = %+v", res)
	}
	if p := h.st.pod("web-1"); !p.Status.Ready {
		t.Fatalf("pod turned not ready within the probe period")
	}
	h.clock.Advance(5 * time.Second)
	for i := 1; i <= api.DefaultProbeFailureThreshold; i++ {
		if res := h.pass(w); res.err != nil || !res.unsettled {
			t.Fatalf("pass after failure %d = %+v, want unsettled", i, res)
		}
		p := h.st.pod("web-1")
		if want := i < api.DefaultProbeFailureThreshold; p.Status.Phase != api.PodRunning || p.Status.Ready != want {
			t.Fatalf("after %d failed checks: pod status = %+v, want Running, ready %v", i, p.Status, want)
		}
	}
}

// TestPassReadinessFailureThreshold: a ready pod leaves readiness only
// after failure_threshold failed checks in a row; a passing check in
// between starts the count again; a pod not yet ready gets no grace.
func TestPassReadinessFailureThreshold(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	h.st.putPod(probePod(port, &api.Probe{HTTP: "/", HTTPPort: "http", FailureThreshold: 2}))
	w := h.p.newWorker("n1")
	ready := func() bool { return h.st.pod("web-1").Status.Ready }
	step := func(failing bool) bool {
		t.Helper()
		fail = failing
		h.clock.Advance(6 * time.Second) // past the period: the check runs
		if res := h.pass(w); res.err != nil {
			t.Fatalf("pass: %v", res.err)
		}
		return ready()
	}

	if !step(false) {
		t.Fatal("not ready after a passing check")
	}
	var got []bool
	for _, failing := range []bool{true, false, true, true, true, false} {
		got = append(got, step(failing))
	}
	// fail (1 of 2: ready), pass (count starts again), fail (1), fail (2:
	// not ready), fail (not ready, no grace once out), pass (ready).
	if diff := cmp.Diff([]bool{true, true, true, false, false, true}, got); diff != "" {
		t.Errorf("ready after each check (-want +got):\n%s", diff)
	}
}

func TestPassHTTPReadiness(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	for _, tt := range []struct {
		path  string
		ready bool
	}{{"/healthz", true}, {"/moved", true}, {"/broken", false}} {
		t.Run(tt.path, func(t *testing.T) {
			h := newHarness(t)
			h.st.putNode(readyNode("n1", "127.0.0.1"))
			h.st.putPod(probePod(port, &api.Probe{HTTP: tt.path, HTTPPort: "http"}))
			if res := h.pass(h.p.newWorker("n1")); res.err != nil {
				t.Fatalf("pass: %v", res.err)
			}
			if p := h.st.pod("web-1"); p.Status.Ready != tt.ready {
				t.Errorf("ready = %v, want %v (%+v)", p.Status.Ready, tt.ready, p.Status)
			}
		})
	}
}

func TestPassExecReadiness(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := probePod(8080, &api.Probe{Exec: []string{"/usr/bin/check", "--quick"}, TimeoutSeconds: 3})
	pod.Spec.Template.User = "nobody"
	pod.Spec.Template.WorkingDir = "/srv/web"
	h.st.putPod(pod)
	b := h.fleet.Board("n1")
	status := 1
	var got []boardapi.ProbeCommand
	b.SetProbe(func(c boardapi.ProbeCommand) (int, error) {
		got = append(got, c)
		// A board's `id -u` for the probe's user: the check passes only
		// when it does not run as root.
		if c.User != "nobody" {
			return 99, nil
		}
		return status, nil
	})
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	if p := h.st.pod("web-1"); p.Status.Phase != api.PodRunning || p.Status.Ready {
		t.Fatalf("pod = %+v, want Running, not ready", p.Status)
	}
	status = 0
	b.ResetCalls()
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b, "ShowUnits", "Probe /usr/bin/check --quick")
	if p := h.st.pod("web-1"); !p.Status.Ready {
		t.Fatalf("pod = %+v, want ready", p.Status)
	}
	want := boardapi.ProbeCommand{Unit: "herd-web-1.service", User: "nobody", WorkingDir: "/srv/web",
		EnvironmentFile: units.EnvFilePath("herd-web-1.service"), Timeout: 3 * time.Second, Argv: []string{"/usr/bin/check", "--quick"}}
	if len(got) == 0 {
		t.Fatal("no probe ran")
	}
	if d := cmp.Diff(want, got[len(got)-1]); d != "" {
		t.Errorf("probe command (-want +got):\n%s", d)
	}
}

func TestHostPort(t *testing.T) {
	p := webPod("web-1", "n1")
	p.Spec.Template.Ports = append(p.Spec.Template.Ports, api.Port{Name: "admin", Port: 9000}, api.Port{Name: "dyn"})
	p.Spec.HostPorts = map[string]int{"http": 8080, "dyn": 31000}
	tests := []struct {
		ref     string
		want    int
		wantErr bool
	}{
		{"http", 8080, false},
		{"admin", 9000, false},
		{"dyn", 31000, false},
		{"7000", 7000, false},
		{"nope", 0, true},
		{"", 0, true},
		{"70000", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := hostPort(p, tt.ref)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("hostPort(%q) = %d, %v; want %d, error %v", tt.ref, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestPassFinishesInterruptedRestart: a changed unit whose restart failed
// after its new file was written and loaded is restarted by the next pass,
// although the board's file is already current.
func TestPassFinishesInterruptedRestart(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(webPod("web-1", "n1"))
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("placing: %v", res.err)
	}
	b := h.fleet.Board("n1")
	before, _ := b.Unit("herd-web-1.service")
	h.st.updatePod("web-1", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"LEVEL": "debug"} })
	boom := errors.New("boom")
	b.SetHook(func(c fakeboard.Call) error {
		if c.String() == "systemctl restart herd-web-1.service" {
			return boom
		}
		return nil
	})
	if res := h.pass(w); !errors.Is(res.err, boom) {
		t.Fatalf("pass err = %v, want boom", res.err)
	}
	if u, _ := b.Unit("herd-web-1.service"); u.MainPID != before.MainPID || u.NeedDaemonReload {
		t.Fatalf("unit = %+v: want the old process, new file loaded", u)
	}
	b.SetHook(nil)
	b.ResetCalls()
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b, "ShowUnits", "systemctl daemon-reload", "systemctl restart herd-web-1.service", "ShowUnits")
	if u, _ := b.Unit("herd-web-1.service"); u.MainPID == before.MainPID {
		t.Errorf("unit was not restarted: %+v", u)
	}
	// Done: nothing more.
	if res := h.pass(w); res.err != nil || res.acted != 0 {
		t.Errorf("pass after = %+v, want a no-op", res)
	}
}

// TestSweepStopsStaleUnitsOfADownBoard: a board that is down while gossip
// calls it dead (a partition: its systemd still runs) gets sweeps: once it
// answers, every unit no bound pod wants is stopped and removed, a unit a
// still-bound pod wants is left alone, nothing is started and no status is
// written; a sweep of a board that does not answer fails quietly.
func TestSweepStopsStaleUnitsOfADownBoard(t *testing.T) {
	for _, tt := range []struct {
		name string
		node func(t *testing.T) *api.Node
	}{
		{"not ready", func(t *testing.T) *api.Node { return downNode(t, "n1", "127.0.0.1") }},
		{"fencing", func(t *testing.T) *api.Node { return fencingNode(t, "n1", "127.0.0.1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.st.putNode(tt.node(t))
			h.st.setMember(controller.MemberInfo{Name: "n1", Addr: "127.0.0.1", State: api.MemberDead})
			lost := webPod("web-1", "n1")
			lost.Status.Phase = api.PodLost
			h.st.putPod(lost)
			bound := webPod("web-2", "n1") // not yet marked Lost
			h.st.putPod(bound)
			b := h.fleet.Board("n1")
			b.Install("herd-web-1.service", render(t, h.st.pod("web-1")))
			b.Install("herd-web-2.service", render(t, h.st.pod("web-2")))
			b.SetUnreachable(true)
			if res := h.pass(h.p.newWorker("n1")); !res.sweep || res.err == nil {
				t.Fatalf("sweep of an unreachable board = %+v, want a failed sweep", res)
			}
			b.SetUnreachable(false)
			res := h.pass(h.p.newWorker("n1"))
			if !res.sweep || res.err != nil || res.acted == 0 {
				t.Fatalf("sweep = %+v, want a sweep that acted", res)
			}
			if diff := cmp.Diff([]string{"herd-web-2.service"}, b.ActiveUnits()); diff != "" {
				t.Errorf("active units after the sweep (-want +got):\n%s", diff)
			}
			for _, u := range b.Units() {
				if u.Unit == "herd-web-1.service" {
					t.Errorf("the stale unit is still installed: %+v", u)
				}
			}
			for _, c := range b.CallStrings() {
				if strings.HasPrefix(c, "systemctl start") || strings.HasPrefix(c, "systemctl enable") ||
					strings.HasPrefix(c, "systemctl restart") || strings.HasPrefix(c, "PutFile") {
					t.Errorf("a sweep brought a unit up: %s", c)
				}
			}
			if n := h.st.applyCount(); n != 0 {
				t.Errorf("a sweep wrote status %d times", n)
			}
		})
	}
}
