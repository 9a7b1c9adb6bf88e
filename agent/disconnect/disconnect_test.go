package disconnect

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/units"
)

var t0 = time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)

func member(name string, server bool, st api.MemberState) gossip.Member {
	return gossip.Member{Name: name, State: st, Meta: gossip.Meta{Server: server}}
}

func TestQuorum(t *testing.T) {
	alive, dead, left := api.MemberAlive, api.MemberDead, api.MemberLeft
	tests := []struct {
		name    string
		members []gossip.Member
		want    bool
	}{
		{"all three servers alive", []gossip.Member{member("b1", true, alive), member("b2", true, alive), member("b3", true, alive), member("b4", false, alive)}, true},
		{"two of three", []gossip.Member{member("b1", true, alive), member("b2", true, dead), member("b3", true, alive)}, true},
		{"one of three: cut off", []gossip.Member{member("b1", true, dead), member("b2", true, dead), member("b3", true, alive), member("b4", false, alive)}, false},
		{"worker sees only itself alive", []gossip.Member{member("b1", true, dead), member("b2", true, dead), member("b3", true, dead), member("b4", false, alive)}, false},
		{"two of four is no majority", []gossip.Member{member("b1", true, alive), member("b2", true, alive), member("b3", true, dead), member("b5", true, dead)}, false},
		{"three of five", []gossip.Member{member("b1", true, alive), member("b2", true, alive), member("b3", true, alive), member("b5", true, dead), member("b6", true, dead)}, true},
		{"a server that left does not count", []gossip.Member{member("b1", true, alive), member("b2", true, left), member("b3", true, left)}, true},
		{"workers alive do not count", []gossip.Member{member("b1", true, dead), member("b4", false, alive), member("b5", false, alive)}, false},
		{"no server known (started cut off)", []gossip.Member{member("b4", false, alive)}, false},
		{"nothing at all", nil, false},
		{"single-server cluster", []gossip.Member{member("b1", true, alive)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quorum(tt.members); got != tt.want {
				t.Errorf("Quorum = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	step := func(d time.Duration, connected bool, wantCut bool, wantSince time.Time) {
		t.Helper()
		tr.Observe(t0.Add(d), connected)
		cut, since := tr.Cut()
		if cut != wantCut || !since.Equal(wantSince) {
			t.Errorf("at +%v connected=%v: Cut = %v, %v; want %v, %v", d, connected, cut, since, wantCut, wantSince)
		}
	}
	step(0, true, false, time.Time{})
	step(1*time.Second, false, true, t0.Add(time.Second))
	step(5*time.Second, false, true, t0.Add(time.Second)) // the cut began at its first observation
	step(6*time.Second, true, false, time.Time{})         // one connected observation ends it
	step(7*time.Second, false, true, t0.Add(7*time.Second))
}

func TestDue(t *testing.T) {
	us := []Unit{
		{Name: "herd-keep.service"},
		{Name: "herd-b.service", StopAfter: 10 * time.Second},
		{Name: "herd-a.service", StopAfter: 10 * time.Second},
		{Name: "herd-slow.service", StopAfter: time.Minute},
		{Name: "herd-done.service", StopAfter: 5 * time.Second, Marked: true},
	}
	tests := []struct {
		name     string
		cut      bool
		after    time.Duration // since the cut began
		want     []string
		wantNext time.Duration
	}{
		{"connected: nothing", false, time.Hour, nil, 0},
		{"just cut off", true, 0, nil, 10 * time.Second},
		{"9.5s", true, 9500 * time.Millisecond, nil, 500 * time.Millisecond},
		{"10s exactly", true, 10 * time.Second, []string{"herd-a.service", "herd-b.service"}, 50 * time.Second},
		{"an hour", true, time.Hour, []string{"herd-a.service", "herd-b.service", "herd-slow.service"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := Due(t0.Add(tt.after), tt.cut, t0, us)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Due (-want +got):\n%s", diff)
			}
			if next != tt.wantNext {
				t.Errorf("next = %v, want %v", next, tt.wantNext)
			}
		})
	}
}

func TestToStop(t *testing.T) {
	listing := []units.UnitState{
		{Unit: "herd-a.service", ActiveState: "active"},
		{Unit: "herd-b.service", ActiveState: "activating", SubState: "auto-restart"},
		{Unit: "herd-c.service", ActiveState: "failed"},
		{Unit: "herd-d.service", ActiveState: "inactive"},
		{Unit: "herd-e.service", ActiveState: "active"},
	}
	got := ToStop([]string{"herd-a.service", "herd-b.service", "herd-c.service", "herd-d.service", "herd-gone.service"}, listing)
	want := []string{"herd-a.service", "herd-b.service"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToStop (-want +got):\n%s", diff)
	}
}

// A scheduled job's pod runs while its timer is active or a run goes,
// whatever its service does between runs: the timer is stopped first, and
// the runs of concurrency allow with the unit.
func TestToStopScheduledJobs(t *testing.T) {
	listing := []units.UnitState{
		{Unit: "herd-cron.service", ActiveState: "inactive", TimerActiveState: "active"},
		{Unit: "herd-idle.service", ActiveState: "inactive", TimerActiveState: "inactive"},
		{Unit: "herd-many.service", ActiveState: "inactive", TimerActiveState: "inactive", Instances: []units.UnitState{
			{Unit: "herd-many@1.service", ActiveState: "active", SubState: "running"},
			{Unit: "herd-many@2.service", ActiveState: "active", SubState: "exited"},
			{Unit: "herd-many@3.service", ActiveState: "failed"},
		}},
	}
	due := []string{"herd-cron.service", "herd-idle.service", "herd-many.service"}
	stop := ToStop(due, listing)
	if diff := cmp.Diff([]string{"herd-cron.service", "herd-many.service"}, stop); diff != "" {
		t.Errorf("ToStop (-want +got):\n%s", diff)
	}
	want := []string{"herd-cron.timer", "herd-cron.service", "herd-many.service", "herd-many@1.service", "herd-many@2.service"}
	names := StopNames(stop, listing)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("StopNames (-want +got):\n%s", diff)
	}
	for _, n := range names {
		if !stoppable(n) {
			t.Errorf("Stop would refuse %q", n)
		}
	}
	for _, n := range []string{"sshd.service", "herd-x.socket", "herd-x@.service", "herd-x_kick.timer"} {
		if stoppable(n) {
			t.Errorf("Stop would take %q", n)
		}
	}
}

func TestClearMarks(t *testing.T) {
	listing := []units.UnitState{
		{Unit: "herd-stopped.service", ActiveState: "inactive", FileHash: "h", DisconnectMark: true},
		{Unit: "herd-failed.service", ActiveState: "failed", FileHash: "h", DisconnectMark: true},
		{Unit: "herd-started.service", ActiveState: "active", FileHash: "h", DisconnectMark: true},
		{Unit: "herd-removed.service", ActiveState: "inactive", LoadState: "not-found", DisconnectMark: true},
	}
	marks := []string{"herd-stopped.service", "herd-failed.service", "herd-started.service", "herd-removed.service", "herd-forgotten.service"}
	got := ClearMarks(marks, listing)
	want := []string{"herd-forgotten.service", "herd-removed.service", "herd-started.service"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClearMarks (-want +got):\n%s", diff)
	}
}
