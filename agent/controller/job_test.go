package controller

import (
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
