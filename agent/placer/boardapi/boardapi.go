// Package boardapi holds the types of the placer's Executor interface that
// its implementations (the agent's SSH adapter, package fakeboard) share
// with the placer without importing it.
package boardapi

import (
	"errors"
	"os"
	"time"
)

// ErrRefused is matched (errors.Is) by a PutFile or Remove error when the
// board refused the path or mode: a symbolic link (or a non-directory)
// where a directory is expected in any component, a directory at the path,
// or setuid/setgid bits without AllowSetID. Nothing was written or
// removed, and retrying will not help until the board or the pod changes.
var ErrRefused = errors.New("board refused the file")

// FileOptions says how PutFile writes a file.
type FileOptions struct {
	// Mode holds permission bits, possibly with os.ModeSetuid,
	// os.ModeSetgid and os.ModeSticky.
	Mode os.FileMode
	// AllowSetID permits os.ModeSetuid and os.ModeSetgid (the template's
	// allow_setid); without it such a mode is refused (ErrRefused).
	AllowSetID bool
	// ParentMode, when not 0, is the mode of the file's own directory,
	// owned by root: created with it, or chmod'ed to it if it exists (the
	// env directory, 0700).
	ParentMode os.FileMode
}

// ProbeCommand is an exec readiness check, run on the board in the pod's
// unit context: as the pod's user (root only for a root pod), in its
// working directory, with its environment file.
type ProbeCommand struct {
	// Unit is the pod's unit name, for logs.
	Unit string
	// User is the pod's user; empty means root.
	User string
	// WorkingDir is the pod's working directory; empty means "/".
	WorkingDir string
	// EnvironmentFile is the pod's env file on the board; a missing file
	// is ignored.
	EnvironmentFile string
	// Timeout is the check's timeout.
	Timeout time.Duration
	// Argv is the check.
	Argv []string
}
