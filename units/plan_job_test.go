package units

import (
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
