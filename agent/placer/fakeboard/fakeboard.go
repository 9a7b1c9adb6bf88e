package fakeboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/placer/boardapi"
	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/units"
)

// UnitDir is where the fake systemd reads unit files.
const UnitDir = "/etc/systemd/system"

// Errors returned by board calls, wrapped with the node and the call.
var (
	// ErrUnreachable: the board was marked unreachable.
	ErrUnreachable = errors.New("fakeboard: board unreachable")
	// ErrCommand: a systemctl command failed, as a non-zero exit would.
	ErrCommand = errors.New("fakeboard: command failed")
)

// Call is one Executor call a board received.
type Call struct {
	// Op is ShowUnits, PutFile, Remove, ReadFile, systemctl or Probe.
	Op string
	// Args are the path (PutFile, Remove, ReadFile), the verb and units
	// (systemctl), or the check's argv (Probe).
	Args []string
	// Probe is the whole check of a Probe call (user, working directory,
	// environment file), nil for other calls.
	Probe *boardapi.ProbeCommand
	// Err is the error the call returned, nil on success.
	Err error
}

// String renders the call as "systemctl start herd-web-1.service".
func (c Call) String() string {
	if len(c.Args) == 0 {
		return c.Op
	}
	return c.Op + " " + strings.Join(c.Args, " ")
}

// Fleet is many fake boards by node name, implementing the placer's
// Executor. It is safe for concurrent use.
type Fleet struct {
	mu     sync.Mutex
	boards map[string]*Board
}

// New returns a Fleet with no boards yet.
func New() *Fleet { return &Fleet{boards: make(map[string]*Board)} }

// Board returns the board of node, creating an empty one (no files, no
// units, reachable) on first use.
func (f *Fleet) Board(node string) *Board {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boards[node]
	if b == nil {
		b = &Board{name: node, files: make(map[string]file), loaded: make(map[string]*unit), enabled: make(map[string]bool),
			startAs: make(map[string][2]string), links: make(map[string]string), dirModes: make(map[string]os.FileMode)}
		f.boards[node] = b
	}
	return b
}

// Nodes returns the names of the boards created so far, sorted.
func (f *Fleet) Nodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.boards))
}

// ShowUnits lists the herd units of node's board.
func (f *Fleet) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	b := f.Board(node)
	var out []units.UnitState
	err := b.do(ctx, Call{Op: "ShowUnits"}, func() error {
		out = b.showLocked()
		return nil
	})
	return out, err
}

// ShowUnitsMarked is ShowUnits plus the mark of the last report the
// board began (Board.Report), as the board's seq file would give it.
func (f *Fleet) ShowUnitsMarked(ctx context.Context, node string) ([]units.UnitState, unitreport.Mark, error) {
	b := f.Board(node)
	var (
		out  []units.UnitState
		mark unitreport.Mark
	)
	err := b.do(ctx, Call{Op: "ShowUnits"}, func() error {
		mark = b.markLocked()
		out = b.showLocked()
		return nil
	})
	return out, mark, err
}

// ReportEpoch is the epoch of the fake boards' reports.
const ReportEpoch = 1

// Report does what a board's agent does for a unit report, without a
// call: begins the next report (its mark is after every earlier one) and
// returns it with the units at that moment.
func (b *Board) Report() (unitreport.Mark, []units.UnitState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reportSeq++
	return b.markLocked(), b.showLocked()
}

func (b *Board) markLocked() unitreport.Mark {
	if b.reportSeq == 0 {
		return unitreport.Mark{}
	}
	return unitreport.Mark{Epoch: ReportEpoch, Seq: b.reportSeq}
}

// PutFile stores content at path on node's board (parents need no
// creating), as the real board helper would: a symbolic link (see Symlink)
// in a directory component of path, or a setuid/setgid mode without
// opt.AllowSetID, is refused with boardapi.ErrRefused and nothing is
// written; a link at path itself is replaced. opt.ParentMode is recorded
// for path's directory (DirMode).
func (f *Fleet) PutFile(ctx context.Context, node, p string, content []byte, opt boardapi.FileOptions) error {
	b := f.Board(node)
	return b.do(ctx, Call{Op: "PutFile", Args: []string{p}}, func() error {
		if !path.IsAbs(p) || path.Clean(p) != p {
			return fmt.Errorf("path %q is not absolute and clean", p)
		}
		if err := b.linkInPathLocked(p); err != nil {
			return err
		}
		if opt.Mode&(os.ModeSetuid|os.ModeSetgid) != 0 && !opt.AllowSetID {
			return fmt.Errorf("%w: mode %v of %s has setuid/setgid bits", boardapi.ErrRefused, opt.Mode, p)
		}
		delete(b.links, p)
		b.files[p] = file{content: bytes.Clone(content), mode: opt.Mode}
		if opt.ParentMode != 0 {
			b.dirModes[path.Dir(p)] = opt.ParentMode
		}
		return nil
	})
}

// linkInPathLocked refuses a path with a symbolic link in a directory
// component.
func (b *Board) linkInPathLocked(p string) error {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := b.links[d]; ok {
			return fmt.Errorf("%w: %s is a symbolic link", boardapi.ErrRefused, d)
		}
	}
	return nil
}

// Remove deletes path on node's board; a missing path is not an error. A
// symbolic link in a directory component is refused (boardapi.ErrRefused);
// a link at path is removed itself.
func (f *Fleet) Remove(ctx context.Context, node, p string) error {
	b := f.Board(node)
	return b.do(ctx, Call{Op: "Remove", Args: []string{p}}, func() error {
		if err := b.linkInPathLocked(p); err != nil {
			return err
		}
		delete(b.links, p)
		delete(b.files, p)
		return nil
	})
}

// ReadFile returns path on node's board; a missing file matches
// fs.ErrNotExist.
func (f *Fleet) ReadFile(ctx context.Context, node, p string) ([]byte, error) {
	b := f.Board(node)
	var out []byte
	err := b.do(ctx, Call{Op: "ReadFile", Args: []string{p}}, func() error {
		fl, ok := b.files[p]
		if !ok {
			return fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
		}
		out = bytes.Clone(fl.content)
		return nil
	})
	return out, err
}

// Systemctl runs a systemctl verb on node's board: daemon-reload, enable,
// disable, start, stop, restart or reset-failed.
func (f *Fleet) Systemctl(ctx context.Context, node, verb string, unitNames ...string) error {
	b := f.Board(node)
	return b.do(ctx, Call{Op: "systemctl", Args: append([]string{verb}, unitNames...)}, func() error {
		return b.systemctlLocked(verb, unitNames)
	})
}

// Probe runs a readiness check on node's board through the board's probe
// function (see SetProbe); by default every check exits 0.
func (f *Fleet) Probe(ctx context.Context, node string, c boardapi.ProbeCommand) (int, error) {
	b := f.Board(node)
	var status int
	c.Argv = slices.Clone(c.Argv)
	err := b.do(ctx, Call{Op: "Probe", Args: slices.Clone(c.Argv), Probe: &c}, func() error {
		if b.probe != nil {
			probe := b.probe
			b.mu.Unlock()
			defer b.mu.Lock()
			var err error
			status, err = probe(c)
			return err
		}
		return nil
	})
	return status, err
}

// Board is one fake board. Its methods are safe for concurrent use.
type Board struct {
	name string

	mu          sync.Mutex
	unreachable bool
	hang        bool          // calls block until their ctx is done
	silence     time.Duration // what Fleet.Silence reports
	hook        func(Call) error
	probe       func(boardapi.ProbeCommand) (int, error)
	calls       []Call
	files       map[string]file
	links       map[string]string      // symbolic links: path → target
	dirModes    map[string]os.FileMode // ParentMode of PutFile, by directory
	loaded      map[string]*unit       // what systemd has in memory
	enabled     map[string]bool
	startAs     map[string][2]string // unit → ActiveState, SubState after start
	pids        int
	starts      int
	reportSeq   uint64 // the seq of the last report begun (Report)
	// cutStopped are the units the board's agent stopped while cut off
	// from the servers (StopOnDisconnect): their marks in
	// units.DisconnectDir, dropped once the unit runs again.
	cutStopped map[string]bool
}

type file struct {
	content []byte
	mode    os.FileMode
}

// unit is systemd's in-memory view of one unit.
type unit struct {
	content        []byte // the file as last loaded; nil if none
	loadState      string // loaded or not-found
	activeState    string
	subState       string
	mainPID        int
	nRestarts      int
	execMainStatus int
	startTimestamp string
}

// do runs one call: records it, fails it if the board is unreachable or
// the hook says so, else runs fn under the board's lock.
func (b *Board) do(ctx context.Context, c Call, fn func() error) error {
	b.mu.Lock()
	hook := b.hook
	b.mu.Unlock()
	err := ctx.Err()
	if err == nil && hook != nil {
		err = hook(c)
	}
	b.mu.Lock()
	hang := b.hang
	b.mu.Unlock()
	if err == nil && hang {
		<-ctx.Done()
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && b.unreachable {
		err = ErrUnreachable
	}
	if err == nil {
		err = fn()
	}
	if err != nil {
		err = fmt.Errorf("fakeboard: node %s: %s: %w", b.name, c, err)
	}
	c.Err = err
	b.calls = append(b.calls, c)
	return err
}

func (b *Board) unitPath(name string) string { return path.Join(UnitDir, name) }

// showLocked lists herd units: loaded ones and unit files.
func (b *Board) showLocked() []units.UnitState {
	names := make(map[string]bool)
	for n := range b.loaded {
		if units.IsHerdUnit(n) {
			names[n] = true
		}
	}
	for p := range b.files {
		if dir, n := path.Split(p); path.Clean(dir) == UnitDir && units.IsHerdUnit(n) {
			names[n] = true
		}
	}
	var out []units.UnitState
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if s, ok := b.stateLocked(n); ok {
			out = append(out, s)
		}
	}
	return out
}

// stateLocked is what ShowUnits reports for unit name.
func (b *Board) stateLocked(name string) (units.UnitState, bool) {
	f, hasFile := b.files[b.unitPath(name)]
	u := b.loaded[name]
	if u == nil && !hasFile {
		return units.UnitState{}, false
	}
	s := units.UnitState{Unit: name, DisconnectMark: b.cutStopped[name]}
	if hasFile {
		s.FileHash = units.Hash(f.content)
	}
	if u == nil {
		return s, true // a file systemd has not loaded
	}
	s.LoadState, s.ActiveState, s.SubState = u.loadState, u.activeState, u.subState
	s.MainPID, s.NRestarts, s.ExecMainStatus = u.mainPID, u.nRestarts, u.execMainStatus
	s.ExecMainStartTimestamp = u.startTimestamp
	if hasFile {
		s.UnitFileState = "disabled"
		if b.enabled[name] {
			s.UnitFileState = "enabled"
		}
		s.NeedDaemonReload = !bytes.Equal(f.content, u.content)
	} else {
		s.NeedDaemonReload = u.content != nil
	}
	return s, true
}

func running(active string) bool {
	switch active {
	case "active", "activating", "reloading", "deactivating":
		return true
	}
	return false
}

func (b *Board) systemctlLocked(verb string, names []string) error {
	if verb == "daemon-reload" {
		if len(names) != 0 {
			return fmt.Errorf("%w: daemon-reload takes no units", ErrCommand)
		}
		b.reloadLocked()
		return nil
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: systemctl %s: no units", ErrCommand, verb)
	}
	var errs []error
	for _, n := range names {
		if err := b.verbLocked(verb, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b *Board) reloadLocked() {
	for p, f := range b.files {
		dir, n := path.Split(p)
		if path.Clean(dir) != UnitDir || !strings.HasSuffix(n, ".service") {
			continue
		}
		u := b.loaded[n]
		if u == nil {
			u = &unit{activeState: "inactive", subState: "dead"}
			b.loaded[n] = u
		}
		u.content, u.loadState = bytes.Clone(f.content), "loaded"
	}
	for n, u := range b.loaded {
		if _, ok := b.files[b.unitPath(n)]; ok {
			continue
		}
		if u.activeState == "inactive" {
			delete(b.loaded, n)
			continue
		}
		u.content, u.loadState = nil, "not-found"
	}
}

// reloadOneLocked loads unit n from its file, as systemd does on demand
// for a unit it has not loaded.
func (b *Board) reloadOneLocked(n string) {
	f, ok := b.files[b.unitPath(n)]
	if !ok {
		return
	}
	b.loaded[n] = &unit{activeState: "inactive", subState: "dead", content: bytes.Clone(f.content), loadState: "loaded"}
}

func (b *Board) verbLocked(verb, n string) error {
	_, hasFile := b.files[b.unitPath(n)]
	u := b.loaded[n]
	switch verb {
	case "enable-now":
		// --no-reload: the symlinks, no daemon-reload, then start.
		if !hasFile {
			return fmt.Errorf("%w: enable %s: unit file does not exist", ErrCommand, n)
		}
		b.enabled[n] = true
		return b.verbLocked("start", n)
	case "enable", "disable":
		if !hasFile {
			return fmt.Errorf("%w: %s %s: unit file does not exist", ErrCommand, verb, n)
		}
		if verb == "enable" {
			if !b.enabled[n] {
				// systemctl enable reloads systemd when it made a link.
				b.enabled[n] = true
				b.reloadLocked()
			}
		} else {
			delete(b.enabled, n)
		}
		return nil
	case "start", "restart":
		if u == nil && hasFile {
			// systemd loads a unit it has never seen from disk.
			b.reloadOneLocked(n)
			u = b.loaded[n]
		}
		if u == nil || u.loadState != "loaded" {
			return fmt.Errorf("%w: %s %s: unit not found (daemon-reload?)", ErrCommand, verb, n)
		}
		if verb == "start" && running(u.activeState) {
			return nil
		}
		return b.startLocked(n, u)
	case "stop":
		if u == nil {
			return fmt.Errorf("%w: stop %s: unit not loaded", ErrCommand, n)
		}
		if running(u.activeState) {
			u.activeState, u.subState, u.mainPID = "inactive", "dead", 0
		}
		b.gcLocked(n, u)
		return nil
	case "reset-failed":
		if u == nil {
			return fmt.Errorf("%w: reset-failed %s: unit not loaded", ErrCommand, n)
		}
		if u.activeState == "failed" {
			u.activeState, u.subState = "inactive", "dead"
		}
		b.gcLocked(n, u)
		return nil
	}
	return fmt.Errorf("%w: unknown verb %q", ErrCommand, verb)
}

// gcLocked forgets an inactive unit whose file is gone, as systemd does.
func (b *Board) gcLocked(n string, u *unit) {
	if u.loadState == "not-found" && u.activeState == "inactive" {
		delete(b.loaded, n)
	}
}

func (b *Board) startLocked(n string, u *unit) error {
	b.starts++
	delete(b.cutStopped, n) // the board's agent drops the mark once it runs
	u.nRestarts, u.execMainStatus = 0, 0
	u.startTimestamp = fmt.Sprintf("Thu 2026-01-01 00:00:00.%06d UTC", b.starts)
	st := [2]string{"active", "running"}
	if s, ok := b.startAs[n]; ok {
		st = s
	}
	u.activeState, u.subState = st[0], st[1]
	u.mainPID = 0
	if running(u.activeState) {
		b.pids++
		u.mainPID = 1000 + b.pids
	}
	if u.activeState == "failed" {
		u.execMainStatus = 1
		return fmt.Errorf("%w: start %s: the process failed", ErrCommand, n)
	}
	return nil
}

// SetUnreachable makes every call to the board fail with ErrUnreachable
// (true) or work again (false). Calls are still logged.
func (b *Board) SetUnreachable(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unreachable = down
}

// SetHang makes every call to the board block until its ctx is done and
// then fail with ctx's error (true), as on a pooled connection to a board
// that lost power, or answer again (false). Calls are still logged.
func (b *Board) SetHang(hang bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hang = hang
}

// SetSilence sets what Fleet.Silence reports for the board: how long its
// connection has had a keepalive unanswered.
func (b *Board) SetSilence(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silence = d
}

// Silence implements placer.Silencer: what SetSilence set for node's
// board (0 by default).
func (f *Fleet) Silence(node string) time.Duration {
	b := f.Board(node)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.silence
}

// SetHook installs f, run before every call (without the board's lock
// held, so it may use the board or anything else); a non-nil error fails
// the call. nil removes it.
func (b *Board) SetHook(f func(Call) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = f
}

// SetProbe installs the function Probe calls (without the board's lock
// held); nil makes every check exit 0.
func (b *Board) SetProbe(f func(boardapi.ProbeCommand) (int, error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probe = f
}

// Symlink puts a symbolic link at p on the board (test setup, as a pod's
// user could; not logged). PutFile and Remove refuse paths through it.
func (b *Board) Symlink(p, target string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.links[p] = target
}

// DirMode returns the ParentMode a PutFile gave directory d.
func (b *Board) DirMode(d string) (os.FileMode, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.dirModes[d]
	return m, ok
}

// StartAs makes every later start or restart of unit leave it in the given
// ActiveState and SubState (such as "activating", "start"; "failed",
// "failed" also fails the start command) instead of active/running. Empty
// states restore the default.
func (b *Board) StartAs(unitName, activeState, subState string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if activeState == "" {
		delete(b.startAs, unitName)
		return
	}
	b.startAs[unitName] = [2]string{activeState, subState}
}

// Calls returns a copy of the calls the board received, in order.
func (b *Board) Calls() []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// CallStrings returns the calls as strings (Call.String), in order.
func (b *Board) CallStrings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, len(b.calls))
	for i, c := range b.calls {
		out[i] = c.String()
	}
	return out
}

// CallCount returns how many calls of op (all calls when op is empty) the
// board received.
func (b *Board) CallCount(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.calls {
		if op == "" || c.Op == op {
			n++
		}
	}
	return n
}

// ResetCalls empties the call log.
func (b *Board) ResetCalls() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = nil
}

// File returns the content of path on the board.
func (b *Board) File(p string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.files[p]
	return bytes.Clone(f.content), ok
}

// FileMode returns the mode path was written with.
func (b *Board) FileMode(p string) (os.FileMode, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.files[p]
	return f.mode, ok
}

// Files returns every path on the board, sorted.
func (b *Board) Files() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.files))
}

// WriteFile puts a file on the board directly (test setup; not logged).
func (b *Board) WriteFile(p string, content []byte, mode os.FileMode) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.files[p] = file{content: bytes.Clone(content), mode: mode}
}

// Install sets up a running unit directly (test setup; not logged): its
// file in UnitDir, loaded, enabled and started.
func (b *Board) Install(unitName string, content []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.files[b.unitPath(unitName)] = file{content: bytes.Clone(content), mode: 0o644}
	b.reloadLocked()
	b.enabled[unitName] = true
	b.startLocked(unitName, b.loaded[unitName])
}

// Unit returns what ShowUnits reports for a unit, false if the board has
// neither its file nor systemd state for it.
func (b *Board) Unit(name string) (units.UnitState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stateLocked(name)
}

// Units returns what ShowUnits would report, without logging a call.
func (b *Board) Units() []units.UnitState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.showLocked()
}

// ActiveUnits returns the units whose process runs or is coming up
// (ActiveState active, activating, reloading or deactivating), sorted.
func (b *Board) ActiveUnits() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for n, u := range b.loaded {
		if running(u.activeState) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// EnabledUnits returns the enabled units, sorted.
func (b *Board) EnabledUnits() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.enabled))
}

// Fail makes a loaded unit failed (systemd gave up on it) with the exit
// status of its main process.
func (b *Board) Fail(unitName string, exitStatus int) error {
	return b.set(unitName, func(u *unit) {
		u.activeState, u.subState, u.mainPID, u.execMainStatus = "failed", "failed", 0, exitStatus
	})
}

// StopOnDisconnect does what the board's agent does to a unit with
// on_disconnect stop_after while the board is cut off from the servers:
// marks it (units.UnitState.DisconnectMark) and stops it, its process
// ending with exitStatus (15 for SIGTERM). The mark goes when the unit is
// started again.
func (b *Board) StopOnDisconnect(unitName string, exitStatus int) error {
	return b.set(unitName, func(u *unit) {
		if b.cutStopped == nil {
			b.cutStopped = make(map[string]bool)
		}
		b.cutStopped[unitName] = true
		u.activeState, u.subState, u.mainPID, u.execMainStatus = "inactive", "dead", 0, exitStatus
	})
}

// Crash makes a running unit's process exit with exitStatus and systemd
// restart it: NRestarts grows, MainPID changes, the unit stays active.
func (b *Board) Crash(unitName string, exitStatus int) error {
	return b.set(unitName, func(u *unit) {
		b.pids++
		u.nRestarts++
		u.execMainStatus, u.mainPID = exitStatus, 1000+b.pids
		u.activeState, u.subState = "active", "running"
	})
}

// SetState sets a loaded unit's ActiveState and SubState (and clears
// MainPID unless the unit runs).
func (b *Board) SetState(unitName, activeState, subState string) error {
	return b.set(unitName, func(u *unit) {
		u.activeState, u.subState = activeState, subState
		if !running(activeState) {
			u.mainPID = 0
		}
	})
}

func (b *Board) set(unitName string, fn func(*unit)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.loaded[unitName]
	if u == nil {
		return fmt.Errorf("fakeboard: node %s: unit %s is not loaded", b.name, unitName)
	}
	fn(u)
	return nil
}

// NeedsReload reports whether some unit file differs from what systemd
// loaded (a daemon-reload is due).
func (b *Board) NeedsReload() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.showLocked() {
		if s.NeedDaemonReload || (s.LoadState == "" && s.FileHash != "") {
			return true
		}
	}
	return false
}
