package sshgate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

// Command is the forced command bootstrap writes into authorized_keys.
const Command = "/usr/local/bin/herd ssh-gate"

// Shell runs the wrapper command, as sshd would with a POSIX login shell.
const Shell = "/bin/sh"

// SFTPServerPaths are where OpenSSH's sftp-server lives on the
// distributions herd runs on (Debian/Ubuntu/Raspberry Pi OS, Fedora/RHEL,
// Arch/Alpine and others), in the order they are tried.
var SFTPServerPaths = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/lib/ssh/sftp-server",
	"/usr/libexec/sftp-server",
	"/usr/lib/sftp-server",
}

// ErrRefused: the gate does not admit the requested command.
var ErrRefused = errors.New("herd ssh-gate: refused")

// Kinds of request the gate admits, as they appear after --elevated.
const (
	KindWrapper = "wrapper"
	KindSFTP    = "sftp"
	// KindSession is the leader's board session (boardsession.Command).
	KindSession = "session"
)

// Binary is the herd binary the gate re-execs through sudo; it must be
// the path the sudoers drop-in names.
const Binary = "/usr/local/bin/herd"

// ElevatedFlag makes the gate run an already admitted request as root.
const ElevatedFlag = "--elevated"

// SudoPaths are where sudo is looked for, in order. The gate never uses
// PATH: the path is part of what it runs as root.
var SudoPaths = []string{"/usr/bin/sudo", "/bin/sudo", "/usr/local/bin/sudo"}

// ElevatedArgv is the sudo command line (after the sudo binary) with which
// an unprivileged gate re-execs itself for kind. The sudoers drop-in
// bootstrap writes admits exactly these lines (SudoersCommands).
func ElevatedArgv(kind string) []string {
	return []string{"-n", Binary, "ssh-gate", ElevatedFlag, kind}
}

// SudoersCommands are the commands (with their arguments, as sudoers
// matches them) the executor account may run as root: the gate's
// elevated forms and nothing else.
func SudoersCommands() []string {
	var out []string
	for _, k := range []string{KindWrapper, KindSFTP, KindSession} {
		out = append(out, strings.Join(ElevatedArgv(k)[1:], " "))
	}
	return out
}

// Decide returns the argv to exec, as root, for the client's request
// original (SSH_ORIGINAL_COMMAND, present says whether it was set at all).
// exists reports whether a file exists (os.Stat in Main).
func Decide(original string, present bool, exists func(string) bool) ([]string, error) {
	kind, err := Classify(original, present)
	if err != nil {
		return nil, err
	}
	return argvFor(kind, exists)
}

// Classify says which admitted request original is (KindWrapper,
// KindSession or KindSFTP), or why it is refused.
func Classify(original string, present bool) (string, error) {
	if original == sshexec.WrapperCommand {
		return KindWrapper, nil
	}
	if original == boardsession.Command {
		return KindSession, nil
	}
	if !present || strings.TrimSpace(original) == "" {
		return "", fmt.Errorf("%w: this key (the herd cluster SSH key) only runs herd's executor and sftp; no login shell", ErrRefused)
	}
	if isSFTP(original) {
		return KindSFTP, nil
	}
	shown := original
	if len(shown) > 80 {
		shown = shown[:80] + "..."
	}
	return "", fmt.Errorf("%w: %q: this key (the herd cluster SSH key) only runs herd's executor and sftp", ErrRefused, shown)
}

// argvFor is the program an admitted request of kind runs as root.
func argvFor(kind string, exists func(string) bool) ([]string, error) {
	switch kind {
	case KindWrapper:
		return []string{Shell, "-c", sshexec.WrapperCommand}, nil
	case KindSession:
		return []string{Binary, "board", "session"}, nil
	}
	for _, p := range SFTPServerPaths {
		if exists(p) {
			return []string{p}, nil
		}
	}
	return nil, fmt.Errorf("herd ssh-gate: sftp requested but no sftp-server found (looked in %s): install openssh-sftp-server", strings.Join(SFTPServerPaths, ", "))
}

// Gate decides what `herd ssh-gate ARGS...` runs, for a process with
// effective uid euid:
//
//   - no arguments (the forced command): the request in original is
//     classified; as root the admitted program runs directly (a key
//     authorised for root, as older bootstraps did), otherwise the gate
//     re-execs itself as root with `sudo -n herd ssh-gate --elevated KIND`
//     (the executor account, whose sudoers entry admits only that);
//   - `--elevated wrapper|sftp|session`: as root only, runs that kind's
//     program.
//     The request was checked by the unprivileged gate; sudo cleared the
//     environment, so nothing of the client's reaches this one.
func Gate(args []string, original string, present bool, euid int, exists func(string) bool) ([]string, error) {
	switch {
	case len(args) == 0:
		kind, err := Classify(original, present)
		if err != nil {
			return nil, err
		}
		if euid == 0 {
			return argvFor(kind, exists)
		}
		for _, p := range SudoPaths {
			if exists(p) {
				return append([]string{p}, ElevatedArgv(kind)...), nil
			}
		}
		return nil, fmt.Errorf("herd ssh-gate: running as uid %d and sudo is not installed (looked in %s): the executor account elevates with sudo", euid, strings.Join(SudoPaths, ", "))
	case len(args) == 2 && args[0] == ElevatedFlag && (args[1] == KindWrapper || args[1] == KindSFTP || args[1] == KindSession):
		if euid != 0 {
			return nil, fmt.Errorf("%w: %s %s runs only as root (through sudo), not as uid %d", ErrRefused, ElevatedFlag, args[1], euid)
		}
		return argvFor(args[1], exists)
	}
	return nil, fmt.Errorf("%w: arguments %q: usage: herd ssh-gate [%s %s|%s|%s]", ErrRefused, args, ElevatedFlag, KindWrapper, KindSFTP, KindSession)
}

// isSFTP reports whether original is what sshd passes for the sftp
// subsystem: "internal-sftp", "sftp" or an sftp-server path, optionally
// followed by the options sshd_config gives it.
func isSFTP(original string) bool {
	f := strings.Fields(original)
	if len(f) == 0 {
		return false
	}
	switch f[0] {
	case "internal-sftp", "sftp", "sftp-server":
		return true
	}
	for _, p := range SFTPServerPaths {
		if f[0] == p {
			return true
		}
	}
	return false
}

// Main is `herd ssh-gate ARGS...`: it decides from its arguments and the
// environment (Gate) and replaces itself with the admitted program
// (keeping its PID, so the session's process group and stdin/stdout stay
// the program's), or prints why not to stderr and returns 1.
func Main(args, environ []string, stderr io.Writer) int {
	original, present := "", false
	var env []string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "SSH_ORIGINAL_COMMAND="); ok {
			original, present = v, true
			continue
		}
		env = append(env, kv)
	}
	argv, err := Gate(args, original, present, os.Geteuid(), func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular()
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	err = syscall.Exec(argv[0], argv, env)
	fmt.Fprintf(stderr, "herd ssh-gate: exec %s: %v\n", argv[0], err)
	return 1
}
