//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// jobsManifest declares a job firing every 5 seconds that exits 0 and 3
// by turns (by the 5-second slot of the clock), a job
// that runs once and succeeds, and one that fails, is retried once (after
// api.JobBackoff(1), 10 s) and is then Failed; and a job whose runs take a
// minute, due every 5 seconds, with concurrency replace.
const jobsManifest = `[[job]]
name = "tick"
schedule = "*:*:0/5"
[job.template]
exec = ["/bin/sh", "-c", "echo tick on $(hostname); exit $(( $(date +%s) / 5 % 2 * 3 ))"]

[[job]]
name = "once-ok"
[job.template]
exec = ["/bin/sh", "-c", "echo done"]

[[job]]
name = "slow"
schedule = "*:*:0/5"
concurrency = "replace"
[job.template]
exec = ["/bin/sleep", "60"]

[[job]]
name = "once-fail"
retries = 1
[job.template]
exec = ["/bin/false"]
`

// jobs lists the jobs through via's API.
func jobs(ctx context.Context, via string) (map[string]api.Job, error) {
	js, err := list[api.Job](ctx, fleet, via, api.KindJob)
	if err != nil {
		return nil, err
	}
	out := make(map[string]api.Job, len(js))
	for _, j := range js {
		out[j.Metadata.Name] = j
	}
	return out, nil
}

// js lists the jobs or fails the test.
func js(ctx context.Context, t *testing.T, via string) map[string]api.Job {
	t.Helper()
	m, err := jobs(ctx, via)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// describeRuns is a job's runs for a poll's message.
func describeRuns(j api.Job) string {
	var rs []string
	for _, r := range j.Status.Runs {
		rs = append(rs, fmt.Sprintf("%s@%s:%s/%d", r.Pod, r.Node, r.Result, r.ExitStatus))
	}
	return fmt.Sprintf("%s %s on %s, runs [%s]", j.Metadata.Name, j.Status.Phase, j.Status.Node, strings.Join(rs, " "))
}

// TestJobs applies jobsManifest and checks, on the lab: the scheduled job
// holds a timer (enabled, active) and a service that is not enabled on
// exactly one board, its runs reach the job's status with their exit
// status (0 and 3), `herdctl get jobs` and `herdctl logs job/tick` show them;
// the run-once jobs end Succeeded, and Failed after one retry; the
// replacing job's long run is replaced by the next (its main PID changes
// while its service stays active). Then the
// power of the tick job's board is pulled: the job's pod is replaced on
// another board, whose timer fires and whose runs are recorded. The board
// is powered on again at the end; its stale timer is fenced away.
//
// Run it alone with: go test -tags e2e -count=1 -run 'TestJobs$' -v ./e2e/
func TestJobs(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	via := viaExcept()
	var victim string
	t.Cleanup(func() {
		ctx := testCtx(t, 2*time.Minute)
		via := viaExcept(victim)
		for _, name := range []string{"tick", "once-ok", "once-fail", "slow"} {
			_, _ = fleet.Herdctl(ctx, via, "", "delete", "jobs", name, "--ignore-not-found")
		}
		if victim == "" {
			return
		}
		if _, err := fleet.Lab(ctx, "up", fmt.Sprint(len(fleet.Boards))); err != nil {
			t.Errorf("restore: lab up: %v", err)
		}
		err := Poll(ctx, 200*time.Millisecond, "every board Ready, no herd-tick unit left", func(ctx context.Context) (bool, string) {
			nodes, err := fleet.Nodes(ctx, via)
			if err != nil {
				return false, err.Error()
			}
			if ok, why := AllReady(nodes, fleet.Boards); !ok {
				return false, why
			}
			out, err := fleet.SSH(ctx, victim, "", "ls /etc/systemd/system/ | grep '^herd-tick-' || true")
			if err != nil {
				return false, err.Error()
			}
			return strings.TrimSpace(out) == "", victim + " still has " + strings.TrimSpace(out)
		})
		if err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	if out, err := fleet.Herdctl(ctx, via, jobsManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := fleet.Herdctl(ctx, via, jobsManifest, "diff", "-f", "-"); err != nil {
		t.Errorf("diff after apply: %v\n%s", err, out)
	}

	// The scheduled job: runs recorded on one board, one that exited 0
	// and one with exit status 3.
	var tick api.Job
	err := Poll(ctx, 200*time.Millisecond, "tick: runs recorded with exit status 0 and 3", func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		tick = js["tick"]
		ok, failed := 0, 0
		for _, r := range tick.Status.Runs {
			if r.Node != tick.Status.Node || r.End.IsZero() || r.End.Before(r.Start) {
				continue
			}
			switch {
			case r.ExitStatus == 0 && r.Result == "success":
				ok++
			case r.ExitStatus == 3 && r.Result == "exit-code":
				failed++
			}
		}
		return tick.Status.Phase == api.JobScheduled && ok >= 1 && failed >= 1, describeRuns(tick)
	})
	if err != nil {
		t.Fatal(err)
	}
	board, pod := tick.Status.Node, tick.Status.Pod
	t.Logf("tick: %s", describeRuns(tick))
	out, err := fleet.SSH(ctx, board, "", fmt.Sprintf("systemctl show -p ActiveState -p UnitFileState -p TimersCalendar %s; systemctl show -p UnitFileState -p Result %s",
		api.TimerName(pod), api.UnitName(pod)))
	if err != nil {
		t.Fatalf("systemctl show on %s: %v\n%s", board, err, out)
	}
	t.Logf("on %s:\n%s", board, out)
	for _, want := range []string{"ActiveState=active", "UnitFileState=enabled", "OnCalendar=*-*-* *:*:00/5", "UnitFileState=static"} {
		if !strings.Contains(out, want) {
			t.Errorf("on %s: no %q in\n%s", board, want, out)
		}
	}
	units, err := fleet.FleetUnits(ctx, fleet.Boards, "herd-tick-*")
	if err != nil {
		t.Fatal(err)
	}
	for b, u := range units {
		if b != board && len(u.Loaded) > 0 {
			t.Errorf("%s has tick units %v; only %s holds the job", b, u.Loaded, board)
		}
	}
	get, err := fleet.Herdctl(ctx, via, "", "get", "jobs")
	if err != nil {
		t.Fatalf("get jobs: %v\n%s", err, get)
	}
	t.Logf("herdctl get jobs:\n%s", get)
	if !strings.Contains(string(get), "*:*:0/5") || !strings.Contains(string(get), board) {
		t.Errorf("get jobs does not show tick's schedule and board %s", board)
	}
	logs, err := fleet.Herdctl(ctx, via, "", "logs", "job/tick", "--tail", "5")
	if err != nil {
		t.Fatalf("logs job/tick: %v\n%s", err, logs)
	}
	if !strings.Contains(string(logs), "tick on "+board) {
		t.Errorf("logs job/tick has no line from %s:\n%s", board, logs)
	}

	// The run-once jobs.
	err = Poll(ctx, 200*time.Millisecond, "once-ok Succeeded, once-fail Failed after a retry", func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		ok, fail := js["once-ok"], js["once-fail"]
		done := ok.Status.Phase == api.JobSucceeded && len(ok.Status.Runs) == 1 && ok.Status.Runs[0].Succeeded() &&
			fail.Status.Phase == api.JobFailed && fail.Status.Failures == 2 && len(fail.Status.Runs) == 2 &&
			fail.Status.Runs[0].ExitStatus == 1 && fail.Status.Runs[0].Pod != fail.Status.Runs[1].Pod
		return done, describeRuns(ok) + "; " + describeRuns(fail)
	})
	if err != nil {
		t.Fatal(err)
	}
	if logs, err := fleet.Herdctl(ctx, via, "", "logs", "job/once-ok"); err != nil || !strings.Contains(string(logs), "done") {
		t.Errorf("logs job/once-ok: %v\n%s", err, logs)
	}

	// The replacing job: its service stays active and its process is
	// replaced by the next run (a new main PID).
	slow := js(ctx, t, via)["slow"]
	unit := api.UnitName(slow.Status.Pod)
	firstPID := ""
	err = Poll(ctx, 200*time.Millisecond, "slow: a running run replaced by the next", func(ctx context.Context) (bool, string) {
		if slow.Status.Node == "" {
			m, err := jobs(ctx, via)
			if err != nil {
				return false, err.Error()
			}
			slow = m["slow"]
			unit = api.UnitName(slow.Status.Pod)
			return false, "slow not placed yet"
		}
		out, err := fleet.SSH(ctx, slow.Status.Node, "", "systemctl show -p ActiveState -p SubState -p MainPID "+unit)
		if err != nil {
			return false, err.Error()
		}
		props := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, "=")
			props[k] = v
		}
		if props["ActiveState"] != "active" || props["SubState"] != "running" || props["MainPID"] == "0" {
			return false, strings.ReplaceAll(out, "\n", " ")
		}
		if firstPID == "" {
			firstPID = props["MainPID"]
		}
		return props["MainPID"] != firstPID, fmt.Sprintf("%s on %s: main PID %s (first %s)", unit, slow.Status.Node, props["MainPID"], firstPID)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slow: %s on %s replaced its run (main PID %s, then another)", unit, slow.Status.Node, firstPID)
	if out, err := fleet.Herdctl(ctx, via, "", "delete", "job", "slow"); err != nil {
		t.Errorf("delete job slow: %v\n%s", err, out)
	}

	// Pull the power on tick's board: the timer moves and fires there.
	victim = board
	via = viaExcept(victim)
	t0 := time.Now()
	if err := fleet.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	err = Poll(ctx, 200*time.Millisecond, "tick: a run recorded on another board", func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		tick = js["tick"]
		moved := tick.Status.Node != "" && tick.Status.Node != victim && tick.Status.Phase == api.JobScheduled
		ran := len(tick.Status.Runs) > 0 && tick.Status.Runs[0].Node == tick.Status.Node
		return moved && ran, describeRuns(tick)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tick moved from %s to %s and ran there %.1fs after the power pull: %s", victim, tick.Status.Node, time.Since(t0).Seconds(), describeRuns(tick))
	out, err = fleet.SSH(ctx, tick.Status.Node, "", "systemctl is-active "+api.TimerName(tick.Status.Pod))
	if err != nil || strings.TrimSpace(out) != "active" {
		t.Errorf("timer on %s: %v %q", tick.Status.Node, err, out)
	}
}

// overlapManifest declares a job due every 5 seconds whose runs take 12
// seconds, with concurrency allow: two or three of its runs are always in
// progress at once. A run exits 0 or 3 by the 5-second slot it ends in.
const overlapManifest = `[[job]]
name = "overlap"
schedule = "*:*:0/5"
concurrency = "allow"
[job.template]
exec = ["/bin/sh", "-c", "echo overlap run on $(hostname); sleep 12; exit $(( $(date +%s) / 5 % 2 * 3 ))"]
`

// instanceStates lists, on board, the instances of pod's template
// (herd-<pod>@*.service) by SubState: running, exited, failed, ...
func instanceStates(ctx context.Context, board, pod string) (map[string][]string, error) {
	out, err := fleet.SSH(ctx, board, "", "systemctl show -p Id -p SubState '"+api.InstanceGlob(pod)+"'")
	if err != nil {
		return nil, err
	}
	states := map[string][]string{}
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		props := map[string]string{}
		for _, line := range strings.Split(block, "\n") {
			k, v, _ := strings.Cut(line, "=")
			props[k] = v
		}
		if _, _, ok := api.PodFromInstanceName(props["Id"]); ok {
			states[props["SubState"]] = append(states[props["SubState"]], props["Id"])
		}
	}
	return states, nil
}

// overlapDiagnostics logs what the board of job has of its pod's units.
func overlapDiagnostics(t *testing.T, job api.Job) {
	t.Helper()
	if job.Status.Node == "" {
		return
	}
	ctx := testCtx(t, 30*time.Second)
	pod := job.Status.Pod
	out, err := fleet.SSH(ctx, job.Status.Node, "", fmt.Sprintf("ls -l /etc/systemd/system | grep herd-%[1]s; systemctl list-units --all --no-pager 'herd-%[1]s*'; "+
		"systemctl status --no-pager 'herd-%[1]s*'; journalctl --no-pager -n 40 -u 'herd-%[1]s*'", pod))
	t.Logf("on %s (%v):\n%s", job.Status.Node, err, out)
}

// overlapping counts the pairs of runs in runs whose times overlap.
func overlapping(runs []api.JobRun) int {
	n := 0
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.Instance != b.Instance && a.Start.Before(b.End) && b.Start.Before(a.End) {
				n++
			}
		}
	}
	return n
}

// TestJobsAllow applies overlapManifest and checks, on the lab board that
// holds the job: two instances of its template (herd-<pod>@<id>.service)
// run at once; finished runs, each its own instance, reach the job's
// status (two of them overlapping in time, with exit status 0 and 3),
// `herdctl get jobs` counts the runs in progress, `herdctl describe job`
// names each run's unit and `herdctl logs job/overlap` shows the output of
// several runs, with -f those of runs that start while it follows; once more than api.MaxJobRuns runs have finished, the
// board keeps no more than that many finished instances. Deleting the
// job stops its running instances and leaves nothing of it on the
// board: no unit loaded, no unit, template or kick file, no environment
// file.
//
// Run it alone with: go test -tags e2e -count=1 -run TestJobsAllow -v ./e2e/
func TestJobsAllow(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	via := viaExcept()
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		_, _ = fleet.Herdctl(ctx, via, "", "delete", "jobs", "overlap", "--ignore-not-found")
	})
	if out, err := fleet.Herdctl(ctx, via, overlapManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	// Two runs in progress at once on the job's board.
	var job api.Job
	err := Poll(ctx, 200*time.Millisecond, "overlap: two instances running at once", func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		job = js["overlap"]
		if job.Status.Node == "" || job.Status.Pod == "" {
			return false, "overlap not placed yet: " + describeRuns(job)
		}
		states, err := instanceStates(ctx, job.Status.Node, job.Status.Pod)
		if err != nil {
			return false, err.Error()
		}
		return len(states["running"]) >= 2, fmt.Sprintf("%s on %s: instances %v", job.Status.Pod, job.Status.Node, states)
	})
	if err != nil {
		overlapDiagnostics(t, job)
		t.Fatal(err)
	}
	board, pod := job.Status.Node, job.Status.Pod
	t.Logf("overlap: two runs at once on %s", board)
	units, err := fleet.FleetUnits(ctx, fleet.Boards, "herd-overlap-*")
	if err != nil {
		t.Fatal(err)
	}
	for b, u := range units {
		if b != board && len(u.Loaded)+len(u.Files) > 0 {
			t.Errorf("%s has overlap units %v, files %v; only %s holds the job", b, u.Loaded, u.Files, board)
		}
	}

	// Finished runs recorded, each once, overlapping in time.
	err = Poll(ctx, 200*time.Millisecond, "overlap: overlapping runs recorded with exit status 0 and 3", func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		job = js["overlap"]
		ok, failed := 0, 0
		seen := map[string]bool{}
		for _, r := range job.Status.Runs {
			if r.Pod != pod || r.Node != board || r.Instance == "" || seen[r.Instance] || r.Duration() < 12*time.Second {
				return false, "unexpected run: " + describeRuns(job)
			}
			seen[r.Instance] = true
			switch {
			case r.ExitStatus == 0 && r.Result == "success":
				ok++
			case r.ExitStatus == 3 && r.Result == "exit-code":
				failed++
			}
		}
		return ok >= 1 && failed >= 1 && overlapping(job.Status.Runs) >= 1 && job.Status.ActiveRuns >= 1,
			fmt.Sprintf("%s, %d in progress, %d overlapping pairs", describeRuns(job), job.Status.ActiveRuns, overlapping(job.Status.Runs))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range job.Status.Runs {
		t.Logf("run %s: %s .. %s, %s/%d", r.Instance, r.Start.Format(time.TimeOnly), r.End.Format("15:04:05.000"), r.Result, r.ExitStatus)
	}
	get, err := fleet.Herdctl(ctx, via, "", "get", "jobs", "overlap")
	if err != nil {
		t.Fatalf("get jobs: %v\n%s", err, get)
	}
	t.Logf("herdctl get jobs overlap:\n%s", get)
	if !strings.Contains(string(get), " running)") {
		t.Errorf("get jobs does not count the runs in progress:\n%s", get)
	}
	desc, err := fleet.Herdctl(ctx, via, "", "describe", "job", "overlap")
	if err != nil {
		t.Fatalf("describe job: %v\n%s", err, desc)
	}
	t.Logf("herdctl describe job overlap:\n%s", desc)
	if !strings.Contains(string(desc), "Runs In Progress:") || !strings.Contains(string(desc), api.InstanceUnitName(pod, job.Status.Runs[0].Instance)) {
		t.Errorf("describe job does not show the runs in progress and each run's unit")
	}
	logs, err := fleet.Herdctl(ctx, via, "", "logs", "job/overlap")
	if err != nil {
		t.Fatalf("logs job/overlap: %v\n%s", err, logs)
	}
	if n := strings.Count(string(logs), "overlap run on "+board); n < 2 {
		t.Errorf("logs job/overlap has %d runs' lines from %s, want 2 or more:\n%s", n, board, logs)
	}
	// Following: no past line, and the runs that start meanwhile (two
	// or three in 12 s) are followed too.
	follow, err := fleet.Herdctl(ctx, via, "", "logs", "job/overlap", "-f", "--tail", "0", "--timeout", "12s")
	if err != nil {
		t.Errorf("logs -f job/overlap: %v\n%s", err, follow)
	}
	if n := strings.Count(string(follow), "overlap run on "+board); n < 2 {
		t.Errorf("logs -f job/overlap for 12s has %d runs' lines from %s, want 2 or more:\n%s", n, board, follow)
	}

	// Bounded: once two more runs have finished than the job keeps,
	// the board has cleared the oldest finished instances.
	recorded := map[string]bool{}
	err = Poll(ctx, 500*time.Millisecond, fmt.Sprintf("overlap: more than %d runs finished, at most %d finished instances left on %s", api.MaxJobRuns, api.MaxJobRuns, board), func(ctx context.Context) (bool, string) {
		js, err := jobs(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		job = js["overlap"]
		for _, r := range job.Status.Runs {
			recorded[r.Instance] = true
		}
		states, err := instanceStates(ctx, board, pod)
		if err != nil {
			return false, err.Error()
		}
		finished := len(states["exited"]) + len(states["failed"]) + len(states["dead"])
		return len(recorded) >= api.MaxJobRuns+2 && len(job.Status.Runs) == api.MaxJobRuns && finished <= api.MaxJobRuns,
			fmt.Sprintf("%d runs recorded so far, %d kept; on the board %d finished, %d running", len(recorded), len(job.Status.Runs), finished, len(states["running"]))
	})
	if err != nil {
		t.Fatal(err)
	}

	// Delete the job while runs are in progress: nothing of it is left.
	states, err := instanceStates(ctx, board, pod)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleting overlap with instances %v on %s", states, board)
	if out, err := fleet.Herdctl(ctx, via, "", "delete", "job", "overlap"); err != nil {
		t.Fatalf("delete job overlap: %v\n%s", err, out)
	}
	check := fmt.Sprintf("systemctl list-units --all --plain --no-legend 'herd-%[1]s*'; ls /etc/systemd/system /etc/herd/env /run/credentials 2>/dev/null | grep 'herd-%[1]s' || true", pod)
	err = Poll(ctx, 200*time.Millisecond, "overlap: nothing left on "+board, func(ctx context.Context) (bool, string) {
		out, err := fleet.SSH(ctx, board, "", check)
		if err != nil {
			return false, err.Error()
		}
		return strings.TrimSpace(out) == "", "left: " + strings.ReplaceAll(strings.TrimSpace(out), "\n", "; ")
	})
	if err != nil {
		t.Fatal(err)
	}
}
