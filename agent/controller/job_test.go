package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

var jobT0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

func testJob(schedule string, retries int) *api.Job {
	j := &api.Job{Metadata: api.ObjectMeta{Name: "backup", Generation: 1, ResourceVersion: 7, Created: jobT0.Add(-time.Hour)},
		Spec: api.JobSpec{Schedule: schedule, Retries: &retries, Template: api.PodTemplate{Exec: []string{"/bin/true"}}}}
	api.SetDefaults(j)
	return j
}

func jobPodIn(j *api.Job, name string, ph api.PodPhase, node string) *api.Pod {
	p := newPod(name, api.OwnerRef{Kind: api.KindJob, Name: j.Metadata.Name}, j.Spec.Template, api.TemplateHash(j.Spec.Template), nil)
	p.Spec.Schedule = j.Spec.Schedule
	if j.Spec.Schedule != "" {
		p.Spec.Concurrency = j.Spec.Concurrency
	}
	p.Spec.Node = node
	p.Status.Phase = ph
	p.Metadata.ResourceVersion = 3
	return p
}

// summary is "type kind/name" per action, and the job's status if written.
func jobSummary(acts []Action) ([]string, *api.JobStatus) {
	var out []string
	var st *api.JobStatus
	for _, a := range acts {
		out = append(out, string(a.Type)+" "+string(a.Kind))
		if j, ok := a.Object.(*api.Job); ok && a.Type == ActionUpdateStatus {
			st = &j.Status
		}
	}
	return out, st
}

func TestReconcileJobOnce(t *testing.T) {
	j := testJob("", 1)
	// A new job: one pod.
	acts := ReconcileJob(jobT0, j, nil)
	got, st := jobSummary(acts)
	if diff := cmp.Diff([]string{"create pods", "updateStatus jobs"}, got); diff != "" {
		t.Fatalf("new job (-want +got):\n%s", diff)
	}
	if st.Phase != api.JobPending || st.PodsCreated != 1 || st.Pod == "" {
		t.Errorf("new job status = %+v", st)
	}
	for _, a := range acts {
		if a.Txn != "jobs/backup" {
			t.Errorf("%v: Txn %q", a, a.Txn)
		}
		if p, ok := a.Object.(*api.Pod); ok && (p.Spec.Owner.Kind != api.KindJob || p.Spec.Template.RestartPolicy != api.RestartNever || p.Spec.Schedule != "") {
			t.Errorf("job pod = %+v", p.Spec)
		}
	}

	// Its pod fails: recorded and kept (logs), backing off, no new pod yet.
	j.Status = *st
	run := &api.JobRun{Pod: st.Pod, Node: "pi-1", Start: jobT0, End: jobT0.Add(2 * time.Second), ExitStatus: 3, Result: "exit-code"}
	failed := jobPodIn(j, st.Pod, api.PodFailed, "pi-1")
	failed.Status.LastRun = run
	got, st = jobSummary(ReconcileJob(jobT0.Add(3*time.Second), j, []*api.Pod{failed}))
	if diff := cmp.Diff([]string{"updateStatus jobs"}, got); diff != "" {
		t.Fatalf("failed run (-want +got):\n%s", diff)
	}
	if st.Phase != api.JobBackingOff || st.Failures != 1 || !st.NextAttempt.Equal(jobT0.Add(13*time.Second)) || len(st.Runs) != 1 || st.Runs[0] != *run {
		t.Errorf("after a failure: %+v", st)
	}
	j.Status = *st
	if d := jobWakeAfter(jobT0.Add(3*time.Second), j); d < 10*time.Second || d > 11*time.Second {
		t.Errorf("jobWakeAfter = %v, want about 10s", d)
	}
	// Before the backoff is over: nothing. After: a new pod.
	if acts := ReconcileJob(jobT0.Add(5*time.Second), j, []*api.Pod{failed}); len(acts) != 0 {
		t.Errorf("during backoff: %v", acts)
	}
	acts = ReconcileJob(jobT0.Add(14*time.Second), j, []*api.Pod{failed})
	got, st = jobSummary(acts)
	if diff := cmp.Diff([]string{"create pods", "updateStatus jobs"}, got); diff != "" {
		t.Fatalf("retry (-want +got):\n%s", diff)
	}
	second := acts[0].Object.(*api.Pod).Metadata.Name
	if second == failed.Metadata.Name || st.PodsCreated != 2 {
		t.Errorf("retry pod %q, podsCreated %d", second, st.PodsCreated)
	}

	// The retry fails too: retries (1) exhausted, Failed, final.
	j.Status = *st
	lost := jobPodIn(j, second, api.PodLost, "pi-2")
	lost.Status.StartedAt = jobT0.Add(15 * time.Second)
	got, st = jobSummary(ReconcileJob(jobT0.Add(20*time.Second), j, []*api.Pod{failed, lost}))
	if diff := cmp.Diff([]string{"delete pods", "updateStatus jobs"}, got); diff != "" { // the older failed pod goes
		t.Fatalf("second failure (-want +got):\n%s", diff)
	}
	if st.Phase != api.JobFailed || st.Failures != 2 || len(st.Runs) != 2 || st.Runs[0].Result != "lost" || st.Runs[0].Node != "pi-2" {
		t.Errorf("after the last failure: %+v", st)
	}
	j.Status = *st
	if acts := ReconcileJob(jobT0.Add(time.Hour), j, []*api.Pod{lost}); len(acts) != 0 {
		t.Errorf("a Failed job acted: %v", acts)
	}
}

func TestReconcileJobSucceeds(t *testing.T) {
	j := testJob("", 3)
	j.Status = api.JobStatus{ObservedGeneration: 1, Phase: api.JobRunning, Pod: "backup-aaaaa", Node: "pi-1", PodsCreated: 1}
	p := jobPodIn(j, "backup-aaaaa", api.PodRunning, "pi-1")
	if acts := ReconcileJob(jobT0, j, []*api.Pod{p}); len(acts) != 0 {
		t.Fatalf("a running job acted: %v", acts)
	}
	p.Status.Phase = api.PodSucceeded
	p.Status.LastRun = &api.JobRun{Pod: p.Metadata.Name, Node: "pi-1", Start: jobT0, End: jobT0.Add(time.Second), Result: "success"}
	got, st := jobSummary(ReconcileJob(jobT0, j, []*api.Pod{p}))
	if diff := cmp.Diff([]string{"updateStatus jobs"}, got); diff != "" {
		t.Fatalf("success (-want +got):\n%s", diff)
	}
	if st.Phase != api.JobSucceeded || st.Pod != "" || len(st.Runs) != 1 {
		t.Errorf("after success: %+v", st)
	}
	j.Status = *st
	if acts := ReconcileJob(jobT0.Add(time.Hour), j, []*api.Pod{p}); len(acts) != 0 {
		t.Errorf("a Succeeded job is run again: %v", acts)
	}
}

func TestReconcileJobScheduled(t *testing.T) {
	j := testJob("*:*:0/5", 3)
	acts := ReconcileJob(jobT0, j, nil)
	got, st := jobSummary(acts)
	if diff := cmp.Diff([]string{"create pods", "updateStatus jobs"}, got); diff != "" {
		t.Fatalf("new scheduled job (-want +got):\n%s", diff)
	}
	p := acts[0].Object.(*api.Pod)
	if p.Spec.Schedule != "*:*:0/5" || !p.Spec.Scheduled() {
		t.Errorf("pod schedule %q", p.Spec.Schedule)
	}
	j.Status = *st
	// Running (timer active): Scheduled; each finished run is recorded once.
	p = jobPodIn(j, p.Metadata.Name, api.PodRunning, "pi-1")
	p.Status.LastRun = &api.JobRun{Pod: p.Metadata.Name, Node: "pi-1", Start: jobT0, End: jobT0.Add(time.Second), Result: "success"}
	_, st = jobSummary(ReconcileJob(jobT0, j, []*api.Pod{p}))
	if st == nil || st.Phase != api.JobScheduled || st.Node != "pi-1" || len(st.Runs) != 1 {
		t.Fatalf("scheduled job status = %+v", st)
	}
	j.Status = *st
	if acts := ReconcileJob(jobT0, j, []*api.Pod{p}); len(acts) != 0 {
		t.Errorf("same run recorded again: %v", acts)
	}
	// Its board is lost: the pod is replaced (the timer moves); runs stay.
	p.Status.Phase = api.PodLost
	got, st = jobSummary(ReconcileJob(jobT0.Add(time.Minute), j, []*api.Pod{p}))
	if diff := cmp.Diff([]string{"delete pods", "create pods", "updateStatus jobs"}, got); diff != "" {
		t.Fatalf("board lost (-want +got):\n%s", diff)
	}
	if st.Phase != api.JobPending || st.Node != "" || len(st.Runs) != 1 || st.PodsCreated != 2 {
		t.Errorf("after the move: %+v", st)
	}
	// A changed concurrency or schedule replaces the pod.
	j.Status = *st
	cur := jobPodIn(j, "backup-ccccc", api.PodRunning, "pi-3")
	j.Spec.Concurrency = api.ConcurrencyReplace
	got, _ = jobSummary(ReconcileJob(jobT0.Add(90*time.Second), j, []*api.Pod{cur}))
	if diff := cmp.Diff([]string{"delete pods", "create pods", "updateStatus jobs"}, got); diff != "" {
		t.Errorf("concurrency changed (-want +got):\n%s", diff)
	}
	j.Status = *st
	j.Spec.Schedule = "daily"
	old := jobPodIn(testJob("*:*:0/5", 3), "backup-bbbbb", api.PodRunning, "pi-2")
	got, _ = jobSummary(ReconcileJob(jobT0.Add(2*time.Minute), j, []*api.Pod{old}))
	if diff := cmp.Diff([]string{"delete pods", "create pods", "updateStatus jobs"}, got); diff != "" {
		t.Errorf("schedule changed (-want +got):\n%s", diff)
	}
}

func TestJobDeletedDeletesItsPods(t *testing.T) {
	j := testJob("daily", 3)
	p := jobPodIn(j, "backup-aaaaa", api.PodRunning, "pi-1")
	ix := NewIndex(&Cluster{Pods: []*api.Pod{p}})
	if !contains(ix.Keys(), KeyOf(api.KindJob, "backup")) {
		t.Fatalf("keys %v lack the gone job", ix.Keys())
	}
	acts := ix.Reconcile(jobT0, scheduler.DefaultConfig(), KeyOf(api.KindJob, "backup"))
	if len(acts) != 1 || acts[0].Type != ActionDelete {
		t.Errorf("orphan pods: %v", acts)
	}
}

func TestObserveJobPod(t *testing.T) {
	j := testJob("*:*:0/5", 3)
	sched := jobPodIn(j, "backup-aaaaa", api.PodScheduled, "pi-1")
	once := jobPodIn(testJob("", 3), "backup-bbbbb", api.PodStarting, "pi-1")
	start, exit := "Sun 2026-12-06 03:00:00 UTC", "Sun 2026-12-06 03:00:02 UTC"
	for _, tc := range []struct {
		name      string
		pod       *api.Pod
		obs       UnitObservation
		wantPhase api.PodPhase
		wantRun   *api.JobRun
	}{
		{name: "timer active, no run yet", pod: sched,
			obs:       UnitObservation{Found: true, ActiveState: "inactive", TimerActiveState: "active"},
			wantPhase: api.PodRunning},
		{name: "timer not active", pod: sched,
			obs:       UnitObservation{Found: true, ActiveState: "inactive", TimerActiveState: "inactive"},
			wantPhase: api.PodScheduled},
		{name: "a run failed: recorded, pod still Running", pod: sched,
			obs: UnitObservation{Found: true, ActiveState: "failed", ExecMainStatus: 2, Result: "exit-code",
				ExecMainStartTimestamp: start, ExecMainExitTimestamp: exit, TimerActiveState: "active"},
			wantPhase: api.PodRunning,
			wantRun: &api.JobRun{Pod: "backup-aaaaa", Node: "pi-1", Start: jobT0, End: jobT0.Add(2 * time.Second),
				ExitStatus: 2, Result: "exit-code"}},
		{name: "a run in progress is not recorded", pod: sched,
			obs:       UnitObservation{Found: true, ActiveState: "active", ExecMainStartTimestamp: start, TimerActiveState: "active"},
			wantPhase: api.PodRunning},
		{name: "run-once job not started yet", pod: once,
			obs:       UnitObservation{Found: true, ActiveState: "inactive"},
			wantPhase: api.PodScheduled},
		{name: "run-once job exited 0", pod: once,
			obs:       UnitObservation{Found: true, ActiveState: "inactive", Result: "success", ExecMainStartTimestamp: start, ExecMainExitTimestamp: exit},
			wantPhase: api.PodSucceeded,
			wantRun:   &api.JobRun{Pod: "backup-bbbbb", Node: "pi-1", Start: jobT0, End: jobT0.Add(2 * time.Second), Result: "success"}},
		{name: "run-once job exited 0, unit active (exited)", pod: once,
			obs:       UnitObservation{Found: true, ActiveState: "active", SubState: "exited", Result: "success", ExecMainStartTimestamp: start, ExecMainExitTimestamp: exit},
			wantPhase: api.PodSucceeded,
			wantRun:   &api.JobRun{Pod: "backup-bbbbb", Node: "pi-1", Start: jobT0, End: jobT0.Add(2 * time.Second), Result: "success"}},
		{name: "run-once job running", pod: once,
			obs:       UnitObservation{Found: true, ActiveState: "active", SubState: "running", ExecMainStartTimestamp: start},
			wantPhase: api.PodRunning},
		{name: "duration from the monotonic clock", pod: once,
			obs: UnitObservation{Found: true, ActiveState: "active", SubState: "exited", Result: "success", ExecMainStartTimestamp: start, ExecMainExitTimestamp: exit,
				ExecMainStartMonotonic: 5_000_000, ExecMainExitMonotonic: 6_234_567},
			wantPhase: api.PodSucceeded,
			wantRun:   &api.JobRun{Pod: "backup-bbbbb", Node: "pi-1", Start: jobT0, End: jobT0.Add(1234567 * time.Microsecond), Result: "success"}},
		{name: "run-once job failed", pod: once,
			obs:       UnitObservation{Found: true, ActiveState: "failed", SubState: "failed", ExecMainStatus: 1, Result: "exit-code", ExecMainStartTimestamp: start, ExecMainExitTimestamp: exit},
			wantPhase: api.PodFailed,
			wantRun:   &api.JobRun{Pod: "backup-bbbbb", Node: "pi-1", Start: jobT0, End: jobT0.Add(2 * time.Second), ExitStatus: 1, Result: "exit-code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts := ObservePod(jobT0, tc.pod, tc.obs)
			got := tc.pod
			if len(acts) == 1 {
				got = acts[0].Object.(*api.Pod)
			}
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s (%s)", got.Status.Phase, tc.wantPhase, got.Status.Message)
			}
			if diff := cmp.Diff(tc.wantRun, got.Status.LastRun); diff != "" {
				t.Errorf("lastRun (-want +got):\n%s", diff)
			}
		})
	}
}

// runningInstance and doneInstance are observed instances of an
// overlapping job's pod: a run in progress since start (seconds after
// jobT0), and one that ran from start to end and exited with status.
func runningInstance(pod, id string, start int) UnitObservation {
	return UnitObservation{Unit: api.InstanceUnitName(pod, id), Found: true, ActiveState: "active", SubState: "running",
		ExecMainStartTimestamp: jobT0.Add(time.Duration(start) * time.Second).Format(systemdTimeLayout),
		ExecMainStartMonotonic: int64(start) * 1e6}
}

func doneInstance(pod, id string, start, end, status int) UnitObservation {
	o := runningInstance(pod, id, start)
	o.SubState, o.Result, o.ExecMainStatus = "exited", "success", status
	if status != 0 {
		o.ActiveState, o.SubState, o.Result = "failed", "failed", "exit-code"
	}
	o.ExecMainExitTimestamp = jobT0.Add(time.Duration(end) * time.Second).Format(systemdTimeLayout)
	o.ExecMainExitMonotonic = int64(end) * 1e6
	return o
}

// TestOverlappingRuns: a job with concurrency allow whose runs take 12 s
// and are due every 5 s. Its pod observes its instances: runs in progress
// are counted, finished ones recorded once each (two started in the same
// second too), newest start first; the job keeps every run, and ends
// in front with the newest.
func TestOverlappingRuns(t *testing.T) {
	j := testJob("*:*:0/5", 3)
	j.Spec.Concurrency = api.ConcurrencyAllow
	pod := jobPodIn(j, "backup-aaaaa", api.PodRunning, "pi-1")
	if !pod.Spec.OverlapsRuns() {
		t.Fatal("the job's pod does not overlap runs")
	}
	run := func(id string, start, end, status int) api.JobRun {
		r := api.JobRun{Pod: "backup-aaaaa", Node: "pi-1", Instance: id, Start: jobT0.Add(time.Duration(start) * time.Second),
			End: jobT0.Add(time.Duration(end) * time.Second), ExitStatus: status, Result: "success"}
		if status != 0 {
			r.Result = "exit-code"
		}
		return r
	}
	steps := []struct {
		name       string
		instances  []UnitObservation
		wantActive int
		wantMsg    string
		wantPod    []api.JobRun // the pod's status.runs
		wantJob    []api.JobRun // the job's status.runs after the pass
	}{
		{"one run", []UnitObservation{runningInstance("backup-aaaaa", "a", 0)}, 1, "a run is in progress", nil, nil},
		{"two at once", []UnitObservation{runningInstance("backup-aaaaa", "a", 0), runningInstance("backup-aaaaa", "b", 5)},
			2, "2 runs are in progress", nil, nil},
		{"the first ends while two run", []UnitObservation{doneInstance("backup-aaaaa", "a", 0, 12, 0),
			runningInstance("backup-aaaaa", "b", 5), runningInstance("backup-aaaaa", "c", 10)},
			2, "2 runs are in progress", []api.JobRun{run("a", 0, 12, 0)}, []api.JobRun{run("a", 0, 12, 0)}},
		{"two more end, one failed", []UnitObservation{doneInstance("backup-aaaaa", "a", 0, 12, 0),
			doneInstance("backup-aaaaa", "b", 5, 17, 3), doneInstance("backup-aaaaa", "c", 10, 22, 0), runningInstance("backup-aaaaa", "d", 15)},
			1, "a run is in progress",
			[]api.JobRun{run("c", 10, 22, 0), run("b", 5, 17, 3), run("a", 0, 12, 0)},
			[]api.JobRun{run("c", 10, 22, 0), run("b", 5, 17, 3), run("a", 0, 12, 0)}},
		{"the board cleared the first; a twin starts in the same second", []UnitObservation{
			doneInstance("backup-aaaaa", "b", 5, 17, 3), doneInstance("backup-aaaaa", "c", 10, 22, 0),
			doneInstance("backup-aaaaa", "d", 15, 27, 0), doneInstance("backup-aaaaa", "e", 15, 16, 0)},
			0, "",
			[]api.JobRun{run("d", 15, 27, 0), run("e", 15, 16, 0), run("c", 10, 22, 0), run("b", 5, 17, 3)},
			[]api.JobRun{run("d", 15, 27, 0), run("e", 15, 16, 0), run("c", 10, 22, 0), run("b", 5, 17, 3), run("a", 0, 12, 0)}},
	}
	for _, s := range steps {
		acts := ObservePod(jobT0.Add(30*time.Second), pod, UnitObservation{Unit: api.UnitName(pod.Metadata.Name), Found: true,
			ActiveState: "inactive", TimerActiveState: "active", Instances: s.instances})
		if len(acts) == 1 {
			pod = acts[0].Object.(*api.Pod)
		}
		if pod.Status.ActiveRuns != s.wantActive || pod.Status.Message != s.wantMsg || pod.Status.Phase != api.PodRunning {
			t.Errorf("%s: pod %s, %d runs in progress, message %q; want %d, %q", s.name, pod.Status.Phase, pod.Status.ActiveRuns, pod.Status.Message, s.wantActive, s.wantMsg)
		}
		if diff := cmp.Diff(s.wantPod, pod.Status.Runs); diff != "" {
			t.Errorf("%s: pod's runs (-want +got):\n%s", s.name, diff)
		}
		_, st := jobSummary(ReconcileJob(jobT0.Add(30*time.Second), j, []*api.Pod{pod}))
		if st != nil {
			j.Status = *st
		}
		if diff := cmp.Diff(s.wantJob, j.Status.Runs); diff != "" {
			t.Errorf("%s: job's runs (-want +got):\n%s", s.name, diff)
		}
		if j.Status.ActiveRuns != s.wantActive || j.Status.Phase != api.JobScheduled {
			t.Errorf("%s: job %s with %d runs in progress, want %d", s.name, j.Status.Phase, j.Status.ActiveRuns, s.wantActive)
		}
		// A second pass records nothing again.
		if acts := ReconcileJob(jobT0.Add(31*time.Second), j, []*api.Pod{pod}); len(acts) != 0 {
			t.Errorf("%s: a second pass acted: %v", s.name, acts)
		}
	}

	// The pod keeps the api.MaxJobRuns newest.
	var many []UnitObservation
	for i := range api.MaxJobRuns + 3 {
		many = append(many, doneInstance("backup-aaaaa", fmt.Sprintf("m%02d", i), 100+i, 101+i, 0))
	}
	many = append(many, UnitObservation{Unit: "herd-other@1.service", ActiveState: "active", SubState: "running"})
	runs, active := instanceRuns(pod, many)
	if len(runs) != api.MaxJobRuns || runs[0].Instance != fmt.Sprintf("m%02d", api.MaxJobRuns+2) || active != 0 {
		t.Errorf("instanceRuns kept %d runs, newest %q, %d in progress", len(runs), runs[0].Instance, active)
	}
}
