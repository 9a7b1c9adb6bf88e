package placer

import (
	"context"
	"time"

	"github.com/herd-dev/herd/agent/placer/boardapi"
	"github.com/herd-dev/herd/units"
)

// Types of the Executor interface, defined in package boardapi so that
// implementations need not import the placer.
type (
	// FileOptions says how PutFile writes a file.
	FileOptions = boardapi.FileOptions
	// ProbeCommand is an exec readiness check in a pod's unit context.
	ProbeCommand = boardapi.ProbeCommand
)

// ErrFileRefused is matched by a PutFile or Remove error when the board
// refused the path or mode (a symbolic link in a directory component,
// setuid/setgid without the opt-in); see boardapi.ErrRefused.
var ErrFileRefused = boardapi.ErrRefused

// Executor acts on boards: the placer's only way to reach them. The agent
// adapts the SSH executor (units/sshexec) to it; package fakeboard fakes it
// in memory.
//
// Concurrency: the placer calls an Executor concurrently for different
// nodes, but never concurrently for the same node: one worker per node makes
// every call for that node, one after the other (readiness exec checks
// included). Implementations must be safe for that use. Every method takes
// ctx first and should return promptly with an error once ctx is done; an
// unreachable board should fail fast (the placer retries with backoff).
type Executor interface {
	// ShowUnits lists every herd-*.service unit on node: those systemd has
	// loaded and those that only have a unit file, with FileHash set to
	// units.Hash of the unit file's bytes for every unit that has a file
	// (Plan rewrites and restarts a unit whose FileHash is empty). A unit
	// file systemd does not know yet may come back with only Unit and
	// FileHash set.
	ShowUnits(ctx context.Context, node string) ([]units.UnitState, error)
	// PutFile writes content to path on node atomically (readers see the
	// old file or the new one), with opt's mode, creating missing parent
	// directories, owned by root. It must not follow a symbolic link in
	// any component of path, race-free (a pod user may own a parent
	// directory): a link where a directory is expected, or a setuid/setgid
	// mode without opt.AllowSetID, is refused with an error matching
	// ErrFileRefused and nothing is written. A link at path itself is
	// replaced, not written through.
	PutFile(ctx context.Context, node, path string, content []byte, opt FileOptions) error
	// Remove deletes path on node without following a symbolic link in
	// any component (a link at path is itself removed; one in a directory
	// component is refused, matching ErrFileRefused); a path that does
	// not exist is not an error.
	Remove(ctx context.Context, node, path string) error
	// ReadFile returns the content of path on node; a missing file is an
	// error matching fs.ErrNotExist.
	ReadFile(ctx context.Context, node, path string) ([]byte, error)
	// Systemctl runs `systemctl VERB UNITS...` on node. verb is one of
	// daemon-reload (no units), enable, disable, start, stop, restart and
	// reset-failed; the others get at least one unit, and several units
	// of one verb may come in one call. A command that fails (non-zero
	// exit) is an error.
	Systemctl(ctx context.Context, node, verb string, units ...string) error
	// Probe runs an exec readiness check on node without a shell, in the
	// pod's unit context: as c.User (root only when it is empty), in
	// c.WorkingDir, with c.EnvironmentFile, never in the executor's own
	// root session. It returns the check's exit status; err is nil
	// whenever the check ran to completion, whatever its status.
	Probe(ctx context.Context, node string, c ProbeCommand) (exitStatus int, err error)
}

// Silencer is an optional Executor method: Silence(node) is how long the
// executor's connection to node has had a keepalive (or any request that
// proves the peer alive, such as the TCP connect of a dial) unanswered, 0
// when nothing is outstanding. A witness fails at once once it exceeds
// Config.WitnessSilence, so a powered-off board is judged dead without
// waiting out Config.WitnessTimeout. It must be cheap and safe to call
// concurrently with the node's other calls.
type Silencer interface {
	Silence(node string) time.Duration
}

// Warmer is an optional Executor method: Warm(ctx, node) makes the
// node's next calls cheap (for SSH: dials the board and starts its board
// session) without doing anything on it. A new leader's worker warms a
// reporting board whose first pass needs no call, so a pod bound there
// right after the leader changed is not held up by the dial. It may be
// called concurrently with the node's other calls; its error is only
// logged.
type Warmer interface {
	Warm(ctx context.Context, node string) error
}

// Systemctl verbs the placer uses.
const (
	VerbDaemonReload = "daemon-reload"
	VerbEnable       = "enable"
	VerbEnableNow    = "enable-now" // systemctl enable --now
	VerbDisable      = "disable"
	VerbStart        = "start"
	VerbStop         = "stop"
	VerbRestart      = "restart"
	VerbResetFailed  = "reset-failed"
)
