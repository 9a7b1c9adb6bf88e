package api

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobDefaults(t *testing.T) {
	j := &Job{Metadata: ObjectMeta{Name: "backup"}, Spec: JobSpec{Schedule: "daily", Template: PodTemplate{Exec: []string{"/bin/true"}}}}
	SetDefaults(j)
	if j.Kind != KindJob || j.Spec.Concurrency != ConcurrencyForbid || j.Spec.Retries == nil || *j.Spec.Retries != DefaultJobRetries ||
		j.Spec.Template.RestartPolicy != RestartNever || j.Spec.Template.Labels["app"] != "backup" {
		t.Errorf("SetDefaults(job) = %+v", j)
	}
	if err := Validate(j); err != nil {
		t.Errorf("Validate(defaulted job) = %v", err)
	}
	again := cloneObject(j)
	SetDefaults(again)
	if diff := cmp.Diff(j, again); diff != "" {
		t.Errorf("SetDefaults is not idempotent (-once +twice):\n%s", diff)
	}
}

func TestJobBackoff(t *testing.T) {
	for _, c := range []struct {
		failures int
		want     time.Duration
	}{{0, 10 * time.Second}, {1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {6, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := JobBackoff(c.failures); got != c.want {
			t.Errorf("JobBackoff(%d) = %v, want %v", c.failures, got, c.want)
		}
	}
}

func TestRecordRun(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	var runs []JobRun
	for i := range MaxJobRuns + 3 {
		var added bool
		runs, added = RecordRun(runs, JobRun{Pod: "p", Start: t0.Add(time.Duration(i) * time.Minute)})
		if !added {
			t.Fatalf("run %d not added", i)
		}
	}
	if len(runs) != MaxJobRuns || !runs[0].Start.Equal(t0.Add((MaxJobRuns+2)*time.Minute)) {
		t.Errorf("runs = %d, newest %v", len(runs), runs[0].Start)
	}
	if _, added := RecordRun(runs, JobRun{Pod: "p", Start: runs[3].Start}); added {
		t.Errorf("a run recorded twice")
	}
	r := JobRun{Start: t0, End: t0.Add(90 * time.Second), Result: "exit-code", ExitStatus: 2}
	if r.Duration() != 90*time.Second || r.Succeeded() {
		t.Errorf("Duration %v Succeeded %v", r.Duration(), r.Succeeded())
	}
}

func TestPodSchedule(t *testing.T) {
	p := &Pod{Metadata: ObjectMeta{Name: "web-abcde"}, Spec: PodSpec{Owner: OwnerRef{Kind: KindDeployment, Name: "web"}, Schedule: "daily", Template: PodTemplate{Exec: []string{"/bin/true"}}}}
	if err := Validate(p); err == nil {
		t.Errorf("a deployment's pod with a schedule validated")
	}
	p.Spec.Owner = OwnerRef{Kind: KindJob, Name: "web"}
	if err := Validate(p); err != nil {
		t.Errorf("a job's pod with a schedule: %v", err)
	}
	if !p.Spec.Scheduled() || !p.Spec.RunsToCompletion() || p.Spec.ReplacesRuns() {
		t.Errorf("Scheduled/RunsToCompletion false, or ReplacesRuns true")
	}
	p.Spec.Concurrency = ConcurrencyReplace
	if err := Validate(p); err != nil || !p.Spec.ReplacesRuns() {
		t.Errorf("a replacing job's pod: %v, ReplacesRuns %v", err, p.Spec.ReplacesRuns())
	}
	p.Spec.Concurrency = ConcurrencyAllow
	if err := Validate(p); err == nil {
		t.Errorf("a pod with concurrency allow validated")
	}
	p.Spec.Concurrency = ""
	if n, ok := PodFromTimerName(TimerName("web-abcde")); !ok || n != "web-abcde" {
		t.Errorf("PodFromTimerName = %q %v", n, ok)
	}
}
