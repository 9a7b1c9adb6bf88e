package sshexec

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidConfig: Config.Validate failed.
	ErrInvalidConfig = errors.New("sshexec: invalid config")
	// ErrInvalidArgument: an argv, path, unit name or other input was
	// refused before anything was sent to a board.
	ErrInvalidArgument = errors.New("sshexec: invalid argument")
	// ErrHostKeyMismatch: the board presented a host key other than the
	// pinned one (or the one in known_hosts). The connection is refused.
	ErrHostKeyMismatch = errors.New("sshexec: host key mismatch")
	// ErrUnknownHost: no key is pinned for the node and known_hosts has no
	// entry for its address.
	ErrUnknownHost = errors.New("sshexec: unknown host key")
	// ErrNoHostKey: no key is pinned for the node and no known_hosts file
	// is configured.
	ErrNoHostKey = errors.New("sshexec: no host key to verify against")
	// ErrClosed: the Executor was closed.
	ErrClosed = errors.New("sshexec: executor closed")
	// ErrForgotten: the node was forgotten (Forget) while the operation
	// was connecting.
	ErrForgotten = errors.New("sshexec: node forgotten")
	// ErrBackoff: the node's last dials failed and the next attempt is not
	// due before the operation's deadline.
	ErrBackoff = errors.New("sshexec: reconnect backoff")
	// ErrConnectionLost: the connection broke while a command ran; whether
	// the command completed is unknown.
	ErrConnectionLost = errors.New("sshexec: connection lost")
	// ErrWrapper: the fixed remote wrapper could not run the command (for
	// example xargs refused an oversized argv); the command did not run.
	ErrWrapper = errors.New("sshexec: remote wrapper failed")
	// ErrOutputTooLarge: output beyond Config.MaxOutputBytes was dropped.
	ErrOutputTooLarge = errors.New("sshexec: output too large")
	// ErrFileTooLarge: ReadFile met a file beyond Config.MaxReadFileBytes.
	ErrFileTooLarge = errors.New("sshexec: file too large")
	// ErrUnsupported: the board's SFTP server lacks an extension PutFile
	// needs (posix-rename@openssh.com).
	ErrUnsupported = errors.New("sshexec: unsupported by remote sftp server")
)

// HostKeyMismatchError describes a refused host key. It matches
// ErrHostKeyMismatch with errors.Is.
type HostKeyMismatchError struct {
	Node string
	Addr string
	// Got is the SHA256 fingerprint the board presented.
	Got string
	// Want are the acceptable fingerprints.
	Want []string
	// Source is "pinned" or "known_hosts" (or "known_hosts (revoked)").
	Source string
}

// Error implements error.
func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("sshexec: host key mismatch for node %s (%s): got %s, %s %s",
		e.Node, e.Addr, e.Got, e.Source, strings.Join(e.Want, " or "))
}

// Is reports target == ErrHostKeyMismatch.
func (e *HostKeyMismatchError) Is(target error) bool { return target == ErrHostKeyMismatch }

// ExitError is returned by Stream and the systemd helpers when the remote
// command exits with a non-zero status. (Run reports the status in Result
// instead.)
type ExitError struct {
	Node   string
	Argv   []string
	Status int
	// Stderr holds what the command wrote to stderr (capped).
	Stderr []byte
}

// Error implements error.
func (e *ExitError) Error() string {
	cmd := strings.Join(e.Argv, " ")
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	msg := fmt.Sprintf("sshexec: node %s: %q exited with status %d", e.Node, cmd, e.Status)
	if s := strings.TrimSpace(string(e.Stderr)); s != "" {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[:i] + " ..."
		}
		msg += ": " + s
	}
	return msg
}
