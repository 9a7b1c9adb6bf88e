package units

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func planPod(name string) *api.Pod {
	return &api.Pod{
		Kind:     api.KindPod,
		Metadata: api.ObjectMeta{Name: name, Generation: 1},
		Spec: api.PodSpec{
			Owner:    api.OwnerRef{Kind: api.KindDeployment, Name: "web"},
			Node:     "pi-1",
			Template: api.PodTemplate{Exec: []string{"/bin/sleep", "infinity"}},
		},
	}
}

func hashOf(t *testing.T, p *api.Pod) string {
	t.Helper()
	b, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	return Hash(b)
}

// running is an observed unit that matches p and runs.
func running(t *testing.T, p *api.Pod) UnitState {
	return UnitState{
		Unit: api.UnitName(p.Metadata.Name), LoadState: "loaded", ActiveState: "active", SubState: "running",
		UnitFileState: "enabled", MainPID: 42, ExecMainStartTimestamp: "Mon 2024-05-06 07:08:09 UTC",
		FileHash: hashOf(t, p),
	}
}

func TestPlan(t *testing.T) {
	a, b, c, d := planPod("a"), planPod("b"), planPod("c"), planPod("d")
	never := planPod("a")
	never.Spec.Template.RestartPolicy = api.RestartNever
	dChanged := planPod("d")
	dChanged.Metadata.Generation = 2
	dChanged.Spec.Template.Exec = []string{"/bin/sleep", "60"}
	bad := planPod("bad")
	bad.Spec.Template.Exec = []string{"/bin/echo", "nul\x00"}

	with := func(u UnitState, edit func(*UnitState)) UnitState { edit(&u); return u }

	for _, tc := range []struct {
		name     string
		desired  []*api.Pod
		observed []UnitState
		want     []string // "type unit"
		wantErr  bool
	}{
		{name: "empty board", want: nil},
		{
			name:     "nothing changed",
			desired:  []*api.Pod{a, b},
			observed: []UnitState{running(t, a), running(t, b)},
			want:     nil,
		},
		{
			name:     "stale unit is fenced",
			observed: []UnitState{running(t, b)},
			want:     []string{"stop herd-b.service", "disable herd-b.service", "remove herd-b.service", "daemon-reload"},
		},
		{
			name:    "new pod",
			desired: []*api.Pod{a},
			want:    []string{"write herd-a.service", "enable-now herd-a.service"},
		},
		{
			name:     "failed unit of a placed pod is left to the controller",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.ActiveState, u.SubState, u.MainPID, u.ExecMainStatus = "failed", "failed", 0, 1 })},
			want:     nil,
		},
		{
			name:     "crash-looping unit of a placed pod is left to systemd",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.ActiveState, u.SubState, u.NRestarts = "activating", "auto-restart", 9 })},
			want:     nil,
		},
		{
			name:     "exited unit of a restart=never pod stays exited",
			desired:  []*api.Pod{never},
			observed: []UnitState{with(running(t, never), func(u *UnitState) { u.ActiveState, u.SubState, u.MainPID = "inactive", "dead", 0 })},
			want:     nil,
		},
		{
			name:     "unit of a restart=always pod stopped by hand is started",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.ActiveState, u.SubState, u.MainPID = "inactive", "dead", 0 })},
			want:     []string{"start herd-a.service"},
		},
		{
			name:     "changed spec rewrites and restarts",
			desired:  []*api.Pod{dChanged},
			observed: []UnitState{running(t, d)},
			want:     []string{"write herd-d.service", "daemon-reload", "restart herd-d.service"},
		},
		{
			name:     "fencing comes before anything starts",
			desired:  []*api.Pod{dChanged, a},
			observed: []UnitState{running(t, c), running(t, d), running(t, b)},
			want: []string{
				"stop herd-b.service", "stop herd-c.service",
				"disable herd-b.service", "disable herd-c.service",
				"remove herd-b.service", "remove herd-c.service",
				"write herd-a.service", "write herd-d.service",
				"daemon-reload",
				"enable-now herd-a.service",
				"restart herd-d.service",
			},
		},
		{
			name:     "file written but never loaded",
			desired:  []*api.Pod{a},
			observed: []UnitState{{Unit: "herd-a.service", FileHash: hashOf(t, a)}},
			want:     []string{"daemon-reload", "enable-now herd-a.service"},
		},
		{
			name:     "systemd has a stale view of an unchanged file",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.NeedDaemonReload = true })},
			want:     []string{"daemon-reload"},
		},
		{
			name:     "disabled unit is enabled again",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.UnitFileState = "disabled" })},
			want:     []string{"enable herd-a.service"},
		},
		{
			name:    "loaded but never started",
			desired: []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) {
				u.ActiveState, u.SubState, u.MainPID, u.ExecMainStartTimestamp = "inactive", "dead", 0, ""
			})},
			want: []string{"start herd-a.service"},
		},
		{
			name:     "unit file vanished under a running unit",
			desired:  []*api.Pod{a},
			observed: []UnitState{with(running(t, a), func(u *UnitState) { u.FileHash = "" })},
			want:     []string{"write herd-a.service", "daemon-reload", "enable herd-a.service", "restart herd-a.service"},
		},
		{
			name: "stale failed unit already removed is reset",
			observed: []UnitState{with(running(t, b), func(u *UnitState) {
				u.LoadState, u.ActiveState, u.SubState, u.UnitFileState, u.FileHash = "not-found", "failed", "failed", "", ""
			})},
			want: []string{"reset-failed herd-b.service"},
		},
		{
			name: "stale failed unit with its file",
			observed: []UnitState{with(running(t, b), func(u *UnitState) {
				u.ActiveState, u.SubState = "failed", "failed"
			})},
			want: []string{"disable herd-b.service", "remove herd-b.service", "daemon-reload", "reset-failed herd-b.service"},
		},
		{
			name: "stale unit already gone",
			observed: []UnitState{with(running(t, b), func(u *UnitState) {
				u.LoadState, u.ActiveState, u.SubState, u.UnitFileState, u.FileHash = "not-found", "inactive", "dead", "", ""
			})},
			want: nil,
		},
		{
			name:     "stale crash-looping unit is stopped",
			observed: []UnitState{with(running(t, b), func(u *UnitState) { u.ActiveState, u.SubState = "activating", "auto-restart" })},
			want:     []string{"stop herd-b.service", "disable herd-b.service", "remove herd-b.service", "daemon-reload"},
		},
		{
			name:     "units herd does not own are ignored",
			observed: []UnitState{{Unit: "sshd.service", LoadState: "loaded", ActiveState: "active", FileHash: "x"}, {Unit: "herd.service", ActiveState: "active"}},
			want:     nil,
		},
		{
			name:     "duplicates count once",
			desired:  []*api.Pod{a, a, nil},
			observed: []UnitState{running(t, a), running(t, a)},
			want:     nil,
		},
		{
			name:     "an unrenderable pod keeps its unit and blocks nothing else",
			desired:  []*api.Pod{bad, a},
			observed: []UnitState{{Unit: "herd-bad.service", LoadState: "loaded", ActiveState: "active", FileHash: "old"}},
			want:     []string{"write herd-a.service", "enable-now herd-a.service"},
			wantErr:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts, err := Plan(tc.desired, tc.observed)
			if tc.wantErr {
				if !errors.Is(err, ErrUnrenderable) {
					t.Errorf("Plan error = %v, want ErrUnrenderable", err)
				}
			} else if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			var got []string
			envWritten := map[string]bool{}
			for _, a := range acts {
				switch a.Type {
				case ActionWriteEnv:
					checkWriteEnv(t, a, tc.desired)
					envWritten[a.Unit] = true
					continue // checked here, left out of want
				case ActionWrite:
					if !envWritten[a.Unit] {
						t.Errorf("write %s comes without an earlier write-env", a.Unit)
					}
				}
				s := string(a.Type)
				if a.Unit != "" {
					s += " " + a.Unit
				}
				got = append(got, s)
				if a.Reason == "" {
					t.Errorf("%s has no reason", s)
				}
				if (a.Type == ActionWrite || a.Type == ActionWriteEnv) != (a.Content != nil) {
					t.Errorf("%s: content set = %v", s, a.Content != nil)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
			for _, a := range acts {
				if a.Type != ActionWrite {
					continue
				}
				for _, p := range tc.desired {
					if p != nil && api.UnitName(p.Metadata.Name) == a.Unit {
						if want, _ := Render(p); !bytes.Equal(want, a.Content) {
							t.Errorf("write %s: content is not Render(pod)", a.Unit)
						}
					}
				}
			}
			// Applying the plan and observing again converges.
			if tc.wantErr {
				return
			}
			after := applyPlan(t, tc.observed, acts)
			again, err := Plan(tc.desired, after)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != 0 {
				t.Errorf("second pass is not empty: %v", again)
			}
		})
	}
}

// checkWriteEnv checks a write-env action: the pod's environment file, to
// EnvFilePath, mode 0600.
func checkWriteEnv(t *testing.T, a Action, desired []*api.Pod) {
	t.Helper()
	if a.Path != EnvFilePath(a.Unit) || a.Mode != 0o600 {
		t.Errorf("write-env %s: path %q mode %v, want %q 0600", a.Unit, a.Path, a.Mode, EnvFilePath(a.Unit))
	}
	for _, p := range desired {
		if p != nil && api.UnitName(p.Metadata.Name) == a.Unit {
			want, err := RenderEnvFile(p)
			if err != nil || !bytes.Equal(want, a.Content) {
				t.Errorf("write-env %s: content is not RenderEnvFile(pod) (err %v)", a.Unit, err)
			}
			return
		}
	}
	t.Errorf("write-env %s: no desired pod", a.Unit)
}

// applyPlan simulates a board that carries out acts perfectly: a map-backed
// fake unit manager, as in fleet's tests.
func applyPlan(t *testing.T, observed []UnitState, acts []Action) []UnitState {
	t.Helper()
	units := map[string]*UnitState{}
	var order []string
	for _, u := range observed {
		if _, ok := units[u.Unit]; !ok {
			u := u
			units[u.Unit] = &u
			order = append(order, u.Unit)
		}
	}
	get := func(name string) *UnitState {
		if u, ok := units[name]; ok {
			return u
		}
		u := &UnitState{Unit: name}
		units[name] = u
		order = append(order, name)
		return u
	}
	for _, a := range acts {
		switch a.Type {
		case ActionStop:
			u := get(a.Unit)
			u.ActiveState, u.SubState, u.MainPID = "inactive", "dead", 0
		case ActionDisable:
			get(a.Unit).UnitFileState = "disabled"
		case ActionWriteEnv:
			// Not observed: the unit's X-Herd-Generation stands for it.
		case ActionRemove:
			u := get(a.Unit)
			u.FileHash, u.UnitFileState = "", ""
			u.NeedDaemonReload = true
		case ActionWrite:
			u := get(a.Unit)
			u.FileHash = Hash(a.Content)
			if u.LoadState == "loaded" {
				u.NeedDaemonReload = true
			}
			if u.UnitFileState == "" {
				u.UnitFileState = "disabled" // a rewrite keeps the wants/ symlink
			}
		case ActionDaemonReload:
			for _, u := range units {
				u.NeedDaemonReload = false
				if u.FileHash != "" {
					u.LoadState = "loaded"
					if u.ActiveState == "" {
						u.ActiveState, u.SubState = "inactive", "dead"
					}
				} else if u.LoadState != "" {
					u.LoadState = "not-found"
				}
			}
		case ActionResetFailed:
			u := get(a.Unit)
			u.ActiveState, u.SubState = "inactive", "dead"
		case ActionEnable:
			get(a.Unit).UnitFileState = "enabled"
		case ActionEnableNow:
			get(a.Unit).UnitFileState = "enabled"
			fallthrough
		case ActionStart, ActionRestart:
			u := get(a.Unit)
			if u.LoadState == "" && u.FileHash != "" {
				// Never loaded: systemd loads it from disk on start.
				u.LoadState = "loaded"
			}
			if u.LoadState != "loaded" || u.NeedDaemonReload {
				t.Errorf("%s before systemd loaded the current file", a)
			}
			u.ActiveState, u.SubState, u.MainPID, u.ExecMainStartTimestamp = "active", "running", 7, "now"
		default:
			t.Fatalf("unknown action %q", a.Type)
		}
	}
	var out []UnitState
	for _, name := range order {
		u := units[name]
		// systemd forgets an inactive unit without a file after a reload.
		if u.LoadState == "not-found" && u.FileHash == "" && u.ActiveState == "inactive" {
			continue
		}
		out = append(out, *u)
	}
	return out
}

func TestActionString(t *testing.T) {
	for _, tc := range []struct {
		a    Action
		want string
	}{
		{Action{Type: ActionStop, Unit: "herd-a.service", Reason: "pod not placed on this node"}, "stop herd-a.service: pod not placed on this node"},
		{Action{Type: ActionDaemonReload, Reason: "unit files changed: herd-a.service"}, "daemon-reload: unit files changed: herd-a.service"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestParseShow(t *testing.T) {
	out := strings.Join([]string{
		"Id=herd-web-1.service",
		"LoadState=loaded",
		"ActiveState=active",
		"SubState=running",
		"UnitFileState=enabled",
		"NeedDaemonReload=no",
		"MainPID=1234",
		"NRestarts=3",
		"ExecMainStatus=0",
		"ExecMainStartTimestamp=Mon 2024-05-06 07:08:09 UTC",
		"SomethingNew=ignored",
		"",
		"Id=herd-gone.service",
		"LoadState=not-found",
		"ActiveState=failed",
		"SubState=failed",
		"UnitFileState=",
		"NeedDaemonReload=yes",
		"MainPID=0",
		"NRestarts=[not set]",
		"ExecMainStatus=143",
		"ExecMainStartTimestamp=n/a",
		"",
	}, "\n")
	got, err := ParseShow([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []UnitState{
		{Unit: "herd-web-1.service", LoadState: "loaded", ActiveState: "active", SubState: "running", UnitFileState: "enabled",
			MainPID: 1234, NRestarts: 3, ExecMainStartTimestamp: "Mon 2024-05-06 07:08:09 UTC"},
		{Unit: "herd-gone.service", LoadState: "not-found", ActiveState: "failed", SubState: "failed", NeedDaemonReload: true,
			ExecMainStatus: 143},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseShow (-want +got):\n%s", diff)
	}
	if got, err := ParseShow(nil); err != nil || len(got) != 0 {
		t.Errorf("ParseShow(empty) = %v, %v", got, err)
	}
	for _, bad := range []string{"Id=herd-a.service\nMainPID=abc\n", "LoadState=loaded\n", "Id=herd-a.service\nno equals sign\n"} {
		if _, err := ParseShow([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "units: ") {
			t.Errorf("ParseShow(%q) error = %v", bad, err)
		}
	}
	props := ShowProperties()
	for _, p := range []string{"Id", "LoadState", "ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainStartTimestamp"} {
		if !strings.Contains(","+strings.Join(props, ",")+",", ","+p+",") {
			t.Errorf("ShowProperties lacks %s", p)
		}
	}
}

func TestHash(t *testing.T) {
	// sha256sum of the empty file.
	if got := Hash(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Hash(nil) = %s", got)
	}
}

func BenchmarkPlan(b *testing.B) {
	// A busy board: 50 placed pods, all running and unchanged, plus 5 stale.
	var desired []*api.Pod
	var observed []UnitState
	for i := range 55 {
		p := planPod("web-" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		content, err := Render(p)
		if err != nil {
			b.Fatal(err)
		}
		observed = append(observed, UnitState{Unit: api.UnitName(p.Metadata.Name), LoadState: "loaded", ActiveState: "active",
			UnitFileState: "enabled", ExecMainStartTimestamp: "x", FileHash: Hash(content)})
		if i < 50 {
			desired = append(desired, p)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(desired, observed); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlanEnvChangeRewritesUnit: a changed environment value changes the
// spec, so the store moves the generation, which the unit carries: Plan
// rewrites both files and restarts, and the unit holds no trace of the value.
func TestPlanEnvChangeRewritesUnit(t *testing.T) {
	old := planPod("a")
	old.Spec.Template.Env = map[string]string{"TOKEN": "one"}
	cur := planPod("a")
	cur.Metadata.Generation = old.Metadata.Generation + 1
	cur.Spec.Template.Env = map[string]string{"TOKEN": "s3cr3t-value"}
	acts, err := Plan([]*api.Pod{cur}, []UnitState{running(t, old)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range acts {
		got = append(got, string(a.Type))
	}
	if diff := cmp.Diff([]string{"write-env", "write", "daemon-reload", "restart"}, got); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
	unit, _ := Render(cur)
	if bytes.Contains(unit, []byte("s3cr3t-value")) {
		t.Errorf("the unit file carries an environment value:\n%s", unit)
	}
}

// TestPlanStartsAUnitStoppedByHand: a current, loaded unit that stopped
// after a clean exit is started again when its pod's restart policy is
// always (the default), and left alone otherwise or when it is disabled
// (enabling it is the plan then) or exited with an error.
func TestPlanStartsAUnitStoppedByHand(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy api.RestartPolicy
		status int
		state  string
		want   []ActionType
	}{
		{"default policy", "", 0, "enabled", []ActionType{ActionStart}},
		{"always", api.RestartAlways, 0, "enabled", []ActionType{ActionStart}},
		{"on-failure", api.RestartOnFailure, 0, "enabled", nil},
		{"exit status 1", api.RestartAlways, 1, "enabled", nil},
		{"disabled", api.RestartAlways, 0, "disabled", []ActionType{ActionEnable}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := planPod("web-1")
			p.Spec.Template.RestartPolicy = tt.policy
			content, err := Render(p)
			if err != nil {
				t.Fatal(err)
			}
			u := UnitState{Unit: api.UnitName("web-1"), LoadState: "loaded", ActiveState: "inactive", SubState: "dead",
				UnitFileState: tt.state, FileHash: Hash(content), ExecMainStartTimestamp: "Mon 2026-12-01 10:00:00 UTC", ExecMainStatus: tt.status}
			acts, err := Plan([]*api.Pod{p}, []UnitState{u})
			if err != nil {
				t.Fatal(err)
			}
			var got []ActionType
			for _, a := range acts {
				got = append(got, a.Type)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanStartsAUnitStoppedOnDisconnect: a unit its board's agent stopped
// while cut off from the servers (marked in DisconnectDir) is started
// again whatever the restart policy and exit status, as long as its pod is
// still placed there; a marked unit that runs, or is not placed there, is
// treated as any other.
func TestPlanStartsAUnitStoppedOnDisconnect(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy api.RestartPolicy
		active string
		status int
		mark   bool
		placed bool
		want   []ActionType
	}{
		{"always, SIGTERM", api.RestartAlways, "inactive", 15, true, true, []ActionType{ActionStart}},
		{"on-failure, SIGTERM", api.RestartOnFailure, "inactive", 15, true, true, []ActionType{ActionStart}},
		{"never, clean exit", api.RestartNever, "inactive", 0, true, true, []ActionType{ActionStart}},
		{"exit 143 on SIGTERM: failed", api.RestartAlways, "failed", 143, true, true, []ActionType{ActionStart}},
		{"marked but running again", api.RestartAlways, "active", 0, true, true, nil},
		{"not marked, SIGTERM: a crash", api.RestartOnFailure, "inactive", 15, false, true, nil},
		{"not marked, failed", api.RestartAlways, "failed", 1, false, true, nil},
		{"marked, replaced meanwhile", api.RestartAlways, "inactive", 15, true, false, []ActionType{ActionDisable, ActionRemove, ActionDaemonReload}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := planPod("sensor-1")
			p.Spec.Template.RestartPolicy = tt.policy
			p.Spec.Template.OnDisconnect = &api.OnDisconnect{StopAfter: "10s"}
			u := UnitState{Unit: api.UnitName("sensor-1"), LoadState: "loaded", ActiveState: tt.active, SubState: "dead",
				UnitFileState: "enabled", FileHash: hashOf(t, p), ExecMainStartTimestamp: "Mon 2026-12-01 10:00:00 UTC",
				ExecMainStatus: tt.status, DisconnectMark: tt.mark}
			if tt.active == "active" {
				u.SubState = "running"
			}
			var desired []*api.Pod
			if tt.placed {
				desired = []*api.Pod{p}
			}
			acts, err := Plan(desired, []UnitState{u})
			if err != nil {
				t.Fatal(err)
			}
			var got []ActionType
			for _, a := range acts {
				got = append(got, a.Type)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanBoard: everything one pass does to a board, as data: the pod
// files, the unit and environment files, the removals with the paths they
// keep, the reload with the units it is for, and what the placer's memory
// (refused files, restarts not done) adds or leaves out.
func TestPlanBoard(t *testing.T) {
	web := planPod("web")
	web.Spec.Template.Files = []api.File{{Path: "/etc/web/a.conf", Content: "a\n", Mode: "0640"}, {Path: "/etc/shared.conf", Content: "s"}}
	webChanged := planPod("web")
	webChanged.Metadata.Generation = 2
	webChanged.Spec.Template.Files = []api.File{{Path: "/etc/web/a.conf", Content: "b\n", Mode: "0640"}}
	old := planPod("old")
	old.Spec.Template.Files = []api.File{{Path: "/etc/shared.conf", Content: "s"}}
	render := func(p *api.Pod) []byte {
		b, err := Render(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	env := func(p *api.Pod) []byte {
		b, err := RenderEnvFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stopped := running(t, web)
	stopped.ActiveState, stopped.SubState, stopped.MainPID = "inactive", "dead", 0
	const unit = "herd-web.service"
	webFiles := []PodFile{{Path: "/etc/web/a.conf", Content: []byte("a\n"), Mode: 0o640}, {Path: "/etc/shared.conf", Content: []byte("s"), Mode: 0o644}}

	for _, tc := range []struct {
		name  string
		board Board
		want  []Action
	}{
		{
			name:  "new pod with files",
			board: Board{Desired: []*api.Pod{web}},
			want: []Action{
				{Type: ActionWriteEnv, Unit: unit, Reason: "new pod placed on this node", Content: env(web), Path: EnvFilePath(unit), Mode: 0o600},
				{Type: ActionWrite, Unit: unit, Reason: "new pod placed on this node", Content: render(web), Files: webFiles,
					Keep: []string{"/etc/shared.conf", "/etc/web/a.conf"}},
				{Type: ActionEnableNow, Unit: unit, Reason: "new pod placed on this node"},
			},
		},
		{
			name:  "changed file: rewrite, prune the old unit's files, restart",
			board: Board{Desired: []*api.Pod{webChanged}, Observed: []UnitState{running(t, web)}},
			want: []Action{
				{Type: ActionWriteEnv, Unit: unit, Reason: "pod spec changed", Content: env(webChanged), Path: EnvFilePath(unit), Mode: 0o600},
				{Type: ActionWrite, Unit: unit, Reason: "pod spec changed", Content: render(webChanged),
					Files: []PodFile{{Path: "/etc/web/a.conf", Content: []byte("b\n"), Mode: 0o640}}, Prune: true, Keep: []string{"/etc/web/a.conf"}},
				{Type: ActionDaemonReload, Reason: "unit files changed: " + unit, For: []string{unit}},
				{Type: ActionRestart, Unit: unit, Reason: "pod spec changed"},
			},
		},
		{
			name:  "removed pod: its unit goes, keeping a file another pod uses",
			board: Board{Desired: []*api.Pod{old}, Observed: []UnitState{running(t, old), running(t, web)}},
			want: []Action{
				{Type: ActionStop, Unit: unit, Reason: "pod not placed on this node"},
				{Type: ActionDisable, Unit: unit, Reason: "pod not placed on this node"},
				{Type: ActionRemove, Unit: unit, Reason: "pod not placed on this node", Keep: []string{"/etc/shared.conf"}},
				{Type: ActionDaemonReload, Reason: "unit files changed: " + unit, For: []string{unit}},
			},
		},
		{
			name:  "unit stopped by hand is started",
			board: Board{Desired: []*api.Pod{web}, Observed: []UnitState{stopped}},
			want:  []Action{{Type: ActionStart, Unit: unit, Reason: "unit was stopped; restart policy always"}},
		},
		{
			name:  "files refused a moment ago: nothing for the unit",
			board: Board{Desired: []*api.Pod{web}, Refused: map[string]string{unit: Hash(render(web))}},
			want:  nil,
		},
		{
			name: "files refused, other work stays",
			board: Board{Desired: []*api.Pod{web}, Observed: []UnitState{running(t, old)},
				Refused: map[string]string{unit: Hash(render(web))}},
			want: []Action{
				{Type: ActionStop, Unit: "herd-old.service", Reason: "pod not placed on this node"},
				{Type: ActionDisable, Unit: "herd-old.service", Reason: "pod not placed on this node"},
				{Type: ActionRemove, Unit: "herd-old.service", Reason: "pod not placed on this node", Keep: []string{"/etc/shared.conf", "/etc/web/a.conf"}},
				{Type: ActionDaemonReload, Reason: "unit files changed: herd-old.service", For: []string{"herd-old.service"}},
			},
		},
		{
			name:  "refused for an older unit file: the new one is tried",
			board: Board{Desired: []*api.Pod{webChanged}, Observed: []UnitState{running(t, web)}, Refused: map[string]string{unit: Hash(render(web))}},
			want: []Action{
				{Type: ActionWriteEnv, Unit: unit, Reason: "pod spec changed", Content: env(webChanged), Path: EnvFilePath(unit), Mode: 0o600},
				{Type: ActionWrite, Unit: unit, Reason: "pod spec changed", Content: render(webChanged),
					Files: []PodFile{{Path: "/etc/web/a.conf", Content: []byte("b\n"), Mode: 0o640}}, Prune: true, Keep: []string{"/etc/web/a.conf"}},
				{Type: ActionDaemonReload, Reason: "unit files changed: " + unit, For: []string{unit}},
				{Type: ActionRestart, Unit: unit, Reason: "pod spec changed"},
			},
		},
		{
			name:  "a restart an earlier pass did not get to",
			board: Board{Desired: []*api.Pod{web}, Observed: []UnitState{running(t, web)}, Unrestarted: map[string]string{unit: hashOf(t, web)}},
			want: []Action{
				{Type: ActionDaemonReload, Reason: "unit files changed: finishing a restart", For: []string{unit}},
				{Type: ActionRestart, Unit: unit, Reason: "pod spec changed; the restart did not happen"},
			},
		},
		{
			name:  "an unfinished restart whose file was replaced since is forgotten",
			board: Board{Desired: []*api.Pod{web}, Observed: []UnitState{running(t, web)}, Unrestarted: map[string]string{unit: "other"}},
			want:  nil,
		},
		{
			name:  "sweep: only the take-downs",
			board: Board{Desired: []*api.Pod{webChanged}, Observed: []UnitState{running(t, web), running(t, old)}, SweepOnly: true},
			want: []Action{
				{Type: ActionStop, Unit: "herd-old.service", Reason: "pod not placed on this node"},
				{Type: ActionDisable, Unit: "herd-old.service", Reason: "pod not placed on this node"},
				{Type: ActionRemove, Unit: "herd-old.service", Reason: "pod not placed on this node", Keep: []string{"/etc/web/a.conf"}},
				{Type: ActionDaemonReload, Reason: "unit files changed: herd-old.service, " + unit, For: []string{"herd-old.service", unit}},
			},
		},
		{
			name:  "sweep with nothing to take down does nothing",
			board: Board{Desired: []*api.Pod{webChanged}, Observed: []UnitState{running(t, web)}, SweepOnly: true},
			want:  nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanBoard(tc.board)
			if err != nil {
				t.Fatalf("PlanBoard: %v", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("PlanBoard (-want +got):\n%s", d)
			}
		})
	}
}

func TestKeptFilesIncludeArtifacts(t *testing.T) {
	pods := []*api.Pod{
		{Spec: api.PodSpec{Template: api.PodTemplate{
			Files:     []api.File{{Path: "/etc/b.conf"}},
			Artifacts: []api.Artifact{{Path: "/opt/sensor/sensor"}},
		}}},
		nil,
		{Spec: api.PodSpec{Template: api.PodTemplate{Artifacts: []api.Artifact{{Path: "/opt/sensor/sensor"}, {Path: "/opt/a"}}}}},
	}
	want := []string{"/etc/b.conf", "/opt/a", "/opt/sensor/sensor"}
	if diff := cmp.Diff(want, keptFiles(pods)); diff != "" {
		t.Errorf("keptFiles (-want +got):\n%s", diff)
	}
}
