package disconnect

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/units"
)

// fakeBoard is a board's systemd, unit files and marks, in memory.
type fakeBoard struct {
	connected bool
	policies  map[string]time.Duration // unit -> stop_after; 0 keep
	active    map[string]string        // unit -> ActiveState
	marks     []string
	stops     [][]string // every Stop call
	lists     int
	markReads int
}

func (b *fakeBoard) config(c *clocktest.Clock) Config {
	cfg := DefaultConfig()
	cfg.Clock = c
	cfg.Connected = func() bool { return b.connected }
	cfg.Units = func() ([]Unit, error) {
		var us []Unit
		for name, d := range b.policies {
			us = append(us, Unit{Name: name, StopAfter: d})
		}
		return us, nil
	}
	cfg.Marks = func() ([]string, error) { b.markReads++; return slices.Clone(b.marks), nil }
	cfg.Mark = func(u string) error { b.marks = append(b.marks, u); return nil }
	cfg.Unmark = func(u string) error {
		b.marks = slices.DeleteFunc(b.marks, func(m string) bool { return m == u })
		return nil
	}
	cfg.List = func(context.Context) ([]units.UnitState, error) {
		b.lists++
		var out []units.UnitState
		for name, st := range b.active {
			u := units.UnitState{Unit: name, ActiveState: st, DisconnectMark: slices.Contains(b.marks, name)}
			if _, ok := b.policies[name]; ok {
				u.FileHash = "h"
			}
			out = append(out, u)
		}
		return out, nil
	}
	cfg.Stop = func(_ context.Context, us []string) error {
		b.stops = append(b.stops, us)
		for _, u := range us {
			b.active[u] = "inactive"
		}
		return nil
	}
	return cfg
}

// TestLoopStep walks one partition: connected, cut off, the stop_after
// unit stopped once (and only the running one), the "keep" unit left
// running, reconnect, the leader starts the unit again, the mark goes.
func TestLoopStep(t *testing.T) {
	ctx := context.Background()
	c := clocktest.New(t0)
	b := &fakeBoard{
		connected: true,
		policies: map[string]time.Duration{
			"herd-sensor-a.service": 10 * time.Second,
			"herd-crashed.service":  10 * time.Second,
			"herd-web-a.service":    0,
		},
		active: map[string]string{"herd-sensor-a.service": "active", "herd-crashed.service": "failed", "herd-web-a.service": "active"},
	}
	l, err := New(b.config(c))
	if err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration) {
		t.Helper()
		c.Advance(d)
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step(0)
	step(time.Second)
	if b.lists != 0 {
		t.Errorf("a connected board without marks listed its units %d times", b.lists)
	}
	if b.markReads != 1 {
		t.Errorf("a connected board without marks read them %d times in two steps, want once", b.markReads)
	}
	b.connected = false
	step(time.Second) // the cut begins
	step(9 * time.Second)
	if len(b.stops) != 0 || b.lists != 0 {
		t.Fatalf("stopped %v (listed %d times) before stop_after", b.stops, b.lists)
	}
	step(time.Second) // 10 s cut off
	if diff := cmp.Diff([][]string{{"herd-sensor-a.service"}}, b.stops); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"herd-sensor-a.service"}, b.marks); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	lists := b.lists
	step(time.Minute)
	if len(b.stops) != 1 {
		t.Errorf("stopped again while still cut off: %v", b.stops)
	}
	if b.lists != lists {
		t.Errorf("listed %d more times while nothing was left to stop (the crashed unit is not looked at again)", b.lists-lists)
	}
	if b.active["herd-web-a.service"] != "active" {
		t.Error("the keep unit was stopped")
	}
	b.connected = true
	step(time.Second)
	if diff := cmp.Diff([]string{"herd-sensor-a.service"}, b.marks); diff != "" {
		t.Errorf("mark dropped before the leader started the unit (-want +got):\n%s", diff)
	}
	if b.lists == lists {
		t.Error("a connected board with marks did not list its units")
	}
	b.active["herd-sensor-a.service"] = "active" // the leader starts it
	step(time.Second)
	if len(b.marks) != 0 {
		t.Errorf("marks left once the unit runs again: %v", b.marks)
	}
	reads := b.markReads
	step(time.Second)
	step(time.Second)
	if b.markReads != reads+1 {
		t.Errorf("read the marks %d times in two steps after the last went, want once (to see none are left)", b.markReads-reads)
	}
	// A new cut starts the count again.
	b.connected = false
	step(time.Second)
	step(9 * time.Second)
	if len(b.stops) != 1 {
		t.Errorf("a new cut stopped before its own stop_after: %v", b.stops)
	}
	step(time.Second)
	if len(b.stops) != 2 {
		t.Errorf("a second cut did not stop the unit: %v", b.stops)
	}
}

// TestLoopStartsCounting: an agent that starts cut off (a board rebooted
// during a partition, whose units systemd started at boot) counts from its
// first step.
func TestLoopStartsCounting(t *testing.T) {
	c := clocktest.New(t0)
	b := &fakeBoard{policies: map[string]time.Duration{"herd-s.service": 5 * time.Second}, active: map[string]string{"herd-s.service": "active"}}
	l, err := New(b.config(c))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.Advance(500 * time.Millisecond)
	}
	if len(b.stops) != 0 {
		t.Fatalf("stopped after 4.5 s: %v", b.stops)
	}
	if err := l.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(b.stops) != 1 {
		t.Fatalf("not stopped after 5 s: %v", b.stops)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(DefaultConfig()); err == nil {
		t.Error("New with no functions: no error")
	}
}

func TestReadUnitsAndMarks(t *testing.T) {
	dir := t.TempDir()
	render := func(name string, o *api.OnDisconnect) {
		p := &api.Pod{Metadata: api.ObjectMeta{Name: name, Generation: 1},
			Spec: api.PodSpec{Template: api.PodTemplate{Exec: []string{"/bin/true"}, OnDisconnect: o}}}
		b, err := units.Render(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, api.UnitName(name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	render("sensor-a", &api.OnDisconnect{StopAfter: "10s"})
	render("web-a", nil)
	for name, content := range map[string]string{
		"herd-bad.service":    "[Unit]\nX-Herd-Pod=bad\nX-Herd-Disconnect-Stop-After=soon\n",
		"herd-x y.service":    "stray",
		"other.service":       "[Unit]\nX-Herd-Disconnect-Stop-After=10s\n",
		"herd-junk.service":   "not a unit file \x00",
		"herd-nometa.service": "[Service]\nExecStart=/bin/true\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadUnits(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Unit) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	want := []Unit{
		{Name: "herd-bad.service"},
		{Name: "herd-junk.service"},
		{Name: "herd-nometa.service"},
		{Name: "herd-sensor-a.service", StopAfter: 10 * time.Second},
		{Name: "herd-web-a.service"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadUnits (-want +got):\n%s", diff)
	}

	m := Marks{Dir: filepath.Join(t.TempDir(), "disconnect")}
	if l, err := m.List(); err != nil || len(l) != 0 {
		t.Fatalf("List of a missing dir = %v, %v", l, err)
	}
	for _, u := range []string{"herd-b.service", "herd-a.service"} {
		if err := m.Mark(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Mark("../etc/passwd"); err == nil {
		t.Error("marked a path")
	}
	if err := m.Unmark("herd-b.service"); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmark("herd-b.service"); err != nil {
		t.Errorf("second Unmark: %v", err)
	}
	if l, err := m.List(); err != nil || !slices.Equal(l, []string{"herd-a.service"}) {
		t.Errorf("List = %v, %v; want [herd-a.service]", l, err)
	}
}

func TestStopArgv(t *testing.T) {
	want := []string{"systemctl", "stop", "--", "herd-a.service", "herd-b.service"}
	if diff := cmp.Diff(want, StopArgv([]string{"herd-a.service", "herd-b.service"})); diff != "" {
		t.Errorf("StopArgv (-want +got):\n%s", diff)
	}
	if err := Stop(context.Background(), []string{"sshd.service"}); err == nil {
		t.Error("Stop of a unit that is not herd's: no error")
	}
}
