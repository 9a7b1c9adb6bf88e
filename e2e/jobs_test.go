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
// Run it alone with: go test -tags e2e -count=1 -run TestJobs -v ./e2e/
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
