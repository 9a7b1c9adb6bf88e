package sshexec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/herd-dev/herd/units/sshexec/boardfs"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

// ErrRefused is matched by the errors of WriteFileNoFollow and
// RemoveNoFollow when the board's helper refused the path or mode: a
// symbolic link (or a non-directory) in a directory component, a directory
// at the path, or setuid/setgid bits without AllowSetID. Nothing was
// written or removed. The error text carries the helper's reason.
var ErrRefused = errors.New("sshexec: refused by the board")

// NoFollowOptions tunes WriteFileNoFollow.
type NoFollowOptions struct {
	// Mode is the file's mode as octal bits (0644, 04755, ...).
	Mode uint32
	// AllowSetID permits the setuid (04000) and setgid (02000) bits;
	// without it the board refuses them (ErrRefused).
	AllowSetID bool
	// ParentMode, when not 0, is the mode of the file's own directory:
	// created with it, or chown'ed to root and chmod'ed to it if it exists
	// (herd's env directory is 0700).
	ParentMode uint32
}

func (e *Executor) helper() string {
	if e.cfg.BoardHelper != "" {
		return e.cfg.BoardHelper
	}
	return DefaultBoardHelper
}

func (e *Executor) stageDir() string {
	if e.cfg.StageDir != "" {
		return e.cfg.StageDir
	}
	return DefaultStageDir
}

// WriteFileNoFollow writes content to p on node without following a
// symbolic link in any component of p, race-free: the content is staged
// over SFTP in Config.StageDir (root-only), then `herd board put-file`
// (Config.BoardHelper, run as argv through the wrapper) walks p with
// openat(O_NOFOLLOW|O_DIRECTORY) per component, writes a temporary file in
// the final directory and renames it over p (see package boardfs). Missing
// directories are created 0755. A refusal matches ErrRefused; the staged
// copy is removed either way.
func (e *Executor) WriteFileNoFollow(ctx context.Context, node, p string, content []byte, opt NoFollowOptions) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if opt.Mode&^0o7777 != 0 || opt.ParentMode&^0o777 != 0 {
		return fmt.Errorf("%w: mode %o / parent mode %o for %s", ErrInvalidArgument, opt.Mode, opt.ParentMode, p)
	}
	if err, ok := e.fileSession(ctx, node, boardsession.Put(p, content, opt.Mode, opt.ParentMode, opt.AllowSetID)); ok {
		return err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("sshexec: stage name: %w", err)
	}
	stage := e.stageDir()
	staged := path.Join(stage, "put-"+hex.EncodeToString(rnd[:]))
	err := e.withSFTP(ctx, node, func(sc *sftp.Client) error {
		if err := ensurePrivateDir(sc, stage); err != nil {
			return fmt.Errorf("sshexec: node %s: stage dir %s: %w", node, stage, err)
		}
		if err := writeTemp(sc, staged, content, 0o600); err != nil {
			sc.Remove(staged)
			return fmt.Errorf("sshexec: node %s: stage %s: %w", node, p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	argv := []string{e.helper(), "board", "put-file", "-mode", fmt.Sprintf("%04o", opt.Mode)}
	if opt.AllowSetID {
		argv = append(argv, "-allow-setid")
	}
	if opt.ParentMode != 0 {
		argv = append(argv, "-parent-mode", fmt.Sprintf("%04o", opt.ParentMode))
	}
	argv = append(argv, "-from", staged, "--", p)
	err = e.runHelper(ctx, node, argv)
	if err != nil {
		// The helper removes the staged file once it opened it; if it
		// never ran, do it here (best effort, bounded).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		e.withSFTP(cctx, node, func(sc *sftp.Client) error { return sc.Remove(staged) })
		cancel()
	}
	return err
}

// RemoveNoFollow removes p on node without following a symbolic link in
// any component (`herd board rm-file`): a link at p itself is removed, not
// its target; a link where a directory is expected is refused (ErrRefused).
// A missing path is not an error.
func (e *Executor) RemoveNoFollow(ctx context.Context, node, p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if err, ok := e.fileSession(ctx, node, boardsession.Remove(p)); ok {
		return err
	}
	return e.runHelper(ctx, node, []string{e.helper(), "board", "rm-file", "--", p})
}

// runHelper runs the board helper and maps its exit status.
func (e *Executor) runHelper(ctx context.Context, node string, argv []string) error {
	res, err := e.Run(ctx, node, argv)
	if err != nil {
		return err
	}
	switch res.ExitStatus {
	case 0:
		return nil
	case boardfs.RefusedExit:
		return fmt.Errorf("%w: node %s: %s", ErrRefused, node, bytes.TrimSpace(res.Stderr))
	}
	return &ExitError{Node: node, Argv: argv, Status: res.ExitStatus, Stderr: res.Stderr}
}

// ensurePrivateDir makes dir a root-only directory (0700), creating it and
// its parents. Only root can write the tree it lives in (StageDir's
// contract), so checking with Lstat here is not racy.
func ensurePrivateDir(sc *sftp.Client, dir string) error {
	st, err := sc.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := sc.MkdirAll(dir); err != nil {
			return err
		}
		st, err = sc.Lstat(dir)
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("is not a directory (%v)", st.Mode())
	}
	if st.Mode().Perm() != 0o700 {
		return sc.Chmod(dir, 0o700)
	}
	return nil
}

// ProbeCommand is a readiness exec check to run on a board in a pod's
// unit context.
type ProbeCommand struct {
	// User runs the command; empty means root (a root pod).
	User string
	// WorkingDir is the unit's WorkingDirectory; empty means "/".
	WorkingDir string
	// EnvironmentFile is the unit's EnvironmentFile (read by systemd as
	// root, so the command sees the pod's environment); empty for none. A
	// missing file is ignored.
	EnvironmentFile string
	// Timeout, when positive, is enforced by systemd (RuntimeMaxSec) as
	// well as by the caller's ctx, so a hung check does not outlive it.
	Timeout time.Duration
	// Argv is the check itself.
	Argv []string
}

// ProbeArgv returns the argv that runs c as a transient systemd service
// with the pod's user, working directory and environment file:
//
//	systemd-run --quiet --pipe --wait --collect [--uid=USER]
//	  --property=NoNewPrivileges=yes --property=WorkingDirectory=DIR
//	  --property=EnvironmentFile=-FILE --property=RuntimeMaxSec=N -- ARGV...
//
// (systemd ≥ 236). systemd resolves USER and its groups exactly as for the
// unit's User=; the check runs outside the leader's root session, with
// NoNewPrivileges so a setuid binary cannot take it back to root. Values
// travel as argv: no shell parses them. The service manager would expand
// $VAR and ${VAR} in a transient service's arguments as in ExecStart, so
// every '$' after ARGV[0] is written "$$" and the check gets its arguments
// byte for byte (its environment still holds the pod's variables). ARGV[0]
// may not contain '$'.
func ProbeArgv(c ProbeCommand) ([]string, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" || c.Argv[0][0] == '-' || strings.Contains(c.Argv[0], "$") {
		return nil, fmt.Errorf("%w: probe argv %q (argv[0] must be set, not start with '-' nor contain '$')", ErrInvalidArgument, c.Argv)
	}
	if c.User != "" && (c.User[0] == '-' || bytes.ContainsAny([]byte(c.User), "=/ \t\n\x00")) {
		return nil, fmt.Errorf("%w: probe user %q", ErrInvalidArgument, c.User)
	}
	argv := []string{"systemd-run", "--quiet", "--pipe", "--wait", "--collect"}
	if c.User != "" && c.User != "root" {
		argv = append(argv, "--uid="+c.User, "--property=NoNewPrivileges=yes")
	}
	wd := c.WorkingDir
	if wd == "" {
		wd = "/"
	}
	if err := checkPath(wd); err != nil && wd != "/" {
		return nil, err
	}
	argv = append(argv, "--property=WorkingDirectory="+wd)
	if c.EnvironmentFile != "" {
		if err := checkPath(c.EnvironmentFile); err != nil {
			return nil, err
		}
		argv = append(argv, "--property=EnvironmentFile=-"+c.EnvironmentFile)
	}
	if c.Timeout > 0 {
		secs := int64((c.Timeout + time.Second - 1) / time.Second)
		argv = append(argv, "--property=RuntimeMaxSec="+strconv.FormatInt(secs, 10))
	}
	argv = append(argv, "--", c.Argv[0])
	for _, a := range c.Argv[1:] {
		argv = append(argv, strings.ReplaceAll(a, "$", "$$"))
	}
	return argv, nil
}

// Probe runs a readiness check on node as ProbeArgv describes and returns
// its exit status; err is nil whenever it ran to completion. systemd-run
// exits with the command's status.
func (e *Executor) Probe(ctx context.Context, node string, c ProbeCommand) (int, error) {
	argv, err := ProbeArgv(c)
	if err != nil {
		return -1, err
	}
	res, err := e.Run(ctx, node, argv)
	if err != nil {
		return -1, err
	}
	return res.ExitStatus, nil
}
