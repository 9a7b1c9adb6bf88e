package sshgate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/herd-dev/herd/units/sshexec"
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

// Decide returns the argv to exec for the client's request original
// (SSH_ORIGINAL_COMMAND, present says whether it was set at all). exists
// reports whether a file exists (os.Stat in Main).
func Decide(original string, present bool, exists func(string) bool) ([]string, error) {
	if original == sshexec.WrapperCommand {
		return []string{Shell, "-c", original}, nil
	}
	if !present || strings.TrimSpace(original) == "" {
		return nil, fmt.Errorf("%w: this key (the herd cluster SSH key) only runs herd's executor and sftp; no login shell", ErrRefused)
	}
	if isSFTP(original) {
		for _, p := range SFTPServerPaths {
			if exists(p) {
				return []string{p}, nil
			}
		}
		return nil, fmt.Errorf("herd ssh-gate: sftp requested but no sftp-server found (looked in %s): install openssh-sftp-server", strings.Join(SFTPServerPaths, ", "))
	}
	shown := original
	if len(shown) > 80 {
		shown = shown[:80] + "..."
	}
	return nil, fmt.Errorf("%w: %q: this key (the herd cluster SSH key) only runs herd's executor and sftp", ErrRefused, shown)
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

// Main is `herd ssh-gate`: it decides from the environment and replaces
// itself with the admitted program (keeping its PID, so the session's
// process group and stdin/stdout stay the program's), or prints why not to
// stderr and returns 1.
func Main(environ []string, stderr io.Writer) int {
	original, present := "", false
	var env []string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "SSH_ORIGINAL_COMMAND="); ok {
			original, present = v, true
			continue
		}
		env = append(env, kv)
	}
	argv, err := Decide(original, present, func(p string) bool {
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
