package units

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
)

// UnitState is what the executor observed of one herd-* unit on a board.
//
// Most fields are systemd properties of the same name, as printed by
//
//	systemctl show --property=Id,LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload,MainPID,NRestarts,ExecMainStatus,ExecMainStartTimestamp herd-*.service
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
	// FileHash is Hash of the unit file's bytes on the board, or "" when
	// there is no file. Not a systemd property: sshexec's ShowUnits computes
	// it (sha256sum of /etc/systemd/system/herd-*.service in the same round
	// trip). It must be filled in for every unit that has a file, or Plan
	// rewrites and restarts it.
	FileHash string
}

// ShowProperties returns the systemd properties UnitState holds, in the
// order to pass to `systemctl show --property=`.
func ShowProperties() []string {
	return []string{"Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload",
		"MainPID", "NRestarts", "ExecMainStatus", "ExecMainStartTimestamp"}
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

// ActionType is one unit operation on a board.
type ActionType string

// Action types, in the order Plan emits them.
const (
	// ActionStop is `systemctl stop`.
	ActionStop ActionType = "stop"
	// ActionDisable is `systemctl disable`.
	ActionDisable ActionType = "disable"
	// ActionRemove deletes the unit file, the files listed in its
	// X-Herd-Files (which the executor reads with ReadMeta first) and its
	// environment file EnvFilePath(Unit) (a missing one is not an error).
	ActionRemove ActionType = "remove"
	// ActionWriteEnv writes Action.Content, the pod's environment file
	// (RenderEnvFile), to Action.Path (EnvFilePath(Unit)) with Action.Mode
	// (0600), owned by root, atomically. Plan emits it right before
	// the ActionWrite of the same unit, in the same phase order.
	ActionWriteEnv ActionType = "write-env"
	// ActionWrite writes Action.Content as the unit file (atomically:
	// temporary file and rename), after the pod's files are in place.
	ActionWrite ActionType = "write"
	// ActionDaemonReload is `systemctl daemon-reload`; Unit is empty.
	ActionDaemonReload ActionType = "daemon-reload"
	// ActionResetFailed is `systemctl reset-failed`, so a removed failed
	// unit is forgotten.
	ActionResetFailed ActionType = "reset-failed"
	// ActionEnable is `systemctl enable`.
	ActionEnable ActionType = "enable"
	// ActionStart is `systemctl start`.
	ActionStart ActionType = "start"
	// ActionRestart is `systemctl restart`.
	ActionRestart ActionType = "restart"
)

// Action is one step of a plan: what to do to which unit, and why.
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
}

// EnvFileMode is the permission of a pod's environment file: read and
// written by root only, since it holds the pod's secrets.
const EnvFileMode os.FileMode = 0o600

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
	}
	return 8 // start, restart
}

// Plan compares the pods placed on one board (desired: every pod the store
// places on this node, whatever its phase) with the herd units observed
// there, and returns the actions that make the board run exactly those pods,
// in this fixed order:
//
//  1. stop, disable and remove units of pods not placed here (fencing);
//  2. write the environment files, then the unit files, of new and changed
//     units;
//  3. one daemon-reload, if anything was written or removed or systemd has
//     a stale view of a file;
//  4. reset-failed for removed units that had failed;
//  5. enable, then start new units and restart changed ones.
//
// Plan never restarts a unit just because it failed: whether a failed pod
// is replaced is the controller's decision. An unchanged unit is started
// only if systemd never started it (its file was written but the previous
// pass did not get to start it), or if it stopped after a clean exit (exit
// status 0, stopped by hand) while its pod's restart policy is always and
// nothing else is planned for it. Observed units whose names are not
// herd unit names are ignored.
//
// A pod that cannot be rendered gets no actions, so a unit it already has
// is left alone; the returned error (errors.Join of *RenderError values)
// names every such pod, and the actions for the others are still valid.
func Plan(desired []*api.Pod, observed []UnitState) ([]Action, error) {
	seen := make(map[string]UnitState, len(observed))
	for _, u := range observed {
		if !IsHerdUnit(u.Unit) {
			continue
		}
		if _, dup := seen[u.Unit]; !dup {
			seen[u.Unit] = u
		}
	}

	var (
		acts   []Action
		errs   []error
		reload []string // why a daemon-reload is needed
		want   = make(map[string]bool, len(desired))
	)
	add := func(t ActionType, unit, reason string) {
		acts = append(acts, Action{Type: t, Unit: unit, Reason: reason})
	}

	for _, p := range desired {
		if p == nil {
			continue
		}
		name := api.UnitName(p.Metadata.Name)
		if want[name] {
			continue
		}
		want[name] = true
		content, err := Render(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		envFile, err := RenderEnvFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		writeEnv := func(reason string) {
			acts = append(acts, Action{Type: ActionWriteEnv, Unit: name, Reason: reason,
				Content: envFile, Path: EnvFilePath(name), Mode: EnvFileMode})
		}
		u, ok := seen[name]
		switch {
		case !ok || u.FileHash == "":
			writeEnv("new pod placed on this node")
			acts = append(acts, Action{Type: ActionWrite, Unit: name, Reason: "new pod placed on this node", Content: content})
			reload = append(reload, name)
			add(ActionEnable, name, "new pod placed on this node")
			if isRunning(u.ActiveState) {
				add(ActionRestart, name, "unit file was missing while the unit ran")
			} else {
				add(ActionStart, name, "new pod placed on this node")
			}
		case u.FileHash != Hash(content):
			writeEnv("pod spec changed")
			acts = append(acts, Action{Type: ActionWrite, Unit: name, Reason: "pod spec changed", Content: content})
			reload = append(reload, name)
			if u.UnitFileState == "disabled" {
				add(ActionEnable, name, "unit is not enabled")
			}
			add(ActionRestart, name, "pod spec changed")
		case u.LoadState == "" || u.LoadState == "not-found":
			// Written by a pass that stopped before daemon-reload.
			reload = append(reload, name)
			add(ActionEnable, name, "unit file was written but never loaded")
			add(ActionStart, name, "unit file was written but never loaded")
		default:
			if u.NeedDaemonReload {
				reload = append(reload, name)
			}
			disabled := u.UnitFileState == "disabled"
			if disabled {
				add(ActionEnable, name, "unit is not enabled")
			}
			policy := p.Spec.Template.RestartPolicy
			switch {
			case u.ActiveState != "inactive":
			case u.ExecMainStartTimestamp == "":
				add(ActionStart, name, "unit was never started")
			case !disabled && u.LoadState == "loaded" && u.ExecMainStatus == 0 && (policy == "" || policy == api.RestartAlways):
				// Stopped by hand after a clean exit: controller.ObservePod
				// keeps such a pod Scheduled and expects it started again.
				add(ActionStart, name, "unit was stopped; restart policy always")
			}
		}
	}

	for name, u := range seen {
		if want[name] {
			continue
		}
		const why = "pod not placed on this node"
		if isRunning(u.ActiveState) {
			add(ActionStop, name, why)
		}
		if u.FileHash != "" || u.UnitFileState == "enabled" {
			add(ActionDisable, name, why)
		}
		if u.FileHash != "" {
			add(ActionRemove, name, why)
			reload = append(reload, name)
		}
		if u.ActiveState == "failed" {
			add(ActionResetFailed, name, why)
		}
	}

	if len(reload) > 0 {
		slices.Sort(reload)
		add(ActionDaemonReload, "", "unit files changed: "+strings.Join(reload, ", "))
	}
	slices.SortStableFunc(acts, func(a, b Action) int {
		if d := phase(a.Type) - phase(b.Type); d != 0 {
			return d
		}
		return strings.Compare(a.Unit, b.Unit)
	})
	return acts, errors.Join(errs...)
}

// isRunning reports whether an ActiveState has a process to stop.
func isRunning(activeState string) bool {
	switch activeState {
	case "active", "activating", "reloading", "deactivating":
		return true
	}
	return false
}
