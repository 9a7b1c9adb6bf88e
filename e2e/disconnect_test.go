//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// The two deployments of TestOnDisconnect: one pod of each on every board
// (four boards, spread), one stopping 10 s into a cut, one keeping on.
var (
	Sensor = Workload{Deployment: "sensor", Service: "sensor", Port: "p", Replicas: 4}
	Keeper = Workload{Deployment: "keeper", Service: "keeper", Port: "p", Replicas: 4}
)

// sensorStopAfter is the sensor's on_disconnect stop_after.
const sensorStopAfter = 10 * time.Second

const disconnectManifest = `
[[deployment]]
name = "sensor"
replicas = 4
[deployment.template]
labels = { app = "sensor" }
exec = ["/bin/sh", "-c", "while :; do sleep 1; done"]
on_disconnect = { stop_after = "10s" }
[[deployment.template.ports]]
name = "p"

[[service]]
name = "sensor"
selector = { app = "sensor" }
[[service.ports]]
target = "p"

[[deployment]]
name = "keeper"
replicas = 4
[deployment.template]
labels = { app = "keeper" }
exec = ["/bin/sh", "-c", "while :; do sleep 1; done"]
on_disconnect = "keep"
[[deployment.template.ports]]
name = "p"

[[service]]
name = "keeper"
selector = { app = "keeper" }
[[service.ports]]
target = "p"
`

// TestOnDisconnect is the lab proof of on_disconnect (docs/manifests.md,
// "On disconnect"): a partitioned board stops its stop_after pods within
// the bound while their replacements run elsewhere, and keeps its "keep"
// pods; with no quorum anywhere every board stops its stop_after pods and
// the new leader starts the same pods again after the heal, none Failed.
// Times come from the boards' own systemd (GroundTruth, sampled every
// 200 ms from each board's own namespace, so also while cut off).
//
// Run it alone: go test -tags e2e -count=1 -run TestOnDisconnect -v ./e2e/
func TestOnDisconnect(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	path := filepath.Join(fleet.Dir, "disconnect.toml")
	if err := os.WriteFile(path, []byte(disconnectManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet.Herdctl(ctx, viaExcept(), "", "apply", "-f", path); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// The tests after this one count and place only their own pods: the
	// eight of this one would slow every later placement down.
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		for _, w := range []Workload{Sensor, Keeper} {
			if out, err := fleet.Herdctl(ctx, viaExcept(), "", "delete", "deployments", w.Deployment, "--ignore-not-found"); err != nil {
				t.Errorf("cleanup: delete deployment %s: %v\n%s", w.Deployment, err, out)
			}
		}
	})
	convergeDisconnect(t)
	t.Run("a_partition", testDisconnectPartition)
	t.Run("b_no_quorum", testDisconnectNoQuorum)
	t.Run("c_job_timer", testDisconnectJobTimer)
}

// disconnectJobManifest is a job due every 5 seconds on one board (%q),
// stopped 10 s into a cut.
const disconnectJobManifest = `[[job]]
name = "cut-tick"
schedule = "*:*:0/5"
[job.template]
exec = ["/bin/true"]
node_selector = { "herd.dev/node" = %q }
on_disconnect = { stop_after = "10s" }
`

// testDisconnectJobTimer: a board cut off from the servers stops a
// scheduled job's timer once it has been cut off for the job's
// stop_after, so it starts no runs beside the board the job would move
// to; after the heal the job's timer runs again.
func testDisconnectJobTimer(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	v := fleet.Boards[len(fleet.Boards)-1]
	manifest := fmt.Sprintf(disconnectJobManifest, v)
	if out, err := fleet.Herdctl(ctx, viaExcept(v), manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		if out, err := fleet.Herdctl(ctx, viaExcept(v), "", "delete", "jobs", "cut-tick", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: delete job: %v\n%s", err, out)
		}
	})
	const timers = `systemctl list-units --plain --no-legend --state=active 'herd-cut-tick-*.timer' | awk '{print $1}'`
	// timerIs polls for cut-tick's timer being active (or not) on v, as
	// v's own systemd says; a failed look is neither.
	timerIs := func(active bool) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			out, err := fleet.SSHInside(ctx, v, "", timers)
			if err != nil {
				return false, err.Error()
			}
			out = strings.TrimSpace(out)
			return (out != "") == active, "active timers on " + v + ": " + out
		}
	}
	if err := Poll(ctx, 250*time.Millisecond, "cut-tick's timer active on "+v, timerIs(true)); err != nil {
		t.Fatal(err)
	}
	healDisconnect(t)
	t0 := time.Now()
	if err := fleet.Partition(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, 250*time.Millisecond, "cut-tick's timer stopped on the cut-off "+v, timerIs(false)); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(t0)
	t.Logf("cut-tick's timer stopped on the cut-off %s %.1fs after the partition (stop_after 10s)", v, stopped.Seconds())
	if stopped < 10*time.Second || stopped > 10*time.Second+20*time.Second {
		t.Errorf("the timer stopped %.1fs after the partition; want between 10s and 30s", stopped.Seconds())
	}
	fleet.DropForwards()
	if err := fleet.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Poll(ctx, 250*time.Millisecond, "cut-tick's timer active again on "+v+" after the heal", timerIs(true)); err != nil {
		t.Fatal(err)
	}
}

// convergeDisconnect waits until the fleet runs both deployments exactly.
func convergeDisconnect(t *testing.T) Snapshot {
	t.Helper()
	ctx := testCtx(t, 3*time.Minute)
	var s Snapshot
	for _, w := range []Workload{Sensor, Keeper} {
		var err error
		if s, _, err = fleet.WaitConverged(ctx, viaExcept(), w); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// healDisconnect registers a cleanup that heals every partition and waits
// for both deployments to converge again.
func healDisconnect(t *testing.T) {
	t.Cleanup(func() {
		ctx := testCtx(t, 3*time.Minute)
		fleet.DropForwards()
		if err := fleet.Heal(ctx); err != nil {
			t.Errorf("restore: heal: %v", err)
		}
		convergeDisconnect(t)
	})
}

// timeline folds samples (time order) into the number of a workload's
// units active on each board, as of each sample.
type timeline struct {
	at     time.Time
	counts map[string]int // board -> active units of the owner
}

func timelineOf(samples []UnitSample, owner string) []timeline {
	cur := map[string]int{}
	var out []timeline
	for _, s := range samples {
		cur[s.Board] = len(s.Of(owner))
		c := make(map[string]int, len(cur))
		for b, n := range cur {
			c[b] = n
		}
		out = append(out, timeline{at: s.At, counts: c})
	}
	return out
}

func (tl timeline) total(except ...string) int {
	n := 0
	for b, c := range tl.counts {
		if !slices.Contains(except, b) {
			n += c
		}
	}
	return n
}

// sampledAll reports whether every board has a sample at or after at.
func sampledAll(samples []UnitSample, at time.Time) bool {
	seen := map[string]bool{}
	for _, s := range samples {
		if !s.At.Before(at) {
			seen[s.Board] = true
		}
	}
	return len(seen) == len(fleet.Boards)
}

// partitionRuns is how many partitions testDisconnectPartition measures.
const partitionRuns = 3

func testDisconnectPartition(t *testing.T) {
	var rows []string
	for i := range partitionRuns {
		r := partitionOnce(t)
		rows = append(rows, fmt.Sprintf("| %d | %s | %.2f s | %.2f s | %.2f s | %.1f s | %.1f s |", i+1, r.victim, r.replaced.Seconds(), r.stopped.Seconds(), r.overlap.Seconds(), r.kept.Seconds(), r.converged.Seconds()))
	}
	t.Logf("sensor stop_after %s, keeper keep; times from the partition (ground truth every 200 ms):\n"+
		"| run | cut-off board | replacement active | cut-off sensor stopped | overlap | keeper still active at | converged after heal |\n|---|---|---|---|---|---|---|\n%s",
		sensorStopAfter, strings.Join(rows, "\n"))
}

// partitionResult is what one partition measured.
type partitionResult struct {
	victim                                      string
	replaced, stopped, overlap, kept, converged time.Duration
}

func partitionOnce(t *testing.T) partitionResult {
	t.Helper()
	ctx := testCtx(t, 4*time.Minute)
	s := convergeDisconnect(t)
	leader := waitLeader(t, ctx, viaExcept())
	// The victim: a board other than the leader with a pod of each,
	// preferring the worker (only gossip links it to the servers), else
	// the leader's.
	var v string
	for i := len(fleet.Boards) - 1; i >= 0; i-- {
		b := fleet.Boards[i]
		if b != leader && len(Sensor.PodsOn(s, b)) > 0 && len(Keeper.PodsOn(s, b)) > 0 {
			v = b
			break
		}
	}
	if v == "" && len(Sensor.PodsOn(s, leader)) > 0 && len(Keeper.PodsOn(s, leader)) > 0 {
		v = leader // the leader's board cut off: the majority elects another
	}
	if v == "" {
		var where []string
		for _, p := range append(Sensor.Live(s), Keeper.Live(s)...) {
			where = append(where, p.Metadata.Name+"@"+p.Spec.Node)
		}
		t.Fatalf("no board runs a pod of both deployments: %v", where)
	}
	stale := Sensor.PodsOn(s, v)[0].Metadata.Name
	keeper := Keeper.PodsOn(s, v)[0].Metadata.Name
	gt := fleet.WatchUnits(ctx, fleet.Boards, 200*time.Millisecond)
	defer gt.Stop()
	start := time.Now()
	if err := Poll(ctx, 100*time.Millisecond, "first samples", func(context.Context) (bool, string) {
		return sampledAll(gt.Samples(), start), ""
	}); err != nil {
		t.Fatal(err)
	}
	healDisconnect(t)
	t0 := time.Now()
	if err := fleet.Partition(ctx, v); err != nil {
		t.Fatal(err)
	}
	t.Logf("partitioned %s (leader %s) at +0; its pods: sensor %s, keeper %s", v, leader, stale, keeper)
	// Wait until the cut-off sensor is down, the reachable boards run
	// four again, and the samples reach 10 s past the earliest the
	// sensor may stop (so the keeper has had every chance to stop too).
	until := t0.Add(2*sensorStopAfter + 5*time.Second)
	err := Poll(ctx, 250*time.Millisecond, "the cut-off sensor stopped and replaced", func(context.Context) (bool, string) {
		samples := gt.Samples()
		tl := timelineOf(samples, Sensor.Owner())
		if len(tl) == 0 {
			return false, "no samples"
		}
		last := tl[len(tl)-1]
		return last.counts[v] == 0 && last.total(v) == Sensor.Replicas && sampledAll(samples, until),
			fmt.Sprintf("sensor units: %v", last.counts)
	})
	if err != nil {
		t.Fatal(err)
	}
	samples := gt.Samples()

	// From the boards' systemd: when the cut-off copy stopped, when the
	// replacement ran, and how long more than N ran at once.
	var stopped, replaced, overlap time.Duration
	var prev *timeline
	for _, tl := range timelineOf(samples, Sensor.Owner()) {
		if tl.at.Before(t0) {
			continue
		}
		if prev != nil && prev.total() > Sensor.Replicas {
			overlap += tl.at.Sub(prev.at)
		}
		if stopped == 0 && tl.counts[v] == 0 {
			stopped = tl.at.Sub(t0)
		}
		if replaced == 0 && tl.total(v) == Sensor.Replicas {
			replaced = tl.at.Sub(t0)
		}
		p := tl
		prev = &p
	}
	// The keeper on the cut-off board ran on throughout.
	keptTo := time.Duration(0)
	for _, sm := range samples {
		if sm.Board != v || sm.At.Before(t0) {
			continue
		}
		if len(sm.Of(Keeper.Owner())) == 0 {
			t.Errorf("keeper not active on the cut-off %s %.1fs after the partition", v, sm.At.Sub(t0).Seconds())
			break
		}
		keptTo = sm.At.Sub(t0)
	}
	t.Logf("sensor (stop_after %s): replacement active on the reachable boards at %.2fs; the cut-off copy stopped at %.2fs; overlap (more than %d sensor units active fleet-wide) %.2fs",
		sensorStopAfter, replaced.Seconds(), stopped.Seconds(), Sensor.Replicas, overlap.Seconds())
	t.Logf("keeper (keep): active on the cut-off %s in every sample up to %.1fs", v, keptTo.Seconds())
	// The bound: stop_after, plus the time the cut-off board takes to
	// lose sight of the servers (gossip) and the loop's 0.5 s step and
	// the stop itself; never before stop_after.
	if stopped < sensorStopAfter || stopped > sensorStopAfter+10*time.Second {
		t.Errorf("the cut-off sensor stopped %.2fs after the partition; want between %s and %s", stopped.Seconds(), sensorStopAfter, sensorStopAfter+10*time.Second)
	}
	if keptTo < 2*sensorStopAfter {
		t.Errorf("keeper watched only up to %.1fs", keptTo.Seconds())
	}

	// Heal: the cut-off board's sensor pod was replaced, so fencing
	// removes its unit; the keeper's copy there too. Exactly N again.
	t1 := time.Now()
	fleet.DropForwards()
	if err := fleet.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	s = convergeDisconnect(t)
	converged := time.Since(t1)
	t.Logf("healed: both deployments converged (exactly %d each, no unit on two boards) %.1fs after the heal", Sensor.Replicas, converged.Seconds())
	for _, p := range s.OwnedPods(Sensor.Deployment) {
		if p.Metadata.Name == stale && !p.Status.Phase.Terminal() {
			t.Errorf("the cut-off sensor pod %s is %s, want it replaced", stale, p.Status.Phase)
		}
	}
	return partitionResult{victim: v, replaced: replaced, stopped: stopped, overlap: overlap, kept: keptTo, converged: converged}
}

func testDisconnectNoQuorum(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	s := convergeDisconnect(t)
	names := func(s Snapshot, w Workload) []string {
		var out []string
		for _, p := range w.Live(s) {
			out = append(out, p.Metadata.Name+"@"+p.Spec.Node)
		}
		sort.Strings(out)
		return out
	}
	before := names(s, Sensor)
	keepersBefore := names(s, Keeper)
	gt := fleet.WatchUnits(ctx, fleet.Boards, 200*time.Millisecond)
	defer gt.Stop()
	start := time.Now()
	if err := Poll(ctx, 100*time.Millisecond, "first samples", func(context.Context) (bool, string) {
		return sampledAll(gt.Samples(), start), ""
	}); err != nil {
		t.Fatal(err)
	}
	healDisconnect(t)
	t0 := time.Now()
	fleet.DropForwards()
	if _, err := fleet.Lab(ctx, append([]string{"partition"}, fleet.Boards...)...); err != nil {
		t.Fatal(err)
	}
	t.Logf("every board cut off alone at +0: no Raft quorum anywhere; sensor pods %v", before)
	var stoppedAll time.Duration
	err := Poll(ctx, 250*time.Millisecond, "every sensor stopped", func(context.Context) (bool, string) {
		samples := gt.Samples()
		tl := timelineOf(samples, Sensor.Owner())
		if len(tl) == 0 || !sampledAll(samples, t0) {
			return false, "no samples"
		}
		last := tl[len(tl)-1]
		if last.total() == 0 {
			stoppedAll = last.at.Sub(t0)
			return true, ""
		}
		return false, fmt.Sprintf("sensor units: %v", last.counts)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every board keeps the keeper units it ran when the cut began.
	atCut := map[string]int{}
	for _, sm := range gt.Samples() {
		if sm.At.Before(t0) {
			atCut[sm.Board] = len(sm.Of(Keeper.Owner()))
			continue
		}
		if n := len(sm.Of(Keeper.Owner())); n != atCut[sm.Board] {
			t.Errorf("%s ran %d keeper units %.1fs into the cut, %d when it began", sm.Board, n, sm.At.Sub(t0).Seconds(), atCut[sm.Board])
			break
		}
	}
	t.Logf("every sensor unit stopped %.2fs after the cut (stop_after %s); keepers ran on", stoppedAll.Seconds(), sensorStopAfter)

	t1 := time.Now()
	if err := fleet.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	err = Poll(ctx, 200*time.Millisecond, "every sensor active again", func(context.Context) (bool, string) {
		tl := timelineOf(gt.Samples(), Sensor.Owner())
		last := tl[len(tl)-1]
		return !last.at.Before(t1) && last.total() == Sensor.Replicas, fmt.Sprintf("sensor units: %v", last.counts)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("healed: %d sensor units active again %.2fs after the heal", Sensor.Replicas, time.Since(t1).Seconds())
	s = convergeDisconnect(t)
	after := names(s, Sensor)
	keepersAfter := names(s, Keeper)
	t.Logf("converged %.1fs after the heal; sensor pods %v", time.Since(t1).Seconds(), after)
	var failed []string
	for _, p := range s.OwnedPods(Sensor.Deployment) {
		if p.Status.Phase == api.PodFailed || p.Status.Phase == api.PodSucceeded {
			failed = append(failed, p.Metadata.Name+":"+string(p.Status.Phase))
		}
	}
	if len(failed) > 0 {
		t.Errorf("sensor pods stopped by their boards ended %v; want them Scheduled and started again", failed)
	}
	// Whether a pod comes back in place or is replaced is the new
	// leader's call (a board it cannot witness at once is declared dead):
	// the keepers, which never stopped, are the control.
	t.Logf("sensor pods before %v after %v (in place: %v); keeper pods (never stopped) before %v after %v (in place: %v)",
		before, after, slices.Equal(before, after), keepersBefore, keepersAfter, slices.Equal(keepersBefore, keepersAfter))
}
