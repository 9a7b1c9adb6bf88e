//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
)

// pollFast is how often the failover scenarios poll (through a port
// forward: one herdctl call is ~10-20 ms).
const pollFast = 100 * time.Millisecond

// TestFleet runs the scenarios in order on the one lab; each starts from a
// converged fleet running examples/web.toml and leaves one behind (killed
// boards booted again, partitions healed, netem cleared).
func TestFleet(t *testing.T) {
	// The lab stays up for TestHostile, which runs after this one and
	// takes it down; after a panic, make e2e's own `scripts/lab down` does.
	scenarios := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a_apply_web", testApplyWeb},
		{"b_units_verify", testUnitsVerify},
		{"b_prometheus", testPrometheus},
		{"b_unit_reports", testUnitReports},
		{"c_worker_power_pull", testWorkerPowerPull},
		{"d_leader_power_pull", testLeaderPowerPull},
		{"e_board_back_fenced", testBoardBackFenced},
		{"g_kill9_mid_apply", testKill9MidApply},
		{"h_packet_loss", testPacketLoss},
		{"i_rollout_undo", testRolloutUndo},
		{"j_drain_rebalance", testDrainRebalance},
		// Last: it cuts a board off and heals it; the board must rejoin
		// gossip by itself and be fenced (the restore checks convergence).
		{"f_partition", testPartition},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			sc.run(t)
			t.Logf("%s took %.1fs", sc.name, time.Since(start).Seconds())
		})
	}
}

// testCtx is a context for one step, cancelled when the test ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// viaExcept is the first server board not in exclude: polls go through
// its API.
func viaExcept(exclude ...string) string {
	for _, b := range fleet.ServerBoards() {
		if !slices.Contains(exclude, b) {
			return b
		}
	}
	return ""
}

func webManifest() string { return filepath.Join(fleet.Root, "examples", "web.toml") }

// converge applies examples/web.toml (a no-op when it already is) and
// waits until the fleet runs it exactly, via the first server not in
// exclude.
func converge(t *testing.T, exclude ...string) (Snapshot, map[string]BoardUnits) {
	t.Helper()
	ctx := testCtx(t, 3*time.Minute)
	if out, err := fleet.Herdctl(ctx, viaExcept(exclude...), "", "apply", "-f", webManifest()); err != nil {
		t.Fatalf("apply %s: %v\n%s", webManifest(), err, out)
	}
	s, units, err := fleet.WaitConverged(ctx, viaExcept(exclude...), Web)
	if err != nil {
		t.Fatal(err)
	}
	return s, units
}

// restoreLab registers a cleanup that brings the lab back to health: heal
// partitions, clear netem on boards, power every board on, and wait until
// the fleet has converged again.
func restoreLab(t *testing.T, netem ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := testCtx(t, 3*time.Minute)
		for _, b := range netem {
			if _, err := fleet.Lab(ctx, "netem", b, "clear"); err != nil {
				t.Errorf("restore: netem %s clear: %v", b, err)
			}
		}
		if err := fleet.Heal(ctx); err != nil {
			t.Errorf("restore: heal: %v", err)
		}
		// up powers on every board that is off and leaves the others alone.
		if _, err := fleet.Lab(ctx, "up", fmt.Sprint(len(fleet.Boards))); err != nil {
			t.Errorf("restore: lab up: %v", err)
		}
		t0 := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s, _, err := fleet.WaitConverged(wctx, viaExcept(), Web)
		cancel()
		if err != nil {
			// Workaround for boards that never rejoin gossip after a
			// partition (see testPartition): restart their agent, which
			// joins again through its seeds.
			var stuck []string
			for _, b := range fleet.Boards {
				if n := s.Node(b); n != nil && n.Status.Phase != api.NodeReady {
					stuck = append(stuck, b)
				}
			}
			t.Logf("restore: not converged after 20s (%v); restarting herd on the boards not Ready: %v", err, stuck)
			for _, b := range stuck {
				if _, err := fleet.SSH(ctx, b, "", "systemctl restart herd.service"); err != nil {
					t.Errorf("restore: restart herd on %s: %v", b, err)
				}
			}
			if _, _, err := fleet.WaitConverged(ctx, viaExcept(), Web); err != nil {
				t.Errorf("restore: %v", err)
				return
			}
		}
		t.Logf("restore: fleet converged again in %.1fs", time.Since(t0).Seconds())
	})
}

// waitLeader polls herdctl status through via until it names a leader not
// in not.
func waitLeader(t *testing.T, ctx context.Context, via string, not ...string) string {
	t.Helper()
	var leader string
	err := Poll(ctx, 250*time.Millisecond, "a leader", func(ctx context.Context) (bool, string) {
		l, err := fleet.Leader(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		leader = l
		return l != "" && !slices.Contains(not, l), "leader " + orNone(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// victim picks a board running a pod of Web that is not the leader,
// preferring a worker (not a Raft server) and then not b1 (the first host
// of herdctl's context).
func victim(t *testing.T, s Snapshot, leader string) string {
	t.Helper()
	var cands []string
	for _, b := range fleet.Boards {
		if b != leader && len(Web.PodsOn(s, b)) > 0 {
			cands = append(cands, b)
		}
	}
	if len(cands) == 0 {
		t.Fatalf("no board other than the leader %s runs a web pod", leader)
	}
	rank := func(b string) int {
		switch {
		case !fleet.IsServer(b):
			return 0
		case b != "b1":
			return 1
		}
		return 2
	}
	sort.SliceStable(cands, func(i, j int) bool { return rank(cands[i]) < rank(cands[j]) })
	return cands[0]
}

// podsByBoard is "board: pod@unit ..." for logs.
func podsByBoard(s Snapshot) string {
	var parts []string
	for _, p := range Web.Live(s) {
		parts = append(parts, fmt.Sprintf("%s@%s:%s", p.Metadata.Name, orNone(p.Spec.Node), p.Status.Phase))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// memberPy prints the gossip members as the board's own agent sees them
// (its API on loopback, with the token a server holds, or the one a worker
// generated for itself).
const memberPy = `import json, os, urllib.request
p = "/etc/herd/api.token" if os.path.exists("/etc/herd/api.token") else "/var/lib/herd/api.token"
tok = open(p).readline().strip()
req = urllib.request.Request("http://127.0.0.1:7948/v1/status", headers={"Authorization": "Bearer " + tok})
d = json.load(urllib.request.urlopen(req, timeout=5))
print(" ".join("%s=%s" % (m["name"], m["state"]) for m in d["members"]))
`

// fetchPy fetches a URL from inside a board: status line, then body.
const fetchPy = `import sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=5)
print(r.status)
print(r.read().decode())
`

// a. apply examples/web.toml: every replica's unit is active on its board
// and answers from another board; the service lists exactly the running
// pods' board IP:port.
func testApplyWeb(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	via := viaExcept()
	t0 := time.Now()
	out, err := fleet.Herdctl(ctx, "", "", "apply", "-f", webManifest(), "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("herdctl apply --wait: %v\n%s", err, out)
	}
	t.Logf("apply --wait (through the context's SSH tunnel) returned after %.1fs:\n%s", time.Since(t0).Seconds(), out)
	s, units, err := fleet.WaitConverged(ctx, via, Web)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converged %.1fs after apply: %s", time.Since(t0).Seconds(), podsByBoard(s))

	pods := Web.Live(s)
	var wantEP []string
	for _, p := range pods {
		board, unit := p.Spec.Node, p.Status.Unit
		if got, err := fleet.SSH(ctx, board, "", "systemctl is-active "+unit); err != nil || strings.TrimSpace(got) != "active" {
			t.Errorf("%s: systemctl is-active %s = %q, %v; want active", board, unit, strings.TrimSpace(got), err)
		}
		if p.Status.IP != BoardIP(board) {
			t.Errorf("pod %s on %s: status.ip %s, want the board's %s", p.Metadata.Name, board, p.Status.IP, BoardIP(board))
		}
		ep := Web.Endpoint(p)
		wantEP = append(wantEP, ep)
		from := "b1"
		for _, b := range fleet.Boards {
			if b != board {
				from = b
				break
			}
		}
		got, err := fleet.SSH(ctx, from, fetchPy, "python3 - http://"+ep+"/")
		if err != nil {
			t.Errorf("GET http://%s/ from %s: %v", ep, from, err)
			continue
		}
		status, body, _ := strings.Cut(got, "\n")
		if status != "200" || !strings.Contains(body, "hello from a herd board") {
			t.Errorf("GET http://%s/ from %s: %q", ep, from, got)
		}
		t.Logf("pod %s: unit %s active on %s, GET http://%s/ from %s: %s", p.Metadata.Name, unit, board, ep, from, status)
	}
	svc := s.Service(Web.Service)
	var gotEP []string
	for _, e := range svc.Status.Endpoints {
		gotEP = append(gotEP, e.Address)
	}
	slices.Sort(gotEP)
	slices.Sort(wantEP)
	if d := cmp.Diff(wantEP, gotEP); d != "" {
		t.Errorf("service %s endpoints (-running pods +service):\n%s", Web.Service, d)
	}
	n, dup := CountActive(units)
	if n != Web.Replicas || len(dup) > 0 {
		t.Errorf("%d active web units fleet-wide (duplicates %v), want %d", n, dup, Web.Replicas)
	}
}

// b. the rendered units pass systemd-analyze verify on the boards.
func testUnitsVerify(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, time.Minute)
	for _, b := range fleet.Boards {
		if len(Web.PodsOn(s, b)) == 0 {
			continue
		}
		out, err := fleet.SSH(ctx, b, "", "systemd-analyze verify /etc/systemd/system/herd-*.service 2>&1; echo rc=$?")
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		out = strings.TrimSpace(out)
		if out != "rc=0" {
			t.Errorf("%s: systemd-analyze verify /etc/systemd/system/herd-*.service:\n%s", b, out)
		} else {
			t.Logf("%s: systemd-analyze verify herd-*.service: clean", b)
		}
	}
}

// c. the power pulled on a board (not the leader's) running a pod: a
// replacement runs elsewhere, its unit active there, and the service
// endpoints no longer list the dead board.
func testWorkerPowerPull(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 2*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	v := victim(t, s, leader)
	restoreLab(t)
	lost := Web.PodsOn(s, v)
	// Every board names the service's endpoints, and a request through
	// any surviving board's service port keeps working through the
	// failover.
	checkServiceDNS(t, ctx, fleet.Boards, "")
	var survivors []string
	for _, b := range fleet.Boards {
		if b != v {
			survivors = append(survivors, b)
		}
	}
	requests := StartRequests(survivors, 50*time.Millisecond)
	// Headless Chromium watches herdctl dashboard through the failover.
	dash := startDashboard(t, v, lost)
	t.Logf("leader %s; pulling the power on %s (runs %s)", leader, v, lost[0].Metadata.Name)
	pulled := time.Now()
	seen := make(chan dashboardSeen, 1)
	go func() { seen <- watchDashboard(dash, v, lost, pulled) }()
	r, err := fleet.PullPower(ctx, v, viaExcept(v), false, Web, pollFast)
	t.Logf("failover: %v", r)
	if err != nil {
		requests.Stop()
		t.Fatal(err)
	}
	checkReplaced(t, ctx, v, lost)
	checkRequests(t, ctx, requests, pulled)
	checkServiceDNS(t, ctx, survivors, v)
	checkTimeline(t, ctx, v, lost, pulled)
	checkDashboard(t, dash, <-seen, v)
}

// checkServiceDNS checks that every board in boards answers
// web.svc.herd. (A) and _http._tcp.web.svc.herd. (SRV) with the
// service's endpoints, none on dead (if set), with dig.
func checkServiceDNS(t *testing.T, ctx context.Context, boards []string, dead string) {
	t.Helper()
	svc, err := fleet.Service(ctx, viaExcept(dead), Web.Service)
	if err != nil {
		t.Fatal(err)
	}
	wantSRV, wantA := WantDNS(svc, Web.Port)
	if len(wantSRV) != Web.Replicas {
		t.Fatalf("service endpoints %v, want %d", wantSRV, Web.Replicas)
	}
	for _, b := range boards {
		var a []string
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := Poll(wctx, 100*time.Millisecond, "dig @"+b, func(ctx context.Context) (bool, string) {
			srv, got, err := DNSEndpoints(ctx, b, Web.Service, Web.Port)
			if err != nil {
				return false, err.Error()
			}
			a = got
			return slices.Equal(srv, wantSRV) && slices.Equal(got, wantA), fmt.Sprintf("SRV %v A %v, want SRV %v A %v", srv, got, wantSRV, wantA)
		})
		cancel()
		if err != nil {
			t.Errorf("dig @%s: %v", b, err)
		}
		if dead != "" && slices.Contains(a, BoardIP(dead)) {
			t.Errorf("dig @%s still names the dead board %s", b, dead)
		}
	}
	t.Logf("dig on %v: SRV %v", boards, wantSRV)
}

// checkRequests waits until the requests through the service ports
// succeed again after the power pull, then reports how many failed and
// for how long.
func checkRequests(t *testing.T, ctx context.Context, l *RequestLoop, pulled time.Time) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := Poll(wctx, 100*time.Millisecond, "20 requests in a row through the service ports", func(context.Context) (bool, string) {
		return l.LastOK(20), "a recent request failed"
	})
	cancel()
	reqs := l.Stop()
	failed, recovered, worst := Outage(reqs, pulled.Sub(l.Start))
	t.Logf("service port during the failover: %d requests every 50 ms through %d boards, %d failed, all succeeding again %v after the pull; slowest %v",
		len(reqs), len(fleet.Boards)-1, failed, recovered.Round(time.Millisecond), worst.Round(time.Millisecond))
	for _, r := range reqs {
		if r.Err != "" && r.Err != "running" {
			t.Logf("  failed at %v via %s: %s", (r.At - pulled.Sub(l.Start)).Round(time.Millisecond), r.Board, r.Err)
		}
	}
	if err != nil {
		t.Errorf("requests through the service port: %v", err)
	}
}

// checkReplaced checks, after victim died, that its pods are gone from it
// and that replicas pods run elsewhere with their units active, behind the
// service.
func checkReplaced(t *testing.T, ctx context.Context, victim string, lost []api.Pod) {
	t.Helper()
	s, err := fleet.Snapshot(ctx, viaExcept(victim))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Web.Live(s) {
		for _, l := range lost {
			if p.Metadata.Name == l.Metadata.Name {
				t.Errorf("pod %s of the dead board %s is still live: %s on %s", p.Metadata.Name, victim, p.Status.Phase, p.Spec.Node)
			}
		}
		if p.Spec.Node == victim {
			t.Errorf("pod %s is bound to the dead board %s", p.Metadata.Name, victim)
			continue
		}
		if p.Status.Phase != api.PodRunning {
			continue
		}
		if got, err := fleet.SSH(ctx, p.Spec.Node, "", "systemctl is-active "+p.Status.Unit); err != nil || strings.TrimSpace(got) != "active" {
			t.Errorf("replacement %s: systemctl is-active %s on %s = %q, %v", p.Metadata.Name, p.Status.Unit, p.Spec.Node, strings.TrimSpace(got), err)
		}
	}
	t.Logf("now: %s", podsByBoard(s))
	var eps []string
	for _, e := range s.Service(Web.Service).Status.Endpoints {
		eps = append(eps, e.Address)
		if e.Node == victim || strings.HasPrefix(e.Address, BoardIP(victim)+":") {
			t.Errorf("service endpoint %s still on the dead board %s", e.Address, victim)
		}
	}
	if len(eps) != Web.Replicas {
		t.Errorf("service endpoints %v, want %d", eps, Web.Replicas)
	}
}

// d. the power pulled on the leader's board: herdctl (through the
// context, which fails over between servers) sees a new leader, and the
// lost pods are replaced.
func testLeaderPowerPull(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 2*time.Minute)
	leader := waitLeader(t, ctx, "")
	restoreLab(t)
	lost := Web.PodsOn(s, leader)
	t.Logf("pulling the power on the leader %s (runs %d web pods)", leader, len(lost))
	pulled := time.Now()
	r, err := fleet.PullPower(ctx, leader, viaExcept(leader), true, Web, pollFast)
	t.Logf("failover: %v", r)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	nl := waitLeader(t, ctx, "", leader)
	t.Logf("herdctl status through the context (hosts %v, the dead leader among them) names the new leader %s (%.1fs for that call chain)",
		fleet.ServerBoards(), nl, time.Since(t0).Seconds())
	checkReplaced(t, ctx, leader, lost)
	if len(lost) > 0 {
		checkTimeline(t, ctx, leader, lost, pulled)
	}
}

// e. a board powered back on: its stale units (enabled, so its systemd
// starts them at boot) are stopped and removed before it is Ready, and
// exactly Replicas units run fleet-wide.
func testBoardBackFenced(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 2*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	v := victim(t, s, leader)
	restoreLab(t)
	stale := Web.PodsOn(s, v)
	r, err := fleet.PullPower(ctx, v, viaExcept(v), false, Web, pollFast)
	t.Logf("failover: %v", r)
	if err != nil {
		t.Fatal(err)
	}
	// The dead board's disk still has the stale unit, enabled.
	disk := "/var/lib/herd-lab/boards/" + v + "/upper/etc/systemd/system/"
	for _, p := range stale {
		// test -L: the symlink's target is an absolute path on the board.
		for _, c := range [][2]string{{"-f", disk + p.Status.Unit}, {"-L", disk + "multi-user.target.wants/" + p.Status.Unit}} {
			if _, err := fleet.run(ctx, "", "test", c[0], c[1]); err != nil {
				t.Errorf("the powered-off board's disk should still hold %s", c[1])
			}
		}
	}
	t0 := time.Now()
	if err := fleet.Boot(ctx, v); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s booted in %.1fs (stale units on its disk: %d)", v, time.Since(t0).Seconds(), len(stale))
	via := viaExcept(v)
	var sawStale bool
	var ready time.Duration
	err = Poll(ctx, pollFast, v+" Ready", func(ctx context.Context) (bool, string) {
		nodes, err := fleet.Nodes(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		var phase api.NodePhase
		for _, n := range nodes {
			if n.Metadata.Name == v {
				phase = n.Status.Phase
			}
		}
		if phase == api.NodeReady {
			ready = time.Since(t0)
			return true, ""
		}
		if u, err := fleet.Units(ctx, v, Web.UnitPattern(), false); err == nil && len(u.Active) > 0 && !sawStale {
			sawStale = true
			t.Logf("%.2fs after boot: %s (%s) runs its stale units %v", time.Since(t0).Seconds(), v, phase, u.Active)
		}
		return false, "phase " + orNone(string(phase))
	})
	if err != nil {
		t.Fatal(err)
	}
	// Ready means fenced: no web unit of any kind left there (no pod is
	// bound to it: the replicas run elsewhere).
	u, err := fleet.Units(ctx, v, Web.UnitPattern(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Active)+len(u.Loaded)+len(u.Files) > 0 {
		t.Errorf("%s is Ready but still has web units: active %v loaded %v files %v", v, u.Active, u.Loaded, u.Files)
	}
	t.Logf("%s Ready %.2fs after boot (a poll saw its stale units running before: %v); no web unit active or present there", v, ready.Seconds(), sawStale)
	// What systemd on the board did with the stale units this boot.
	for _, p := range stale {
		out, err := fleet.SSH(ctx, v, "", "journalctl -b --no-pager -o short-monotonic -u "+p.Status.Unit+" | grep -E 'Started|Stopp|Deactivated' ; true")
		if err == nil {
			t.Logf("%s this boot, journal of the stale %s:\n%s", v, p.Status.Unit, strings.TrimRight(out, "\n"))
		}
	}
	s, units, err := fleet.WaitConverged(ctx, via, Web)
	if err != nil {
		t.Fatal(err)
	}
	n, dup := CountActive(units)
	if n != Web.Replicas || len(dup) > 0 {
		t.Errorf("%d active web units fleet-wide (duplicates %v), want exactly %d", n, dup, Web.Replicas)
	}
	t.Logf("exactly %d web units active fleet-wide: %s", n, podsByBoard(s))
}

// f. a board partitioned away (a minority of one): the majority replaces
// its pods, no pod runs twice among the boards it can reach, and after the
// heal the fleet converges to exactly Replicas. The partitioned board
// keeps its units running while cut off (agent/placer/doc.go): the overlap
// is measured.
func testPartition(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	// The victim is the worker (not a Raft server: nothing but gossip links
	// it to the others), and it must run a pod.
	worker := fleet.Boards[len(fleet.Boards)-1]
	if len(Web.PodsOn(s, worker)) == 0 {
		// The only board without a pod takes the replacement when the
		// power goes on a follower with one.
		moved := victim(t, s, leader)
		t.Logf("moving a pod to the worker %s: pulling the power on %s and back", worker, moved)
		if err := fleet.Kill(ctx, moved); err != nil {
			t.Fatal(err)
		}
		err := Poll(ctx, 250*time.Millisecond, "a replacement on "+worker, func(ctx context.Context) (bool, string) {
			s, err := fleet.Snapshot(ctx, viaExcept(moved))
			if err != nil {
				return false, err.Error()
			}
			for _, p := range Web.PodsOn(s, worker) {
				if p.Status.Phase == api.PodRunning {
					return true, ""
				}
			}
			return false, podsByBoard(s)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := fleet.Boot(ctx, moved); err != nil {
			t.Fatal(err)
		}
		s, _ = converge(t)
	}
	v := victim(t, s, leader)
	restoreLab(t)
	stale := Web.PodsOn(s, v)
	var others []string
	for _, b := range fleet.Boards {
		if b != v {
			others = append(others, b)
		}
	}
	via := viaExcept(v)

	// A sample counts the active web units on the reachable boards and on
	// the partitioned one at one moment.
	type sample struct {
		at              time.Duration
		reachable, away int
		dup             []string
	}
	// report checks the samples (the reachable side never ran more than
	// Replicas, nor a unit twice) and logs the overlap; fenced and healed
	// are negative when that never happened.
	report := func(samples []sample, partitioned, fenced, healed time.Duration) {
		t.Helper()
		var overlapFrom, overlapTo time.Duration
		awayDuring := 0
		for _, sm := range samples {
			if sm.reachable > Web.Replicas || len(sm.dup) > 0 {
				t.Errorf("%.1fs after the partition: %d web units active on the reachable boards (duplicates %v), want at most %d", sm.at.Seconds(), sm.reachable, sm.dup, Web.Replicas)
			}
			if sm.reachable+sm.away > Web.Replicas {
				if overlapFrom == 0 {
					overlapFrom = sm.at
				}
				overlapTo = sm.at
			}
			if sm.at < partitioned {
				awayDuring = max(awayDuring, sm.away)
			}
		}
		t.Logf("%s ran %d stale web units while cut off (%d pods were bound there: %s)", v, awayDuring, len(stale), stale[0].Metadata.Name)
		switch {
		case overlapFrom == 0:
			t.Logf("no overlap seen; stale units stopped %.2fs after the heal", fenced.Seconds())
		case fenced < 0:
			t.Logf("overlap (more than %d web units active fleet-wide, counting the partitioned board): from %.1fs after the partition and still going at %.1fs; the partition lasted %.1fs",
				Web.Replicas, overlapFrom.Seconds(), overlapTo.Seconds(), partitioned.Seconds())
		default:
			t.Logf("overlap (more than %d web units active fleet-wide, counting the partitioned board): from %.1fs to %.1fs after the partition, i.e. %.1fs; the partition lasted %.1fs; stale units stopped %.2fs after the heal; fleet converged %.1fs after the heal",
				Web.Replicas, overlapFrom.Seconds(), overlapTo.Seconds(), (overlapTo - overlapFrom).Seconds(), partitioned.Seconds(), fenced.Seconds(), healed.Seconds())
		}
	}

	// Watch the units while the partition lasts: on the reachable boards
	// (ssh from the host) and on the partitioned one (from its own
	// namespace).
	var mu sync.Mutex
	var samples []sample
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(watchDone)
		_ = Poll(watchCtx, 200*time.Millisecond, "", func(ctx context.Context) (bool, string) {
			units, err := fleet.FleetUnits(ctx, others, Web.UnitPattern())
			if err != nil {
				return false, ""
			}
			away, err := fleet.Units(ctx, v, Web.UnitPattern(), true)
			if err != nil {
				return false, ""
			}
			n, dup := CountActive(units)
			mu.Lock()
			samples = append(samples, sample{time.Since(t0), n, len(away.Active), dup})
			mu.Unlock()
			return false, ""
		})
	}()
	r, err := fleet.PartitionAway(ctx, v, via, false, Web, pollFast)
	t.Logf("failover after the partition of %s: %v", v, r)
	if err != nil {
		stopWatch()
		<-watchDone
		t.Fatal(err)
	}
	// Hold the partition until the watch has seen the reachable side at
	// exactly Replicas for 3 s.
	steady := time.Now()
	err = Poll(ctx, 200*time.Millisecond, "the reachable side steady at the replica count", func(context.Context) (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		var since time.Duration = -1
		for _, sm := range samples {
			switch {
			case sm.reachable != Web.Replicas:
				since = -1
			case since < 0:
				since = sm.at
			}
		}
		return since >= 0 && time.Since(t0)-since >= 3*time.Second, ""
	})
	partitioned := time.Since(t0)
	stopWatch()
	<-watchDone
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held the partition %.1fs more (%.1fs in all)", time.Since(steady).Seconds(), partitioned.Seconds())

	tHeal := time.Now()
	if err := fleet.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// After the heal, count over every board until the partitioned one is
	// fenced, then keep counting a while: nothing may run twice for long.
	var fenced time.Duration
	// memberlist merges two live sides within a push-pull interval (15 s)
	// when it merges them at all.
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = Poll(fctx, 200*time.Millisecond, "the partitioned board fenced after the heal", func(ctx context.Context) (bool, string) {
		units, err := fleet.FleetUnits(ctx, fleet.Boards, Web.UnitPattern())
		if err != nil {
			return false, err.Error()
		}
		n, dup := CountActive(units)
		mu.Lock()
		samples = append(samples, sample{time.Since(t0), n - len(units[v].Active), len(units[v].Active), dup})
		mu.Unlock()
		if n == Web.Replicas && len(dup) == 0 && len(units[v].Active) == 0 {
			fenced = time.Since(tHeal)
			return true, ""
		}
		return false, fmt.Sprintf("%d active (%s: %v), duplicates %v", n, v, units[v].Active, dup)
	})
	if err != nil {
		report(samples, partitioned, -1, -1)
		// Say what each side of the healed partition thinks of the other.
		sctx := testCtx(t, 30*time.Second)
		away, _ := fleet.SSH(sctx, v, memberPy, "python3 -")
		st, _ := fleet.Herdctl(sctx, via, "", "status")
		t.Fatalf("herd bug: %s never rejoined gossip after the heal, so it is never fenced and its stale units keep running (N+1 for good): "+
			"memberlist does not reconnect to members it declared dead, and herd has no reconnect loop.\n%v\n%.0fs after the heal, %s's own gossip view: %s\nthe cluster's (herdctl status):\n%s",
			v, err, time.Since(tHeal).Seconds(), v, strings.TrimSpace(away), st)
	}
	if _, _, err := fleet.WaitConverged(ctx, via, Web); err != nil {
		t.Fatal(err)
	}
	healed := time.Since(tHeal)
	// Observe a while longer: exactly Replicas, every poll.
	obs := testCtx(t, 5*time.Second)
	_ = Poll(obs, 250*time.Millisecond, "", func(ctx context.Context) (bool, string) {
		units, err := fleet.FleetUnits(ctx, fleet.Boards, Web.UnitPattern())
		if err != nil {
			return false, ""
		}
		if n, dup := CountActive(units); n != Web.Replicas || len(dup) > 0 {
			t.Errorf("%.1fs after the heal: %d active web units (duplicates %v), want %d", time.Since(tHeal).Seconds(), n, dup, Web.Replicas)
		}
		return false, ""
	})

	report(samples, partitioned, fenced, healed)
}

// g. the leader's herd process SIGKILLed in the middle of a stream of
// writes (systemd restarts it): every write herdctl acknowledged is there
// afterwards.
func testKill9MidApply(t *testing.T) {
	converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, "")
	restoreLab(t)
	before, err := fleet.SSH(ctx, leader, "", "systemctl show -p MainPID -p NRestarts herd.service")
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter, killAfter = 2, 20, 6
	type result struct {
		name string
		err  error
	}
	var mu sync.Mutex
	var results []result
	acked := 0
	killed := make(chan struct{})
	var killOnce sync.Once
	var killAt time.Time
	kill := func() {
		killOnce.Do(func() {
			go func() {
				defer close(killed)
				killAt = time.Now()
				if _, err := fleet.SSH(ctx, leader, "", "systemctl kill -s KILL herd.service"); err != nil {
					t.Errorf("kill -9 herd on %s: %v", leader, err)
				}
			}()
		})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				name := fmt.Sprintf("g-%d-%02d", w, i)
				manifest := fmt.Sprintf("[[service]]\nname = %q\nselector = { app = %q }\n[[service.ports]]\nname = \"http\"\ntarget = \"http\"\n", name, name)
				_, err := fleet.Herdctl(ctx, "", manifest, "--timeout", "10s", "apply", "-f", "-")
				mu.Lock()
				results = append(results, result{name, err})
				if err == nil {
					acked++
				}
				n := acked
				mu.Unlock()
				if n == killAfter {
					kill()
				}
			}
		}()
	}
	wg.Wait()
	kill() // in case too few writes succeeded to trigger it
	<-killed
	t.Logf("kill -9 of herd on the leader %s at write %d", leader, killAfter)

	// systemd restarts it (Restart=always): a new MainPID, NRestarts up.
	var after string
	err = Poll(ctx, 250*time.Millisecond, "herd restarted on "+leader, func(ctx context.Context) (bool, string) {
		out, err := fleet.SSH(ctx, leader, "", "systemctl is-active herd.service; systemctl show -p MainPID -p NRestarts herd.service")
		if err != nil {
			return false, err.Error()
		}
		after = out
		return strings.HasPrefix(out, "active\n") && !strings.Contains(out, "MainPID=0") && strings.TrimPrefix(out, "active\n") != before, out
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("herd on %s: before %q, after %q (restarted %.1fs after the kill)", leader,
		strings.Join(strings.Fields(before), " "), strings.Join(strings.Fields(after), " "), time.Since(killAt).Seconds())
	nl := waitLeader(t, ctx, "")
	t.Logf("leader now %s", nl)

	var svcs []api.Service
	err = Poll(ctx, 250*time.Millisecond, "services listed", func(ctx context.Context) (bool, string) {
		svcs, err = fleet.Services(ctx, "")
		return err == nil, fmt.Sprint(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range svcs {
		have[s.Metadata.Name] = true
	}
	var nAck, nFail, nLost, nUnackedPresent int
	var failures []string
	var names []string
	for _, r := range results {
		names = append(names, r.name)
		switch {
		case r.err == nil && !have[r.name]:
			nAck++
			nLost++
			t.Errorf("service %s: herdctl apply acknowledged it, but it is gone after the kill -9", r.name)
		case r.err == nil:
			nAck++
		default:
			nFail++
			if have[r.name] {
				nUnackedPresent++
			}
			if len(failures) < 3 {
				failures = append(failures, fmt.Sprintf("%s: %v", r.name, r.err))
			}
		}
	}
	t.Logf("%d writes: %d acknowledged (%d lost), %d failed (%d of them committed anyway)", len(results), nAck, nLost, nFail, nUnackedPresent)
	for _, f := range failures {
		t.Logf("  failed write: %s", f)
	}
	if nAck < killAfter {
		t.Errorf("only %d writes acknowledged: the kill did not land mid-stream", nAck)
	}
	args := append([]string{"delete", "services", "--ignore-not-found"}, names...)
	if out, err := fleet.Herdctl(ctx, viaExcept(), "", args...); err != nil {
		t.Errorf("cleanup: %v\n%s", err, out)
	}
}

// h. 10% packet loss on one board's link for a minute: no board is falsely
// declared dead (every poll of herdctl get nodes shows all Ready).
func testPacketLoss(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	// A server that is not the leader and not b1 (the first host of
	// herdctl's context, which the polls go through).
	v := ""
	for _, b := range fleet.ServerBoards() {
		if b != leader && b != "b1" {
			v = b
			break
		}
	}
	restoreLab(t, v)
	lt := gossip.LANTiming()
	t.Logf("memberlist LAN settings (gossip.LANTiming): ProbeInterval %v, ProbeTimeout %v, IndirectChecks %d, SuspicionMult %d, SuspicionMaxTimeoutMult %d, GossipInterval %v, GossipNodes %d, RetransmitMult %d, GossipToTheDeadTime %v, PushPullInterval %v, TCPTimeout %v",
		lt.ProbeInterval, lt.ProbeTimeout, lt.IndirectChecks, lt.SuspicionMult, lt.SuspicionMaxTimeoutMult, lt.GossipInterval, lt.GossipNodes, lt.RetransmitMult, lt.GossipToTheDeadTime, lt.PushPullInterval, lt.TCPTimeout)
	since := time.Now().Add(-time.Second).UTC().Format("2006-01-02 15:04:05")
	if out, err := fleet.Lab(ctx, "netem", v, "loss", "10%"); err != nil {
		t.Fatalf("netem: %v\n%s", err, out)
	}
	t.Logf("10%% loss on %s's link, both directions (each packet to or from %s dropped with p=0.1; runs %d web pods; leader %s)", v, v, len(Web.PodsOn(s, v)), leader)
	t0 := time.Now()
	var polls, failed, notReady int
	loss := testCtx(t, 60*time.Second)
	_ = Poll(loss, 250*time.Millisecond, "", func(context.Context) (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		nodes, err := fleet.Nodes(pctx, "")
		polls++
		if err != nil {
			failed++
			return false, ""
		}
		if ok, why := AllReady(nodes, fleet.Boards); !ok {
			notReady++
			t.Errorf("%.1fs into the loss: %s", time.Since(t0).Seconds(), why)
		}
		return false, ""
	})
	if out, err := fleet.Lab(ctx, "netem", v, "clear"); err != nil {
		t.Errorf("netem clear: %v\n%s", err, out)
	}
	t.Logf("%d polls of herdctl get nodes over %.0fs (%d failed): %d saw a node not Ready", polls, time.Since(t0).Seconds(), failed, notReady)
	if polls-failed < 60 {
		t.Errorf("only %d successful polls", polls-failed)
	}
	// What memberlist said meanwhile, from the agents' journals.
	for _, b := range fleet.Boards {
		out, err := fleet.SSH(ctx, b, "", fmt.Sprintf("journalctl -u herd.service --since '%s' --no-pager -o cat | grep -ciE 'NotReady|suspect|member dead|failed to contact' ; true", since))
		if err == nil {
			t.Logf("%s: %s lines of herd's journal (info level) mention NotReady/suspect/member dead/failed to contact during the loss", b, strings.TrimSpace(out))
		}
	}
}
