package units

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func jobPod(t *testing.T, name, schedule string) *api.Pod {
	t.Helper()
	p := planPod(name)
	p.Spec.Owner = api.OwnerRef{Kind: api.KindJob, Name: "backup"}
	p.Spec.Schedule = schedule
	p.Spec.Template.RestartPolicy = api.RestartNever
	return p
}

func timerHash(t *testing.T, p *api.Pod) string {
	t.Helper()
	b, err := RenderTimer(p)
	if err != nil {
		t.Fatal(err)
	}
	return Hash(b)
}

// TestPlanJobs: a job's service is never enabled; a run-once job's is
// started once; a scheduled job's is never started by herd, its timer is
// written, enabled and started, and both go when the pod is not placed.
func TestPlanJobs(t *testing.T) {
	once := jobPod(t, "once", "")
	sched := jobPod(t, "sched", "*:*:0/5")
	resched := jobPod(t, "sched", "daily")
	resched.Metadata.Generation = 2

	idle := func(p *api.Pod) UnitState { // a scheduled job between runs
		return UnitState{Unit: api.UnitName(p.Metadata.Name), LoadState: "loaded", ActiveState: "inactive", SubState: "dead",
			UnitFileState: "static", FileHash: hashOf(t, p), TimerActiveState: "active", TimerFileHash: timerHash(t, p)}
	}
	with := func(u UnitState, edit func(*UnitState)) UnitState { edit(&u); return u }
	for _, tc := range []struct {
		name     string
		desired  []*api.Pod
		observed []UnitState
		want     []string
	}{
		{name: "run-once job placed: started, not enabled", desired: []*api.Pod{once},
			want: []string{"write-env herd-once.service", "write herd-once.service", "start herd-once.service"}},
		{name: "run-once job that exited is not run again", desired: []*api.Pod{once},
			observed: []UnitState{with(running(t, once), func(u *UnitState) {
				u.ActiveState, u.SubState, u.UnitFileState, u.MainPID = "inactive", "dead", "static", 0
			})}},
		{name: "run-once job that exited 0 stays active (exited): nothing", desired: []*api.Pod{once},
			observed: []UnitState{with(running(t, once), func(u *UnitState) {
				u.SubState, u.UnitFileState, u.MainPID = "exited", "static", 0
			})}},
		{name: "run-once job that failed is left to the controller", desired: []*api.Pod{once},
			observed: []UnitState{with(running(t, once), func(u *UnitState) {
				u.ActiveState, u.SubState, u.UnitFileState, u.ExecMainStatus = "failed", "failed", "static", 1
			})}},
		{name: "run-once job stopped on disconnect runs again", desired: []*api.Pod{once},
			observed: []UnitState{with(running(t, once), func(u *UnitState) {
				u.ActiveState, u.SubState, u.UnitFileState, u.DisconnectMark = "inactive", "dead", "static", true
			})},
			want: []string{"start herd-once.service"}},
		{name: "scheduled job placed: service written, timer enabled and started", desired: []*api.Pod{sched},
			want: []string{"write-env herd-sched.service", "write herd-sched.service", "write herd-sched.timer", "enable-now herd-sched.timer"}},
		{name: "scheduled job between runs: nothing", desired: []*api.Pod{sched}, observed: []UnitState{idle(sched)}},
		{name: "scheduled job running: nothing", desired: []*api.Pod{sched},
			observed: []UnitState{with(idle(sched), func(u *UnitState) { u.ActiveState, u.SubState = "active", "running" })}},
		{name: "timer stopped: started again", desired: []*api.Pod{sched},
			observed: []UnitState{with(idle(sched), func(u *UnitState) { u.TimerActiveState = "inactive" })},
			want:     []string{"enable-now herd-sched.timer"}},
		{name: "timer file missing: written", desired: []*api.Pod{sched},
			observed: []UnitState{with(idle(sched), func(u *UnitState) { u.TimerActiveState, u.TimerFileHash = "", "" })},
			want:     []string{"write herd-sched.timer", "enable-now herd-sched.timer"}},
		{name: "schedule changed: both rewritten, timer restarted, service not started", desired: []*api.Pod{resched},
			observed: []UnitState{idle(sched)},
			want: []string{"write-env herd-sched.service", "write herd-sched.service", "write herd-sched.timer",
				"daemon-reload", "restart herd-sched.timer"}},
		{name: "stale scheduled job: timer and service taken down", observed: []UnitState{idle(sched)},
			want: []string{"stop herd-sched.timer", "disable herd-sched.service", "disable herd-sched.timer",
				"remove herd-sched.service", "remove herd-sched.timer", "daemon-reload"}},
		{name: "stale scheduled job mid-run", observed: []UnitState{with(idle(sched), func(u *UnitState) { u.ActiveState = "active" })},
			want: []string{"stop herd-sched.service", "stop herd-sched.timer", "disable herd-sched.service", "disable herd-sched.timer",
				"remove herd-sched.service", "remove herd-sched.timer", "daemon-reload"}},
		{name: "orphan timer without its service file", observed: []UnitState{{Unit: "herd-sched.service", TimerActiveState: "active", TimerFileHash: timerHash(t, sched)}},
			want: []string{"stop herd-sched.timer", "disable herd-sched.timer", "remove herd-sched.timer", "daemon-reload"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts, err := Plan(tc.desired, tc.observed)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range acts {
				s := string(a.Type)
				if a.Unit != "" {
					s += " " + a.Unit
				}
				got = append(got, s)
				if a.Type == ActionEnable || a.Type == ActionEnableNow {
					if a.Unit != api.TimerName("sched") {
						t.Errorf("%s: a job's service is never enabled", s)
					}
				}
				if a.Type == ActionWrite && a.Unit == api.TimerName("sched") {
					want, _ := RenderTimer(tc.desired[0])
					if string(want) != string(a.Content) {
						t.Errorf("timer write is not RenderTimer(pod)")
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanReplacingJob: a job with concurrency replace has its kick unit
// written with its service, as a file the service lists (so it is removed
// with it), and its timer starts the kick unit.
func TestPlanReplacingJob(t *testing.T) {
	p := jobPod(t, "slow", "*:0/15")
	p.Spec.Concurrency = api.ConcurrencyReplace
	acts, err := Plan([]*api.Pod{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kick, err := RenderKick(p)
	if err != nil {
		t.Fatal(err)
	}
	want := "[Unit]\nDescription=herd: a new run of pod slow, replacing a running one\nX-Herd-Pod=slow\n\n" +
		"[Service]\nType=oneshot\nExecStart=systemctl restart --no-block -- herd-slow.service\n"
	if diff := cmp.Diff(want, string(kick)); diff != "" {
		t.Errorf("RenderKick (-want +got):\n%s", diff)
	}
	var sawKick, sawTimer bool
	for _, a := range acts {
		switch {
		case a.Type == ActionWrite && a.Unit == "herd-slow.service":
			for _, f := range a.Files {
				if f.Path == "/etc/systemd/system/herd-slow_kick.service" && string(f.Content) == string(kick) && f.Mode == 0o644 {
					sawKick = true
				}
			}
		case a.Type == ActionWrite && a.Unit == "herd-slow.timer":
			sawTimer = strings.Contains(string(a.Content), "\nUnit=herd-slow_kick.service\n")
		}
	}
	if !sawKick || !sawTimer {
		t.Errorf("kick file written with the service: %v; timer starts the kick unit: %v\n%v", sawKick, sawTimer, acts)
	}
	forbid := jobPod(t, "fast", "*:0/15")
	if _, err := RenderKick(forbid); err == nil {
		t.Errorf("RenderKick of a forbid job's pod did not fail")
	}
}

// instance is a listed instance of pod's template: a run that started at
// board monotonic time start (seconds) and is in state.
func instance(pod string, id string, start int64, state, sub string) UnitState {
	return UnitState{Unit: api.InstanceUnitName(pod, id), LoadState: "loaded", ActiveState: state, SubState: sub,
		ExecMainStartMonotonic: start * 1e6}
}

// TestPlanOverlappingJob: a job with concurrency allow has its template
// (the bytes of its unit file) and its kick unit written with its
// service, as files it lists, and its timer starts the kick unit, which
// starts a new instance; running instances are left alone, finished ones
// beyond the api.MaxJobRuns newest are cleared, and every instance is
// taken down with the pod.
func TestPlanOverlappingJob(t *testing.T) {
	p := jobPod(t, "tick", "*:*:0/5")
	p.Spec.Concurrency = api.ConcurrencyAllow
	content, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	kick, err := RenderKick(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nExecStart=systemctl start --no-block -- herd-tick@${INVOCATION_ID}.service\n"; !strings.Contains(string(kick), want) {
		t.Errorf("RenderKick = %s, want it to have %q", kick, want)
	}
	acts, err := Plan([]*api.Pod{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var files []PodFile
	var sawTimer, sawReload bool
	for _, a := range acts {
		switch {
		case a.Type == ActionDaemonReload:
			sawReload = true
		case a.Type == ActionWrite && a.Unit == "herd-tick.service":
			files = a.Files
		case a.Type == ActionWrite && a.Unit == "herd-tick.timer":
			sawTimer = strings.Contains(string(a.Content), "\nUnit=herd-tick_kick.service\n")
		case a.Unit == "herd-tick.service" && a.Type != ActionWriteEnv:
			t.Errorf("%v: the service of a scheduled job is never enabled or started", a)
		}
	}
	wantFiles := []PodFile{
		{Path: "/etc/systemd/system/herd-tick@.service", Content: content, Mode: 0o644},
		{Path: "/etc/systemd/system/herd-tick_kick.service", Content: kick, Mode: 0o644},
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("files written with the service (-want +got):\n%s", diff)
	}
	if !sawTimer {
		t.Errorf("the timer does not start the kick unit: %v", acts)
	}
	if !sawReload {
		t.Errorf("no daemon-reload after the template and kick unit are written: %v", acts)
	}

	// On the board: the service between runs, its timer, and instances.
	listed := func(ins ...UnitState) []UnitState {
		return []UnitState{{Unit: "herd-tick.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead",
			UnitFileState: "static", FileHash: Hash(content), TimerActiveState: "active", TimerFileHash: timerHash(t, p), Instances: ins}}
	}
	var ins []UnitState
	for i := range api.MaxJobRuns {
		ins = append(ins, instance("tick", fmt.Sprintf("done%d", i), int64(100+i), "active", "exited"))
	}
	running := []UnitState{instance("tick", "run1", 50, "active", "running"), instance("tick", "run2", 200, "activating", "start")}
	oldOK, oldFailed := instance("tick", "old1", 10, "active", "exited"), instance("tick", "old2", 11, "failed", "failed")
	gone := instance("tick", "old3", 12, "inactive", "dead") // systemd unloads it by itself
	tests := []struct {
		name    string
		desired []*api.Pod
		ins     []UnitState
		want    []string
	}{
		{"running and the last finished runs are kept", []*api.Pod{p}, append(slices.Clone(ins), running...), nil},
		{"older finished runs are cleared", []*api.Pod{p}, append(append(slices.Clone(ins), running...), oldOK, oldFailed, gone), []string{
			"stop herd-tick@old1.service: finished run older than the last 10",
			"reset-failed herd-tick@old2.service: finished run older than the last 10"}},
		{"every run goes with the pod", nil, append([]UnitState{ins[0]}, append(running, oldFailed, gone)...), []string{
			"stop herd-tick.timer: pod not placed on this node", // first: no new run starts
			"stop herd-tick@done0.service: pod not placed on this node",
			"stop herd-tick@run1.service: pod not placed on this node",
			"stop herd-tick@run2.service: pod not placed on this node",
			"disable herd-tick.service: pod not placed on this node",
			"disable herd-tick.timer: pod not placed on this node",
			"remove herd-tick.service: pod not placed on this node",
			"remove herd-tick.timer: pod not placed on this node",
			"daemon-reload: unit files changed: herd-tick.service, herd-tick.timer",
			"reset-failed herd-tick@old2.service: pod not placed on this node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acts, err := Plan(tc.desired, listed(tc.ins...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range acts {
				got = append(got, a.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}

	// Instances left after their pod's unit file is gone are still
	// taken down.
	acts, err = Plan(nil, []UnitState{{Unit: "herd-tick.service", Instances: running[:1]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Type != ActionStop || acts[0].Unit != running[0].Unit {
		t.Errorf("orphaned instance: %v", acts)
	}
	// A pod whose runs do not overlap has no instances.
	forbid := jobPod(t, "tick", "*:*:0/5")
	fc, _ := Render(forbid)
	acts, err = Plan([]*api.Pod{forbid}, []UnitState{{Unit: "herd-tick.service", LoadState: "loaded", ActiveState: "inactive",
		FileHash: Hash(fc), TimerActiveState: "active", TimerFileHash: timerHash(t, forbid), Instances: running[:1]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Type != ActionStop || acts[0].Unit != running[0].Unit {
		t.Errorf("instance of a forbid job's pod: %v", acts)
	}
}

// TestKeepInstances: a listing keeps at most api.MaxJobInstances instances
// of a unit, the finished ones (newest start first) before the others.
func TestKeepInstances(t *testing.T) {
	var in []UnitState
	for i := range api.MaxJobInstances + 5 {
		in = append(in, instance("tick", fmt.Sprintf("r%03d", i), int64(i), "active", "running"))
	}
	old := instance("tick", "zold", 1, "failed", "failed")
	recent := instance("tick", "znew", 500, "active", "exited")
	in = append(in, old, recent, recent)
	got := KeepInstances(in)
	if len(got) != api.MaxJobInstances {
		t.Fatalf("kept %d, want %d", len(got), api.MaxJobInstances)
	}
	if !slices.ContainsFunc(got, func(u UnitState) bool { return u.Unit == old.Unit }) ||
		!slices.ContainsFunc(got, func(u UnitState) bool { return u.Unit == recent.Unit }) {
		t.Errorf("finished instances not kept")
	}
	if !slices.IsSortedFunc(got, func(a, b UnitState) int { return strings.Compare(a.Unit, b.Unit) }) {
		t.Errorf("not sorted by name")
	}
	if got[len(got)-1].Unit != "herd-tick@zold.service" || got[len(got)-3].Unit != "herd-tick@r061.service" {
		t.Errorf("kept %s ... %s", got[0].Unit, got[len(got)-1].Unit)
	}
}
