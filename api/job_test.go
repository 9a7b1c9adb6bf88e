package api

import (
	"strings"
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
	if err := Validate(p); err != nil || !p.Spec.OverlapsRuns() || p.Spec.ReplacesRuns() {
		t.Errorf("an overlapping job's pod: %v, OverlapsRuns %v, ReplacesRuns %v", err, p.Spec.OverlapsRuns(), p.Spec.ReplacesRuns())
	}
	p.Spec.Concurrency = "sometimes"
	if err := Validate(p); err == nil {
		t.Errorf("a pod with concurrency sometimes validated")
	}
	p.Spec.Concurrency = ""
	if n, ok := PodFromTimerName(TimerName("web-abcde")); !ok || n != "web-abcde" {
		t.Errorf("PodFromTimerName = %q %v", n, ok)
	}
}

func TestInstanceNames(t *testing.T) {
	const id = "509dc5d2fdb04954a6eaff4ef7fe0587"
	if got := InstanceUnitName("tick-abcde", id); got != "herd-tick-abcde@"+id+".service" {
		t.Errorf("InstanceUnitName = %q", got)
	}
	if got := TemplateUnitName("tick-abcde"); got != "herd-tick-abcde@.service" {
		t.Errorf("TemplateUnitName = %q", got)
	}
	if got := InstanceGlob("tick-abcde"); got != "herd-tick-abcde@*.service" {
		t.Errorf("InstanceGlob = %q", got)
	}
	// As systemd 252 names it (systemctl show -p Slice on a lab board).
	if got := InstanceSlice("x-aaaaa"); got != `system-herd\x2dx\x2daaaaa.slice` {
		t.Errorf("InstanceSlice = %q", got)
	}
	for _, c := range []struct {
		unit    string
		pod, id string
		ok      bool
	}{
		{InstanceUnitName("tick-abcde", id), "tick-abcde", id, true},
		{"herd-a@1.service", "a", "1", true},
		{"herd-tick-abcde.service", "", "", false},     // the pod's own unit
		{"herd-tick-abcde@.service", "", "", false},    // the template
		{"herd-tick-abcde@x@y.service", "", "", false}, // two separators
		{"herd-tick-abcde@ABC.service", "", "", false}, // upper case
		{"herd-tick-abcde@a-b.service", "", "", false}, // not a letter or digit
		{"herd-tick-abcde@" + strings.Repeat("a", 65) + ".service", "", "", false},
		{"herd-Tick@abc.service", "", "", false}, // not a pod name
		{"herd-tick_kick@abc.service", "", "", false},
		{"herd-tick@abc.timer", "", "", false},
		{"web@abc.service", "", "", false},
	} {
		pod, id, ok := PodFromInstanceName(c.unit)
		if pod != c.pod || id != c.id || ok != c.ok {
			t.Errorf("PodFromInstanceName(%q) = %q %q %v, want %q %q %v", c.unit, pod, id, ok, c.pod, c.id, c.ok)
		}
		if _, ok := PodFromUnitName(c.unit); ok && strings.Contains(c.unit, "@") {
			t.Errorf("PodFromUnitName(%q) took an instance name for a pod's unit", c.unit)
		}
	}
}

func TestRecordRunInstances(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	runs, _ := RecordRun(nil, JobRun{Pod: "p", Instance: "a", Start: t0})
	runs, added := RecordRun(runs, JobRun{Pod: "p", Instance: "b", Start: t0})
	if !added || len(runs) != 2 {
		t.Errorf("two instances started in the same second: added %v, %d runs", added, len(runs))
	}
	if _, added := RecordRun(runs, JobRun{Pod: "p", Instance: "a", Start: t0}); added {
		t.Errorf("an instance's run recorded twice")
	}
}
