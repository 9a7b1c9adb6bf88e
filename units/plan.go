package units

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
)

// UnitState is what the executor observed of one herd-* unit on a board.
//
// Most fields are systemd properties of the same name, as printed by
//
//	systemctl show --property=Id,LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload,MainPID,NRestarts,ExecMainStatus,ExecMainStartTimestamp,ExecMainExitTimestamp,Result,ExecMainStartTimestampMonotonic,ExecMainExitTimestampMonotonic herd-*.service
//
// (ShowProperties lists them; ParseShow reads that output). A pattern only
// matches units systemd has loaded, so the executor also lists the unit
// files (/etc/systemd/system/herd-*.service) and adds one UnitState with
// just Unit and FileHash for a file systemd does not know yet.
type UnitState struct {
	// Unit is the unit name (property Id), e.g. "herd-web-1.service".
	Unit string
	// LoadState is loaded, not-found, bad-setting, error or masked; empty
	// when only the file was seen.
	LoadState string
	// ActiveState is active, reloading, inactive, failed, activating or
	// deactivating; empty when only the file was seen.
	ActiveState string
	// SubState is the type-specific state: running, exited, dead, failed,
	// auto-restart, start, stop-sigterm, ...
	SubState string
	// UnitFileState is enabled, disabled, static, ... ; empty if unknown.
	UnitFileState string
	// NeedDaemonReload is true when the file on disk changed since systemd
	// loaded it.
	NeedDaemonReload bool
	// MainPID is the main process ID, 0 when none.
	MainPID int
	// NRestarts counts automatic restarts since the unit was last started
	// by hand (systemd ≥ 235; 0 before).
	NRestarts int
	// ExecMainStatus is the last exit status (or signal number) of the main
	// process.
	ExecMainStatus int
	// ExecMainStartTimestamp is when the main process last started, as
	// systemctl prints it ("Mon 2024-05-06 07:08:09 UTC"); empty (systemctl
	// prints "n/a" or nothing) when it never started since systemd loaded
	// the unit.
	ExecMainStartTimestamp string
	// ExecMainExitTimestamp is when the main process last exited, in the
	// same form; empty when it has not exited since it last started (or
	// never ran). With ExecMainStartTimestamp, ExecMainStatus and Result
	// it describes a job's last run (see JobRun).
	ExecMainExitTimestamp string `json:",omitempty"`
	// Result is systemd's Result of the service: success, exit-code,
	// signal, core-dump, timeout, ...
	Result string `json:",omitempty"`
	// ExecMainStartMonotonic and ExecMainExitMonotonic are the same two
	// times on the board's monotonic clock, in microseconds (properties
	// ExecMainStartTimestampMonotonic, ExecMainExitTimestampMonotonic):
	// a run's duration to the microsecond, where the wall-clock forms
	// only have seconds. 0 when unknown.
	ExecMainStartMonotonic int64 `json:",omitempty"`
	ExecMainExitMonotonic  int64 `json:",omitempty"`
	// TimerActiveState is the ActiveState of the unit's timer
	// (api.TimerName: a scheduled job's pod), "" when the board has none
	// loaded; TimerFileHash is Hash of the timer's file in the unit
	// directory, "" when there is none. Not properties of the service:
	// sshexec's listing adds them.
	TimerActiveState string `json:",omitempty"`
	TimerFileHash    string `json:",omitempty"`
	// FileHash is Hash of the unit file's bytes on the board, or "" when
	// there is no file. Not a systemd property: sshexec's ShowUnits computes
	// it (sha256sum of /etc/systemd/system/herd-*.service in the same round
	// trip). It must be filled in for every unit that has a file, or Plan
	// rewrites and restarts it.
	FileHash string
	// DisconnectMark is true when the unit has a mark in DisconnectDir:
	// the board's agent stopped it while the board was cut off from the
	// servers. Not a systemd property: sshexec's ShowUnits reads the
	// directory in the same round trip. See StoppedOnDisconnect.
	DisconnectMark bool
	// ArtifactFailure is the unit's last artifact fetch failure on the
	// board, "KIND MESSAGE" (see package units/artifact), or "" when none
	// is on record. Not a systemd property: sshexec's listing reads it.
	ArtifactFailure string `json:",omitempty"`
	// Instances are the loaded instances of the unit's template
	// (api.InstanceUnitName: the runs of a job with concurrency allow),
	// sorted by name, each with the properties above from Unit to
	// ExecMainExitMonotonic; at most api.MaxJobInstances (finished ones
	// first). Not properties of the service: sshexec's listing adds them.
	Instances []UnitState `json:",omitempty"`
}

// KeepInstances returns the instances a listing carries for one unit,
// at most api.MaxJobInstances: the finished ones (Finished) newest start
// first, then the others by name; the result is sorted by name and has
// one entry per name. in is not modified.
func KeepInstances(in []UnitState) []UnitState {
	all := slices.Clone(in)
	sort.SliceStable(all, func(i, j int) bool {
		a, b := &all[i], &all[j]
		if fa, fb := a.Finished(), b.Finished(); fa != fb {
			return fa
		}
		if a.Finished() {
			return newestStart(a, b)
		}
		return a.Unit < b.Unit
	})
	seen := make(map[string]bool, len(all))
	out := make([]UnitState, 0, min(len(all), api.MaxJobInstances))
	for _, u := range all {
		if len(out) == api.MaxJobInstances {
			break
		}
		if !seen[u.Unit] {
			seen[u.Unit] = true
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Unit < out[j].Unit })
	return out
}

// Finished reports whether the unit (an instance of an overlapping job's
// template) ran and is over: failed, inactive, or active (exited) after
// exiting 0 (RemainAfterExit=yes).
func (u UnitState) Finished() bool {
	switch u.ActiveState {
	case "failed", "inactive":
		return true
	case "active":
		return u.SubState == "exited"
	}
	return false
}

// DisconnectDir is where a board's agent marks the herd units it stopped
// because the board was cut off from the servers (api.OnDisconnect): one
// empty file per unit, named after the unit. It is on /run, so a reboot
// forgets the marks, as it should: the board's enabled units start again
// at boot. The agent removes a mark once its unit runs again or its unit
// file is gone.
const DisconnectDir = "/run/herd/disconnect"

// StoppedOnDisconnect reports whether the unit is down because its
// board's agent stopped it while cut off from the servers: marked, and
// inactive or failed (a process that exits non-zero on SIGTERM leaves its
// unit failed). Such a unit is neither a crash nor a clean exit: the pod
// is still wanted where it is, and Plan starts it again.
func (u UnitState) StoppedOnDisconnect() bool {
	return u.DisconnectMark && (u.ActiveState == "inactive" || u.ActiveState == "failed")
}

// ShowProperties returns the systemd properties UnitState holds, in the
// order to pass to `systemctl show --property=`.
func ShowProperties() []string {
	return []string{"Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload",
		"MainPID", "NRestarts", "ExecMainStatus", "ExecMainStartTimestamp", "ExecMainExitTimestamp", "Result",
		"ExecMainStartTimestampMonotonic", "ExecMainExitTimestampMonotonic"}
}

// ParseShow reads the output of `systemctl show --property=...` for one or
// more units: Key=Value lines, one blank line between units. Unknown keys
// are ignored; a unit without Id is an error. FileHash is left empty.
func ParseShow(out []byte) ([]UnitState, error) {
	var (
		states []UnitState
		cur    UnitState
		has    bool
	)
	flush := func() error {
		if !has {
			return nil
		}
		if cur.Unit == "" {
			return errors.New("units: systemctl show: a unit without Id")
		}
		states = append(states, cur)
		cur, has = UnitState{}, false
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("units: systemctl show line %d: %q is not Key=Value", n, line)
		}
		has = true
		num := func() (int, error) {
			if value == "" || value == "[not set]" {
				return 0, nil
			}
			v, err := strconv.Atoi(value)
			if err != nil {
				return 0, fmt.Errorf("units: systemctl show line %d: %s=%q is not a number", n, key, value)
			}
			return v, nil
		}
		num64 := func() (int64, error) {
			if value == "" || value == "[not set]" {
				return 0, nil
			}
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("units: systemctl show line %d: %s=%q is not a number", n, key, value)
			}
			return v, nil
		}
		var err error
		switch key {
		case "Id":
			cur.Unit = value
		case "LoadState":
			cur.LoadState = value
		case "ActiveState":
			cur.ActiveState = value
		case "SubState":
			cur.SubState = value
		case "UnitFileState":
			cur.UnitFileState = value
		case "NeedDaemonReload":
			cur.NeedDaemonReload = value == "yes"
		case "MainPID":
			cur.MainPID, err = num()
		case "NRestarts":
			cur.NRestarts, err = num()
		case "ExecMainStatus":
			cur.ExecMainStatus, err = num()
		case "ExecMainStartTimestamp":
			if value != "n/a" {
				cur.ExecMainStartTimestamp = value
			}
		case "ExecMainExitTimestamp":
			if value != "n/a" {
				cur.ExecMainExitTimestamp = value
			}
		case "Result":
			cur.Result = value
		case "ExecMainStartTimestampMonotonic":
			cur.ExecMainStartMonotonic, err = num64()
		case "ExecMainExitTimestampMonotonic":
			cur.ExecMainExitMonotonic, err = num64()
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("units: systemctl show: %w", err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return states, nil
}

// Hash returns the hex SHA-256 of a unit file's bytes, as sha256sum prints
// it.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ActionType is one operation on a board.
type ActionType string

// Action types, in the order Plan emits them.
const (
	// ActionStop is `systemctl stop`.
	ActionStop ActionType = "stop"
	// ActionDisable is `systemctl disable`.
	ActionDisable ActionType = "disable"
	// ActionRemove deletes, in this order, the pod files the unit file on
	// the board lists in X-Herd-Files (the executor reads it first) except
	// those in Action.Keep, the credential files it loads (CredentialPath),
	// the environment file EnvFilePath(Unit), and the
	// unit file, which goes last so that a removal cut short still names
	// what is left. A missing file is not an error.
	ActionRemove ActionType = "remove"
	// ActionWriteEnv writes Action.Content, the pod's environment file
	// (RenderEnvFile), to Action.Path (EnvFilePath(Unit)) with Action.Mode
	// (0600), owned by root, atomically. Plan emits it right before
	// the ActionWrite of the same unit, in the same phase order.
	ActionWriteEnv ActionType = "write-env"
	// ActionWrite writes the pod's credentials (Action.Credentials, the
	// values of its secrets), its files (Action.Files, in order), then
	// Action.Content as the unit file (atomically: temporary file and
	// rename). With Action.Prune the board has an older unit file: the
	// pod files it lists (read before it is replaced) that are not in
	// Action.Keep, and its credential files that are no longer loaded,
	// are removed after the new one is written.
	ActionWrite ActionType = "write"
	// ActionDaemonReload is `systemctl daemon-reload`; Unit is empty and
	// Action.For names the units it is for.
	ActionDaemonReload ActionType = "daemon-reload"
	// ActionResetFailed is `systemctl reset-failed`, so a removed failed
	// unit is forgotten.
	ActionResetFailed ActionType = "reset-failed"
	// ActionEnable is `systemctl enable`.
	ActionEnable ActionType = "enable"
	// ActionEnableNow is `systemctl enable --now`: a unit that is to be
	// both enabled and started, in one systemctl call (Plan merges an
	// ActionEnable and an ActionStart of the same unit into it).
	ActionEnableNow ActionType = "enable-now"
	// ActionStart is `systemctl start`.
	ActionStart ActionType = "start"
	// ActionRestart is `systemctl restart`.
	ActionRestart ActionType = "restart"
)

// Action is one step of a plan: what to do to which unit, and why. Every
// byte a step puts on a board is in it; what it takes off a board beyond
// the named files (the pod files an old unit file lists) is read there by
// the executor, because only the board knows it.
type Action struct {
	Type ActionType
	// Unit is the unit name; empty for ActionDaemonReload.
	Unit string
	// Reason is a short human explanation, for logs and `herdctl diff`.
	Reason string
	// Content is the unit file for ActionWrite, the environment file for
	// ActionWriteEnv, nil otherwise.
	Content []byte
	// Path is where ActionWriteEnv writes (EnvFilePath(Unit)); empty for
	// other types.
	Path string
	// Mode is the permission of the file ActionWriteEnv writes (0600);
	// zero for other types.
	Mode os.FileMode
	// Files are the pod's files ActionWrite puts on the board before the
	// unit file.
	Files []PodFile
	// Credentials (ActionWrite) are the credentials the unit loads: the
	// executor writes each one's value to CredentialPath before the pod
	// files. The plan names them only; values never are in a plan.
	Credentials []Credential
	// Prune (ActionWrite): the board has an older unit file of this unit,
	// whose listed pod files not in Keep go once the new file is written.
	Prune bool
	// Keep (ActionWrite, ActionRemove) is every pod file path a pod placed
	// on the board uses, sorted: never removed with another unit.
	Keep []string
	// For (ActionDaemonReload) names the units the reload is for, sorted:
	// those written or removed by the plan and those systemd has a stale
	// or no view of. When the board refused the pod files of every one of
	// them, the reload has no reason left and is not run.
	For []string
}

// PodFile is one pod file as an ActionWrite puts it on a board: root-owned,
// atomically, never through a symbolic link.
type PodFile struct {
	Path    string
	Content []byte
	// Mode is the permission, setuid/setgid/sticky included (api.File.Perm).
	Mode os.FileMode
	// AllowSetID is the file's opt-in to a setuid or setgid Mode; without
	// it such a mode is refused.
	AllowSetID bool
}

// EnvFileMode is the permission of a pod's environment file: read and
// written by root only, since it holds the pod's secrets.
const EnvFileMode os.FileMode = 0o600

// SecretDirMode is the permission of the folders of the environment files
// and the credentials: root's alone, so that no pod user can read another
// pod's secrets or swap anything into the path.
const SecretDirMode os.FileMode = 0o700

// String formats an action for logs: "stop herd-web-1.service: not placed
// on this node".
func (a Action) String() string {
	if a.Unit == "" {
		return fmt.Sprintf("%s: %s", a.Type, a.Reason)
	}
	return fmt.Sprintf("%s %s: %s", a.Type, a.Unit, a.Reason)
}

// phase orders action types; Plan emits phase by phase, units sorted by name
// within a phase.
func phase(t ActionType) int {
	switch t {
	case ActionStop:
		return 0
	case ActionDisable:
		return 1
	case ActionRemove:
		return 2
	case ActionWriteEnv:
		return 3
	case ActionWrite:
		return 4
	case ActionDaemonReload:
		return 5
	case ActionResetFailed:
		return 6
	case ActionEnable:
		return 7
	case ActionEnableNow:
		return 8
	}
	return 9 // start, restart
}

// Board is what PlanBoard plans a pass over one board from: the pods placed
// there, what the board runs, and what the leader remembers of earlier
// passes (in memory only, so the zero value is a fresh leader's view).
type Board struct {
	// Desired is every pod the store places on the board whose unit must
	// run: bound there and not terminal.
	Desired []*api.Pod
	// Observed is the board's listing of its herd units.
	Observed []UnitState
	// Refused holds, by unit, the Hash of the unit file whose pod files
	// the board refused a short while ago: while the plan would write that
	// same unit file, nothing is planned for the unit, so a refusal is not
	// retried in a loop. The caller decides how long "a short while" is.
	Refused map[string]string
	// Unrestarted holds, by unit, the Hash of a unit file an earlier pass
	// wrote for a changed pod without getting to restart the unit. The
	// board cannot show it (its file is current and loaded): such a unit,
	// still desired, with that file and still running, is restarted (after
	// a daemon-reload) unless the plan rewrites or restarts it anyway.
	Unrestarted map[string]string
	// SweepOnly plans only what takes stale units down (stop, disable,
	// remove, reset-failed and the daemon-reload), and nothing at all
	// unless a unit is stopped or removed: the pass over a board that is
	// down, which must never bring a unit up.
	SweepOnly bool
}

// PlanBoard returns everything one pass does to a board, in order: Plan's
// actions for b.Desired and b.Observed, less those of units whose files were
// refused (b.Refused), plus the restarts an earlier pass did not get to
// (b.Unrestarted), or only the take-downs (b.SweepOnly). The error is
// Plan's.
func PlanBoard(b Board) ([]Action, error) {
	acts, err := Plan(b.Desired, b.Observed)
	if b.SweepOnly {
		return sweepOnly(acts), err
	}
	acts = append(acts, unrestarted(b, acts)...)
	return dropRefused(acts, b.Refused), err
}

// sweepOnly keeps the take-downs of acts, none unless one stops or removes
// a unit.
func sweepOnly(acts []Action) []Action {
	var out []Action
	down := false
	for _, a := range acts {
		switch a.Type {
		case ActionStop, ActionRemove:
			down = true
			fallthrough
		case ActionDisable, ActionDaemonReload, ActionResetFailed:
			out = append(out, a)
		}
	}
	if !down {
		return nil
	}
	return out
}

// unrestarted returns the restarts of b.Unrestarted that planned does not
// do itself (a write or restart of the unit), for units still desired whose
// board file is the one written and whose process runs, with a
// daemon-reload first unless planned has one.
func unrestarted(b Board, planned []Action) []Action {
	if len(b.Unrestarted) == 0 {
		return nil
	}
	bound := make(map[string]bool, len(b.Desired))
	for _, p := range b.Desired {
		if p != nil {
			bound[api.UnitName(p.Metadata.Name)] = true
		}
	}
	touched := make(map[string]bool)
	reload := false
	for _, a := range planned {
		touched[a.Unit] = touched[a.Unit] || a.Type == ActionWrite || a.Type == ActionRestart
		reload = reload || a.Type == ActionDaemonReload
	}
	var restart []Action
	var names []string
	for _, unit := range slices.Sorted(maps.Keys(b.Unrestarted)) {
		if touched[unit] || !bound[unit] || !StillUnrestarted(b.Observed, unit, b.Unrestarted[unit]) {
			continue
		}
		names = append(names, unit)
		restart = append(restart, Action{Type: ActionRestart, Unit: unit, Reason: "pod spec changed; the restart did not happen"})
	}
	if len(restart) > 0 && !reload {
		restart = append([]Action{{Type: ActionDaemonReload, Reason: "unit files changed: finishing a restart", For: names}}, restart...)
	}
	return restart
}

// StillUnrestarted reports whether the listing shows unit with the file of
// hash and a running process (active, activating or reloading): a restart
// an earlier pass did not get to still has to happen.
func StillUnrestarted(observed []UnitState, unit, hash string) bool {
	for _, u := range observed {
		if u.Unit == unit {
			return u.FileHash == hash && (u.ActiveState == "active" || u.ActiveState == "activating" || u.ActiveState == "reloading")
		}
	}
	return false
}

// dropRefused leaves out every action of a unit whose write is the one the
// board refused (refused), and the daemon-reload when nothing else is left
// for it.
func dropRefused(acts []Action, refused map[string]string) []Action {
	if len(refused) == 0 {
		return acts
	}
	held := make(map[string]bool)
	for _, a := range acts {
		if a.Type == ActionWrite && refused[a.Unit] != "" && refused[a.Unit] == Hash(a.Content) {
			held[a.Unit] = true
		}
	}
	if len(held) == 0 {
		return acts
	}
	out := make([]Action, 0, len(acts))
	for _, a := range acts {
		if held[a.Unit] {
			continue
		}
		if a.Type == ActionDaemonReload {
			a.For = slices.DeleteFunc(slices.Clone(a.For), func(u string) bool { return held[u] })
			if len(a.For) == 0 {
				continue
			}
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Plan compares the pods placed on one board (desired: every pod the store
// places on this node, whatever its phase) with the herd units observed
// there, and returns the actions that make the board run exactly those pods,
// in this fixed order:
//
//  1. stop, disable and remove units of pods not placed here (fencing);
//  2. write the environment files, then the pod files and unit files, of
//     new and changed units;
//  3. one daemon-reload, if anything was written or removed or systemd has
//     a stale view of a file;
//  4. reset-failed for removed units that had failed;
//  5. enable, then start new units and restart changed ones.
//
// Plan never restarts a unit just because it failed: whether a failed pod
// is replaced is the controller's decision. An unchanged unit is started
// only if systemd never started it (its file was written but the previous
// pass did not get to start it), if its board's agent stopped it while cut
// off from the servers (UnitState.StoppedOnDisconnect; whatever the restart
// policy and exit status), or if it stopped after a clean exit (exit
// status 0, stopped by hand) while its pod's restart policy is always and
// nothing else is planned for it. Observed units whose names are not
// herd unit names are ignored.
//
// A pod that cannot be rendered gets no actions, so a unit it already has
// is left alone; the returned error (errors.Join of *RenderError values)
// names every such pod, and the actions for the others are still valid.
func Plan(desired []*api.Pod, observed []UnitState) ([]Action, error) {
	pl := planner{seen: make(map[string]UnitState, len(observed)), want: make(map[string]bool, len(desired))}
	for _, u := range observed {
		if !IsHerdUnit(u.Unit) {
			continue
		}
		if _, dup := pl.seen[u.Unit]; !dup {
			pl.seen[u.Unit] = u
		}
	}
	pl.keep = keptFiles(desired)
	for _, p := range desired {
		if p == nil {
			continue
		}
		name := api.UnitName(p.Metadata.Name)
		if pl.want[name] {
			continue
		}
		pl.want[name] = true
		pl.placed(p, name)
	}
	pl.stale()
	pl.daemonReload(observed)
	pl.acts = enableNow(pl.acts)
	sort.SliceStable(pl.acts, func(i, j int) bool {
		a, b := &pl.acts[i], &pl.acts[j]
		if pa, pb := phase(a.Type), phase(b.Type); pa != pb {
			return pa < pb
		}
		return a.Unit < b.Unit
	})
	return pl.acts, errors.Join(pl.errs...)
}

// enableNow replaces the ActionEnable and ActionStart of each unit that
// has both by one ActionEnableNow with the start's reason: one systemctl
// call, one round trip to the board, fewer.
func enableNow(acts []Action) []Action {
	enable := map[string]bool{}
	start := map[string]bool{}
	for _, a := range acts {
		switch a.Type {
		case ActionEnable:
			enable[a.Unit] = true
		case ActionStart:
			start[a.Unit] = true
		}
	}
	out := acts[:0]
	for _, a := range acts {
		switch {
		case a.Type == ActionEnable && start[a.Unit]:
			continue
		case a.Type == ActionStart && enable[a.Unit]:
			a.Type = ActionEnableNow
		}
		out = append(out, a)
	}
	return out
}

// planner is Plan's work in progress.
type planner struct {
	seen   map[string]UnitState // herd units observed, by name
	want   map[string]bool      // units of desired pods
	keep   []string             // keptFiles(desired)
	acts   []Action
	errs   []error
	reload []string // why a daemon-reload is needed
}

func (pl *planner) add(t ActionType, unit, reason string) {
	pl.acts = append(pl.acts, Action{Type: t, Unit: unit, Reason: reason})
}

// keptFiles returns the paths of every file and artifact of the desired
// pods, sorted.
func keptFiles(desired []*api.Pod) []string {
	var keep []string
	for _, p := range desired {
		if p == nil {
			continue
		}
		for _, f := range p.Spec.Template.Files {
			keep = append(keep, f.Path)
		}
		for _, a := range p.Spec.Template.Artifacts {
			keep = append(keep, a.Path)
		}
	}
	slices.Sort(keep)
	return slices.Compact(keep)
}

// podFiles returns the files an ActionWrite puts on the board for p,
// whose unit file is content.
func podFiles(p *api.Pod, content []byte) ([]PodFile, error) {
	var files []PodFile
	for i, f := range p.Spec.Template.Files {
		mode, err := f.Perm()
		if err != nil {
			return nil, &RenderError{Pod: p.Metadata.Name, Field: fmt.Sprintf("spec.template.files[%d].mode", i), Reason: err.Error()}
		}
		files = append(files, PodFile{Path: f.Path, Content: []byte(f.Content), Mode: mode, AllowSetID: f.AllowSetID})
	}
	if p.Spec.OverlapsRuns() {
		files = append(files, PodFile{Path: TemplatePath(p.Metadata.Name), Content: content, Mode: 0o644})
	}
	if p.Spec.ReplacesRuns() || p.Spec.OverlapsRuns() {
		kick, err := RenderKick(p)
		if err != nil {
			return nil, err
		}
		files = append(files, PodFile{Path: KickPath(p.Metadata.Name), Content: kick, Mode: 0o644})
	}
	return files, nil
}

// placed plans the unit name of p, a pod placed on the board.
func (pl *planner) placed(p *api.Pod, name string) {
	content, err := Render(p)
	if err != nil {
		pl.errs = append(pl.errs, err)
		return
	}
	envFile, err := RenderEnvFile(p)
	if err != nil {
		pl.errs = append(pl.errs, err)
		return
	}
	files, err := podFiles(p, content)
	if err != nil {
		pl.errs = append(pl.errs, err)
		return
	}
	write := func(reason string, prune, reload bool) {
		pl.acts = append(pl.acts,
			Action{Type: ActionWriteEnv, Unit: name, Reason: reason, Content: envFile, Path: EnvFilePath(name), Mode: EnvFileMode},
			Action{Type: ActionWrite, Unit: name, Reason: reason, Content: content, Files: files, Credentials: Credentials(p), Prune: prune, Keep: pl.keep})
		if reload {
			pl.reload = append(pl.reload, name)
		}
	}
	u, ok := pl.seen[name]
	if p.Spec.RunsToCompletion() {
		pl.job(p, name, u, ok, content, write)
		return
	}
	switch {
	case !ok || u.FileHash == "":
		// A unit systemd has never seen needs no daemon-reload: systemd
		// loads it from disk when it is started (enable --now runs
		// with --no-reload: only the [Install] symlinks). One that
		// systemd knows (loaded, or its file gone while it ran) does.
		write("new pod placed on this node", false, ok)
		pl.add(ActionEnable, name, "new pod placed on this node")
		if isRunning(u.ActiveState) {
			pl.add(ActionRestart, name, "unit file was missing while the unit ran")
		} else {
			pl.add(ActionStart, name, "new pod placed on this node")
		}
	case u.FileHash != Hash(content):
		write("pod spec changed", true, true)
		if u.UnitFileState == "disabled" {
			pl.add(ActionEnable, name, "unit is not enabled")
		}
		pl.add(ActionRestart, name, "pod spec changed")
	case u.LoadState == "" || u.LoadState == "not-found":
		// Written by a pass that stopped before daemon-reload.
		pl.reload = append(pl.reload, name)
		pl.add(ActionEnable, name, "unit file was written but never loaded")
		pl.add(ActionStart, name, "unit file was written but never loaded")
	default:
		pl.current(p, name, u)
	}
}

// job plans the units of a job's pod (api.PodSpec.RunsToCompletion): its
// service is never enabled (a reboot does not run it again) and is
// restarted after a change only while it runs. A job without schedule
// has its service started once (never started, or stopped by its board
// while cut off); a scheduled job's service is never started by herd: its
// timer (api.TimerName, RenderTimer) is written beside it, enabled and
// started, and restarted when its file changes.
func (pl *planner) job(p *api.Pod, name string, u UnitState, ok bool, content []byte,
	write func(reason string, prune, reload bool)) {
	switch {
	case !ok || u.FileHash == "":
		// A kick unit and a template are loaded by name later (by the
		// timer, by the kick), from systemd's map of the unit
		// directory, which it rebuilds when it misses a name only if the
		// directory's mtime moved since it last built it: a file written
		// within the same clock tick as a rebuild would be missed until
		// the next change. A daemon-reload after writing them settles it.
		write("new pod placed on this node", false, ok || p.Spec.ReplacesRuns() || p.Spec.OverlapsRuns())
		if !p.Spec.Scheduled() {
			if isRunning(u.ActiveState) {
				pl.add(ActionRestart, name, "unit file was missing while the unit ran")
			} else {
				pl.add(ActionStart, name, "new pod placed on this node")
			}
		}
	case u.FileHash != Hash(content):
		write("pod spec changed", true, true)
		if isRunning(u.ActiveState) {
			pl.add(ActionRestart, name, "pod spec changed")
		}
	case u.LoadState == "" || u.LoadState == "not-found":
		pl.reload = append(pl.reload, name)
		if !p.Spec.Scheduled() {
			pl.add(ActionStart, name, "unit file was written but never loaded")
		}
	default:
		if u.NeedDaemonReload {
			pl.reload = append(pl.reload, name)
		}
		if !p.Spec.Scheduled() {
			switch {
			case u.StoppedOnDisconnect():
				pl.add(ActionStart, name, "unit was stopped by its board while cut off from the servers")
			case u.ActiveState == "inactive" && u.ExecMainStartTimestamp == "":
				pl.add(ActionStart, name, "unit was never started")
			}
		}
	}
	if p.Spec.Scheduled() {
		pl.timer(p, u)
	}
	pl.instances(p, u)
}

// instances plans the instances of a job pod's template (the runs of
// concurrency allow). Running ones are left alone; of the finished ones
// the board keeps the api.MaxJobRuns that started last (what the job
// records, see controller.ObservePod) and the older ones are cleared:
// stopped when active (exited), reset when failed, so systemd unloads
// them. A pod whose runs do not overlap has none: any is taken down.
func (pl *planner) instances(p *api.Pod, u UnitState) {
	if !p.Spec.OverlapsRuns() {
		pl.takeDown(u.Instances, "not a run of a job with concurrency allow")
		return
	}
	var done []UnitState
	for _, in := range u.Instances {
		if in.Finished() {
			done = append(done, in)
		}
	}
	if len(done) <= api.MaxJobRuns {
		return
	}
	sort.SliceStable(done, func(i, j int) bool { return newestStart(&done[i], &done[j]) })
	pl.takeDown(done[api.MaxJobRuns:], fmt.Sprintf("finished run older than the last %d", api.MaxJobRuns))
}

// newestStart reports whether a sorts before b when instances go newest
// start first (the board's monotonic clock), then by name.
func newestStart(a, b *UnitState) bool {
	if a.ExecMainStartMonotonic != b.ExecMainStartMonotonic {
		return a.ExecMainStartMonotonic > b.ExecMainStartMonotonic
	}
	return a.Unit < b.Unit
}

// takeDown plans the end of instances: a running or active (exited) one
// is stopped, a failed one reset (systemd then unloads either: they have
// no file of their own).
func (pl *planner) takeDown(instances []UnitState, why string) {
	for _, in := range instances {
		switch {
		case isRunning(in.ActiveState):
			pl.add(ActionStop, in.Unit, why)
		case in.ActiveState == "failed":
			pl.add(ActionResetFailed, in.Unit, why)
		}
	}
}

// timer plans the timer of a scheduled job's pod: written when its file
// differs, then enabled and started unless active (restarted if active
// and changed).
func (pl *planner) timer(p *api.Pod, u UnitState) {
	tn := api.TimerName(p.Metadata.Name)
	content, err := RenderTimer(p)
	if err != nil {
		pl.errs = append(pl.errs, err)
		return
	}
	changed := u.TimerFileHash != Hash(content)
	if changed {
		reason := "new scheduled job placed on this node"
		if u.TimerFileHash != "" {
			reason = "schedule changed"
		}
		pl.acts = append(pl.acts, Action{Type: ActionWrite, Unit: tn, Reason: reason, Content: content, Keep: pl.keep})
		if u.TimerActiveState != "" || u.TimerFileHash != "" {
			pl.reload = append(pl.reload, tn)
		}
	}
	switch {
	case u.TimerActiveState != "active":
		pl.add(ActionEnable, tn, "timer of a scheduled job")
		pl.add(ActionStart, tn, "timer of a scheduled job")
	case changed:
		pl.add(ActionRestart, tn, "schedule changed")
	}
}

// current plans a unit whose file on the board is current.
func (pl *planner) current(p *api.Pod, name string, u UnitState) {
	if u.NeedDaemonReload {
		pl.reload = append(pl.reload, name)
	}
	disabled := u.UnitFileState == "disabled"
	if disabled {
		pl.add(ActionEnable, name, "unit is not enabled")
	}
	policy := p.Spec.Template.RestartPolicy
	switch {
	case u.StoppedOnDisconnect():
		// Whatever the restart policy and exit status:
		// controller.ObservePod keeps such a pod Scheduled.
		pl.add(ActionStart, name, "unit was stopped by its board while cut off from the servers")
	case u.ActiveState != "inactive":
	case u.ExecMainStartTimestamp == "":
		pl.add(ActionStart, name, "unit was never started")
	case !disabled && u.LoadState == "loaded" && u.ExecMainStatus == 0 && (policy == "" || policy == api.RestartAlways):
		// Stopped by hand after a clean exit: controller.ObservePod
		// keeps such a pod Scheduled and expects it started again.
		pl.add(ActionStart, name, "unit was stopped; restart policy always")
	}
}

// stale plans the take-down of every observed unit no desired pod wants.
func (pl *planner) stale() {
	for name, u := range pl.seen {
		if pl.want[name] {
			continue
		}
		const why = "pod not placed on this node"
		if isRunning(u.ActiveState) {
			pl.add(ActionStop, name, why)
		}
		if u.FileHash != "" || u.UnitFileState == "enabled" {
			pl.add(ActionDisable, name, why)
		}
		if u.FileHash != "" {
			pl.acts = append(pl.acts, Action{Type: ActionRemove, Unit: name, Reason: why, Keep: pl.keep})
			pl.reload = append(pl.reload, name)
		}
		if u.ActiveState == "failed" {
			pl.add(ActionResetFailed, name, why)
		}
		// An overlapping job's runs go with it.
		pl.takeDown(u.Instances, why)
		if pod, ok := api.PodFromUnitName(name); ok && (u.TimerActiveState != "" || u.TimerFileHash != "") {
			// A scheduled job's timer goes with its service.
			tn := api.TimerName(pod)
			if isRunning(u.TimerActiveState) {
				pl.add(ActionStop, tn, why)
			}
			if u.TimerFileHash != "" {
				pl.add(ActionDisable, tn, why)
				pl.acts = append(pl.acts, Action{Type: ActionRemove, Unit: tn, Reason: why, Keep: pl.keep})
				pl.reload = append(pl.reload, tn)
			}
		}
	}
}

// daemonReload adds the one daemon-reload, if any reason calls for it, with
// the units it is for: every unit written or removed, and every listed
// unit systemd has a stale or no view of.
func (pl *planner) daemonReload(observed []UnitState) {
	if len(pl.reload) == 0 {
		return
	}
	slices.Sort(pl.reload)
	var forUnits []string
	for _, a := range pl.acts {
		if a.Type == ActionWrite || a.Type == ActionRemove {
			forUnits = append(forUnits, a.Unit)
		}
	}
	for _, u := range observed {
		if u.NeedDaemonReload || u.FileHash != "" && (u.LoadState == "" || u.LoadState == "not-found") {
			forUnits = append(forUnits, u.Unit)
		}
	}
	slices.Sort(forUnits)
	pl.acts = append(pl.acts, Action{Type: ActionDaemonReload, Reason: "unit files changed: " + strings.Join(pl.reload, ", "),
		For: slices.Compact(forUnits)})
}

// isRunning reports whether an ActiveState has a process to stop.
func isRunning(activeState string) bool {
	switch activeState {
	case "active", "activating", "reloading", "deactivating":
		return true
	}
	return false
}
