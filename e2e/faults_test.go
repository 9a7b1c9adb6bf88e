//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// sampleEvery is how often the fault tests sample every board's systemd.
const sampleEvery = 250 * time.Millisecond

// TestFaults runs the agent and network faults of issue 9 on the one lab,
// each from a converged fleet running examples/web.toml and leaving one
// behind. Ground truth is every board's systemd (GroundTruth), never herd's
// API. It runs before TestFleet (files in name order).
func TestFaults(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a_leader_agent_sigstop", testLeaderAgentSigstop},
		{"b_agent_kill9_keeps_units", testAgentKill9KeepsUnits},
		{"c_write_during_leader_pull", testWriteDuringLeaderPull},
		{"d_partition_heal_repeated", testPartitionHealRepeated},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			sc.run(t)
			t.Logf("%s took %.1fs", sc.name, time.Since(start).Seconds())
		})
	}
}

// agentSignal sends sig to the herd agent's main process on board (from
// the board's own namespace, so it works whatever its link does).
func agentSignal(ctx context.Context, board, sig string) error {
	_, err := fleet.SSHInside(ctx, board, "", "systemctl kill --kill-whom=main -s "+sig+" herd.service")
	return err
}

// watchUnits starts sampling every board and waits until each has been
// sampled once; the sampling stops when the test ends.
func watchUnits(t *testing.T, ctx context.Context) *GroundTruth {
	t.Helper()
	gt := fleet.WatchUnits(ctx, fleet.Boards, sampleEvery)
	t.Cleanup(gt.Stop)
	err := Poll(ctx, sampleEvery, "a sample of every board's systemd", func(context.Context) (bool, string) {
		seen := map[string]bool{}
		for _, s := range gt.Samples() {
			seen[s.Board] = true
		}
		var missing []string
		for _, b := range fleet.Boards {
			if !seen[b] {
				missing = append(missing, b+": "+orNone(gt.LastError(b)))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	if err != nil {
		t.Fatal(err)
	}
	return gt
}

// constant is a Declared func for a count nobody changes.
func constant(n int) func(time.Time) (int, int) {
	return func(time.Time) (int, int) { return n, n }
}

// observe lets d pass (the observation window after a fault).
func observe(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// logEpisodes logs what Check saw.
func logEpisodes(t *testing.T, v Verdict) {
	t.Helper()
	t.Logf("ground truth: %d moments; overcount all boards max %d (%d episodes, longest %.2fs), reachable boards max %d; on two boards at once %d; dips %d; boards unknown %.1fs",
		v.Moments, v.OverAll, len(v.OverAllEps), Longest(v.OverAllEps).Duration().Seconds(), v.OverReach, len(v.Duplicates), len(v.Dips), v.Unknown.Seconds())
	for _, e := range v.OverAllEps {
		t.Logf("  overcount: %s, from %s for %.2fs", e.What, e.From.Format("15:04:05.000"), e.Duration().Seconds())
	}
	for _, e := range v.Duplicates {
		t.Logf("  on two boards: %s, from %s for %.2fs", e.What, e.From.Format("15:04:05.000"), e.Duration().Seconds())
	}
	for _, e := range v.Dips {
		t.Logf("  dip: %s, from %s for %.2fs", e.What, e.From.Format("15:04:05.000"), e.Duration().Seconds())
	}
}

// journals logs herd's journal and its units' on every board between from
// and to (without the readiness probes' requests), the last 80 lines.
func journals(t *testing.T, from, to time.Time) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	for _, b := range fleet.Boards {
		out, err := fleet.SSHInside(ctx, b, "", fmt.Sprintf("journalctl --no-pager -o short-precise --since @%d --until @%d -u herd.service -u 'herd-*.service' | grep -v '\"GET / HTTP' | tail -n 80",
			from.Unix(), to.Unix()+1))
		if err != nil {
			t.Logf("%s: journal: %v", b, err)
			continue
		}
		t.Logf("%s: journal %s-%s:\n%s", b, from.Format("15:04:05"), to.Format("15:04:05"), strings.TrimRight(out, "\n"))
	}
}

// a. The leader's agent frozen (SIGSTOP) for 10 s while its board, its
// sshd and its units stay up: no pod of that board runs a second time
// anywhere, under its name or another (never more than the declared count
// active fleet-wide, never one pod on two boards), sampled on every board
// during the freeze and until the fleet has converged after SIGCONT.
func testLeaderAgentSigstop(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	restoreLab(t)
	t.Cleanup(func() { _ = agentSignal(testCtx(t, 10*time.Second), leader, "CONT") })
	gt := watchUnits(t, ctx)
	t.Logf("leader %s runs %d web pods (%s); freezing its agent for 10s", leader, len(Web.PodsOn(s, leader)), podsByBoard(s))
	t0 := time.Now()
	if err := agentSignal(ctx, leader, "STOP"); err != nil {
		t.Fatal(err)
	}
	observe(ctx, 10*time.Second) // the fault's duration
	if err := agentSignal(ctx, leader, "CONT"); err != nil {
		t.Fatal(err)
	}
	tCont := time.Now()
	s, _, err := fleet.WaitConverged(ctx, viaExcept(), Web)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converged %.1fs after SIGCONT: %s", time.Since(tCont).Seconds(), podsByBoard(s))
	observe(ctx, 2*time.Second)
	gt.Stop()
	v := Check(Truth{Samples: gt.Samples(), Boards: fleet.Boards, Owner: Web.Owner(), Stale: 4 * sampleEvery,
		Declared: constant(Web.Replicas), Disrupted: []time.Time{t0}}, t0, time.Now())
	logEpisodes(t, v)
	if v.Moments < 20 {
		t.Errorf("only %d moments sampled", v.Moments)
	}
	for _, e := range v.Duplicates {
		t.Errorf("pod %s at once, from %.1fs after the SIGSTOP for %.2fs", e.What, e.From.Sub(t0).Seconds(), e.Duration().Seconds())
	}
	for _, e := range v.OverAllEps {
		t.Errorf("%s (the frozen board's work run twice), from %.1fs after the SIGSTOP for %.2fs", e.What, e.From.Sub(t0).Seconds(), e.Duration().Seconds())
	}
	if t.Failed() {
		journals(t, t0, time.Now())
	}
}

// b. kill -9 of the agent on a board that runs pods (systemd restarts
// it): every herd unit on that board keeps running with the same MainPID,
// no pod is recreated (the pods' names and boards are what they were) and
// none is ever Lost.
func testAgentKill9KeepsUnits(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	v := victim(t, s, leader)
	restoreLab(t)
	via := viaExcept(v)
	podsBefore := map[string]string{}
	for _, p := range Web.Live(s) {
		podsBefore[p.Metadata.Name] = p.Spec.Node
	}
	pidsBefore, err := fleet.UnitPIDs(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(pidsBefore) == 0 {
		t.Fatalf("%s runs no herd unit", v)
	}
	agent, err := fleet.SSH(ctx, v, "", "systemctl show -p MainPID --value herd.service")
	if err != nil {
		t.Fatal(err)
	}
	agent = strings.TrimSpace(agent)
	t.Logf("kill -9 of herd (MainPID %s) on %s (leader %s), which runs %v", agent, v, leader, pidsBefore)
	t0 := time.Now()
	if err := agentSignal(ctx, v, "KILL"); err != nil {
		t.Fatal(err)
	}
	err = Poll(ctx, 250*time.Millisecond, "herd restarted on "+v, func(ctx context.Context) (bool, string) {
		out, err := fleet.SSH(ctx, v, "", "systemctl is-active herd.service; systemctl show -p MainPID --value herd.service")
		if err != nil {
			return false, err.Error()
		}
		f := strings.Fields(out)
		return len(f) == 2 && f[0] == "active" && f[1] != "0" && f[1] != agent, strings.Join(f, " ")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("herd restarted on %s %.1fs after the kill", v, time.Since(t0).Seconds())
	// Watch the pods for 15 s from the kill: gossip declares a silent
	// board dead in ≈1.5 s, and a pass of the new agent's placer follows.
	lost := map[string]bool{}
	wctx, cancel := context.WithDeadline(ctx, t0.Add(15*time.Second))
	_ = Poll(wctx, 250*time.Millisecond, "", func(ctx context.Context) (bool, string) {
		pods, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, ""
		}
		for _, p := range pods {
			if _, ok := podsBefore[p.Metadata.Name]; ok && p.Status.Phase == api.PodLost && !lost[p.Metadata.Name] {
				lost[p.Metadata.Name] = true
				t.Errorf("pod %s on %s Lost %.1fs after the kill -9 of %s's agent", p.Metadata.Name, p.Spec.Node, time.Since(t0).Seconds(), v)
			}
		}
		return false, ""
	})
	cancel()
	s, _, err = fleet.WaitConverged(ctx, via, Web)
	if err != nil {
		t.Fatal(err)
	}
	podsAfter := map[string]string{}
	for _, p := range Web.Live(s) {
		podsAfter[p.Metadata.Name] = p.Spec.Node
	}
	if d := cmp.Diff(podsBefore, podsAfter); d != "" {
		t.Errorf("web pods (name: board) changed across the kill -9 of %s's agent (-before +after):\n%s", v, d)
	}
	pidsAfter, err := fleet.UnitPIDs(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(pidsBefore, pidsAfter); d != "" {
		t.Errorf("herd units on %s (unit: MainPID) changed across the kill -9 of its agent (-before +after):\n%s", v, d)
	}
	if t.Failed() {
		journals(t, t0, time.Now())
	}
}

// c. The power pulled on the leader's board, and a scale sent through a
// follower as soon as the board is gone: it is acknowledged within 3 s of
// the pull (election plus a round trip), and it is there afterwards.
func testWriteDuringLeaderPull(t *testing.T) {
	converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	restoreLab(t)
	via := viaExcept(leader)
	t.Cleanup(func() { scaleTo(t, viaExcept(leader), Web.Replicas) })
	// Open the forward to the follower before the pull.
	if _, err := fleet.Herdctl(ctx, via, "", "--timeout", "5s", "get", "deployments", Web.Deployment); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := fleet.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	tKilled := time.Now()
	out, err := fleet.Herdctl(ctx, via, "", "--timeout", "10s", "scale", "deployment", Web.Deployment, "--replicas", strconv.Itoa(Web.Replicas+1))
	ack := time.Since(t0)
	if err != nil {
		t.Fatalf("scale through %s %.2fs after the power pull of the leader %s failed after %.2fs: %v\n%s", via, tKilled.Sub(t0).Seconds(), leader, ack.Seconds(), err, out)
	}
	t.Logf("power pulled on the leader %s (kill took %.2fs); scale through %s acknowledged %.2fs after the pull", leader, tKilled.Sub(t0).Seconds(), via, ack.Seconds())
	if ack > 3*time.Second {
		t.Errorf("scale through the follower %s acknowledged %.2fs after the leader's power pull, want within 3s", via, ack.Seconds())
	}
	for _, b := range fleet.ServerBoards() {
		if b == leader {
			continue
		}
		d, err := readDeployment(ctx, b)
		if err != nil {
			t.Errorf("read through %s: %v", b, err)
		} else if d.Spec.Replicas == nil || *d.Spec.Replicas != Web.Replicas+1 {
			t.Errorf("read through %s after the acknowledged scale: replicas %v, want %d", b, d.Spec.Replicas, Web.Replicas+1)
		}
	}
}

// readDeployment reads the workload's deployment through via.
func readDeployment(ctx context.Context, via string) (api.Deployment, error) {
	var d api.Deployment
	out, err := fleet.Herdctl(ctx, via, "", "--timeout", "5s", "get", "deployments", Web.Deployment, "-o", "json")
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(out, &d)
}

// scaleTo scales the workload to n through via, retrying until it is
// acknowledged.
func scaleTo(t *testing.T, via string, n int) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	err := Poll(ctx, 500*time.Millisecond, fmt.Sprintf("scale to %d", n), func(ctx context.Context) (bool, string) {
		out, err := fleet.Herdctl(ctx, via, "", "--timeout", "10s", "scale", "deployment", Web.Deployment, "--replicas", strconv.Itoa(n))
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return true, ""
	})
	if err != nil {
		t.Error(err)
	}
}

// d. The worker partitioned away and healed, three times, each time
// running a pod when cut off: once the reachable boards have reached the
// declared count after the partition, they never run fewer (through the
// partition, the heal, the fencing of the worker and after), by every
// board's systemd.
func testPartitionHealRepeated(t *testing.T) {
	converge(t)
	ctx := testCtx(t, 4*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	worker := fleet.Boards[len(fleet.Boards)-1]
	if fleet.IsServer(worker) {
		t.Fatalf("%s is a server: the lab has no worker", worker)
	}
	restoreLab(t)
	via := viaExcept()
	t.Cleanup(func() { scaleTo(t, via, Web.Replicas) })
	gt := watchUnits(t, ctx)
	writes := &WriteLog{Initial: Web.Replicas, Grace: 5 * time.Second}
	var away Intervals
	var disrupted []time.Time
	w := Web
	start := time.Now()
	for i := 1; i <= 3; i++ {
		s, err := fleet.Snapshot(ctx, via)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.PodsOn(s, worker)) == 0 {
			// A pod more: the scheduler spreads it onto the empty worker.
			w.Replicas++
			ws := time.Now()
			scaleTo(t, via, w.Replicas)
			writes.Add(Write{Start: ws, End: time.Now(), Value: w.Replicas, Via: via})
			if s, _, err = fleet.WaitConverged(ctx, via, w); err != nil {
				t.Fatal(err)
			}
			if len(w.PodsOn(s, worker)) == 0 {
				t.Fatalf("cycle %d: scaled to %d, still no pod on %s: %s", i, w.Replicas, worker, podsByBoard(s))
			}
		}
		t.Logf("cycle %d: leader %s, %d replicas: %s; partitioning %s away", i, leader, w.Replicas, podsByBoard(s), worker)
		tp := time.Now()
		disrupted = append(disrupted, tp)
		away.Begin(worker, tp)
		r, err := fleet.PartitionAway(ctx, worker, via, false, w, pollFast)
		t.Logf("cycle %d: failover: %v", i, r)
		if err != nil {
			t.Fatal(err)
		}
		observe(ctx, 3*time.Second) // the partition lasts
		th := time.Now()
		if err := fleet.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		away.End(worker, time.Now())
		if _, _, err := fleet.WaitConverged(ctx, via, w); err != nil {
			t.Fatalf("cycle %d: after the heal: %v", i, err)
		}
		t.Logf("cycle %d: converged %.1fs after the heal (partition held %.1fs)", i, time.Since(th).Seconds(), th.Sub(tp).Seconds())
		observe(ctx, 2*time.Second)
	}
	gt.Stop()
	end := time.Now()
	v := Check(Truth{Samples: gt.Samples(), Boards: fleet.Boards, Owner: Web.Owner(), Stale: 4 * sampleEvery,
		Away: away.In, Declared: writes.Declared, Disrupted: disrupted}, start, end)
	logEpisodes(t, v)
	if v.Moments < 20 {
		t.Errorf("only %d moments sampled", v.Moments)
	}
	for _, e := range v.Dips {
		t.Errorf("under-count once converged: %s, from %s for %.2fs", e.What, e.From.Format("15:04:05.000"), e.Duration().Seconds())
	}
	for _, e := range v.OverReachEps {
		t.Logf("overcount on the reachable boards: %s, from %s for %.2fs", e.What, e.From.Format("15:04:05.000"), e.Duration().Seconds())
	}
	if len(v.Dips) > 0 {
		for _, e := range v.Dips {
			journals(t, e.From.Add(-10*time.Second), e.To.Add(3*time.Second))
		}
	}
	if !slices.ContainsFunc(gt.Samples(), func(s UnitSample) bool {
		return s.Board == worker && away.In(worker, s.At) && len(s.Of(Web.Owner())) > 0
	}) {
		t.Errorf("%s was never sampled running a web unit while partitioned: the partitions tested nothing", worker)
	}
}
