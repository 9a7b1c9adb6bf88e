package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/herd-dev/herd/internal/clock"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// HostKeyLookup tells the executor where a node's sshd listens and which
// host key it must present.
//
// LookupHost is called on every dial (the first operation on a node and every
// reconnect), possibly from several goroutines at once, so it must be safe for
// concurrent use and should be fast (a map lookup over gossip metadata).
// addr is "host:port" (":22" is assumed when the port is missing). hostKey is
// the key pinned for the node; it may be nil when nothing is pinned, and then
// the known_hosts files of Config.KnownHostsFiles decide. A node with neither
// is refused (ErrNoHostKey): host keys are always verified.
type HostKeyLookup interface {
	LookupHost(node string) (addr string, hostKey ssh.PublicKey, err error)
}

// HostKeyLookupFunc adapts a function to HostKeyLookup.
type HostKeyLookupFunc func(node string) (addr string, hostKey ssh.PublicKey, err error)

// LookupHost calls f(node).
func (f HostKeyLookupFunc) LookupHost(node string) (string, ssh.PublicKey, error) { return f(node) }

// Config configures an Executor. Start from DefaultConfig and set User,
// Signers and HostKeys.
type Config struct {
	// User is the login user on every board. Default "root".
	User string
	// Signers authenticate the executor (the cluster SSH key: LoadKey, or
	// AgentSigners). At least one is required.
	Signers []ssh.Signer
	// HostKeys gives each node's SSH address and pinned host key. Required.
	HostKeys HostKeyLookup
	// KnownHostsFiles are OpenSSH known_hosts files consulted for nodes whose
	// lookup returns no pinned key. Optional; read once by New.
	KnownHostsFiles []string

	// DialTimeout bounds TCP connect plus SSH handshake. Default 5s.
	DialTimeout time.Duration
	// KeepaliveInterval is the period of "keepalive@openssh.com" requests on
	// each connection. Default 1s.
	KeepaliveInterval time.Duration
	// KeepaliveMax is how many keepalive intervals may pass without a reply
	// before the connection is declared dead and closed. Default 3, so a dead
	// peer is noticed within about 3–4 intervals.
	KeepaliveMax int
	// KeepaliveReplies asks each board's sshd to answer every keepalive and
	// times Silence by those answers. False (the default), on Linux: the
	// keepalives want no reply and Silence reads the kernel's TCP
	// acknowledgements of what was sent (TCP_INFO). Both prove the board
	// reachable; acknowledgements cost the executor no wake-up per reply,
	// but a board whose kernel answers while its sshd is frozen is not
	// silent (its commands fail at their deadlines instead). Replies are
	// used anyway where the kernel does not report TCP_INFO (other
	// systems, qemu-user) or the connection is not TCP.
	KeepaliveReplies bool
	// MaxSessionsPerNode bounds concurrent exec sessions (Run, Stream and
	// the helpers built on them) on one node; further callers wait. The SFTP
	// subsystem holds one more channel for the life of the connection, so
	// keep this below sshd's MaxSessions (default 10). Default 8.
	MaxSessionsPerNode int
	// BackoffBase and BackoffMax shape the reconnect backoff after failed
	// dials: BackoffBase·2^(n-1) capped at BackoffMax, then jittered into
	// [d/2, d). Defaults 250ms and 5s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Jitter returns a number in [0, 1) for the backoff jitter; it may be
	// called from several goroutines at once. Nil means math/rand/v2.
	// Tests inject a fixed source.
	Jitter func() float64
	// Clock times the dial backoff (when the next attempt may start, and
	// the wait for it). Nil means clock.RealClock().
	Clock clock.Clock
	// MaxOutputBytes caps what Run keeps of each of stdout and stderr (and
	// what Stream keeps of stderr). Default 8 MiB.
	MaxOutputBytes int
	// MaxReadFileBytes caps ReadFile. Default 16 MiB.
	MaxReadFileBytes int64
	// DialContext opens the TCP connection. Nil means a net.Dialer. Tests and
	// tunnels may replace it.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives connection events (dial, reconnect, keepalive
	// timeout). Nil discards.
	Logger *slog.Logger

	// BoardHelper is the herd binary on the boards, run as
	// `BoardHelper board put-file|rm-file ...` by WriteFileNoFollow and
	// RemoveNoFollow. Empty means DefaultBoardHelper (where bootstrap
	// installs it). Tests point it at a freshly built binary.
	BoardHelper string
	// StageDir is the root-only directory (created 0700) where
	// WriteFileNoFollow stages content over SFTP before the helper moves it
	// into place. It must sit in a tree only root can write. Empty means
	// DefaultStageDir.
	StageDir string

	// BoardSession runs commands and file writes through one long-lived
	// `herd board session` per connection (package boardsession) instead
	// of a process chain per command; a board without it (no Hello) gets
	// the wrapper. Only for logins whose commands run as root on boards
	// with herd installed (the placer's executor account through the
	// gate, or root): a sudo user's session would run as that user.
	BoardSession bool

	// SFTPCommand, when set, runs the SFTP server as an exec request with
	// this command line instead of the "sftp" subsystem, and speaks SFTP
	// over the session's stdin and stdout. bootstrap uses it to reach root
	// files as a sudo user: "sudo -n /usr/lib/openssh/sftp-server". The
	// board's login shell parses it, so it must be built from constants
	// only, never from user data. Empty (the default) uses the subsystem.
	SFTPCommand string
}

// Defaults of Config.BoardHelper and Config.StageDir.
const (
	DefaultBoardHelper = "/usr/local/bin/herd"
	DefaultStageDir    = "/run/herd/stage"
)

// DefaultConfig returns a Config with every default filled in; the caller
// still sets Signers and HostKeys.
func DefaultConfig() Config {
	return Config{
		User:               "root",
		DialTimeout:        5 * time.Second,
		KeepaliveInterval:  time.Second,
		KeepaliveMax:       3,
		MaxSessionsPerNode: 8,
		BackoffBase:        250 * time.Millisecond,
		BackoffMax:         5 * time.Second,
		MaxOutputBytes:     8 << 20,
		MaxReadFileBytes:   16 << 20,
	}
}

// Validate reports the first problem with c, naming the field.
func (c Config) Validate() error {
	switch {
	case c.User == "":
		return fmt.Errorf("%w: User is empty", ErrInvalidConfig)
	case c.BoardHelper != "" && checkPath(c.BoardHelper) != nil:
		return fmt.Errorf("%w: BoardHelper %q must be an absolute, clean path", ErrInvalidConfig, c.BoardHelper)
	case c.StageDir != "" && checkPath(c.StageDir) != nil:
		return fmt.Errorf("%w: StageDir %q must be an absolute, clean path", ErrInvalidConfig, c.StageDir)
	case len(c.Signers) == 0:
		return fmt.Errorf("%w: no Signers (use LoadKey or AgentSigners)", ErrInvalidConfig)
	case c.HostKeys == nil:
		return fmt.Errorf("%w: HostKeys is nil", ErrInvalidConfig)
	case c.DialTimeout <= 0:
		return fmt.Errorf("%w: DialTimeout %v must be > 0", ErrInvalidConfig, c.DialTimeout)
	case c.KeepaliveInterval <= 0:
		return fmt.Errorf("%w: KeepaliveInterval %v must be > 0", ErrInvalidConfig, c.KeepaliveInterval)
	case c.KeepaliveMax < 1:
		return fmt.Errorf("%w: KeepaliveMax %d must be >= 1", ErrInvalidConfig, c.KeepaliveMax)
	case c.MaxSessionsPerNode < 1:
		return fmt.Errorf("%w: MaxSessionsPerNode %d must be >= 1", ErrInvalidConfig, c.MaxSessionsPerNode)
	case c.BackoffBase <= 0:
		return fmt.Errorf("%w: BackoffBase %v must be > 0", ErrInvalidConfig, c.BackoffBase)
	case c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: BackoffMax %v is below BackoffBase %v", ErrInvalidConfig, c.BackoffMax, c.BackoffBase)
	case c.MaxOutputBytes < 1:
		return fmt.Errorf("%w: MaxOutputBytes %d must be >= 1", ErrInvalidConfig, c.MaxOutputBytes)
	case c.MaxReadFileBytes < 1:
		return fmt.Errorf("%w: MaxReadFileBytes %d must be >= 1", ErrInvalidConfig, c.MaxReadFileBytes)
	}
	for i, s := range c.Signers {
		if s == nil {
			return fmt.Errorf("%w: Signers[%d] is nil", ErrInvalidConfig, i)
		}
	}
	return nil
}

// LoadKey reads an unencrypted OpenSSH/PEM private key file. A passphrase
// protected key is refused: load it into ssh-agent and use AgentSigners.
func LoadKey(path string) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sshexec: load key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("sshexec: load key %s: key is passphrase-protected; add it to ssh-agent and use AgentSigners", path)
		}
		return nil, fmt.Errorf("sshexec: load key %s: %w", path, err)
	}
	return s, nil
}

// AgentSigners returns the keys held by the ssh-agent at $SSH_AUTH_SOCK. The
// signers sign through the agent connection, so keep the returned Closer
// open as long as the Executor uses them and close it afterwards.
func AgentSigners() ([]ssh.Signer, io.Closer, error) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, errors.New("sshexec: ssh-agent: SSH_AUTH_SOCK is not set")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("sshexec: ssh-agent at %s: %w", sock, err)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("sshexec: ssh-agent at %s: list keys: %w", sock, err)
	}
	if len(signers) == 0 {
		conn.Close()
		return nil, nil, fmt.Errorf("sshexec: ssh-agent at %s holds no keys", sock)
	}
	return signers, conn, nil
}
