package placer

import (
	"context"
	"os"

	"github.com/herd-dev/herd/units"
)

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
	// old file or the new one), with the given mode, creating missing
	// parent directories. mode holds permission bits, possibly with
	// os.ModeSetuid, os.ModeSetgid and os.ModeSticky.
	PutFile(ctx context.Context, node, path string, content []byte, mode os.FileMode) error
	// Remove deletes path on node; a path that does not exist is not an
	// error.
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
	// Run runs argv on node without a shell and returns its exit status;
	// err is nil whenever the command ran to completion, whatever its
	// status. The placer uses it for exec readiness checks.
	Run(ctx context.Context, node string, argv []string) (exitStatus int, err error)
}

// Systemctl verbs the placer uses.
const (
	VerbDaemonReload = "daemon-reload"
	VerbEnable       = "enable"
	VerbDisable      = "disable"
	VerbStart        = "start"
	VerbStop         = "stop"
	VerbRestart      = "restart"
	VerbResetFailed  = "reset-failed"
)
