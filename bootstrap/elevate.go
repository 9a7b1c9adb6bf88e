package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshgate"
)

// The executor account: the user the leader's executor logs in as on
// every board. It has no password and no key but the cluster SSH key
// (forced through herd ssh-gate), and may run as root only the gate's two
// elevated command lines (Sudoers).
const (
	ExecUser         = "herd-exec"
	ExecHome         = "/var/lib/herd-exec"
	ExecShell        = "/bin/sh"
	ExecAuthKeysPath = ExecHome + "/.ssh/authorized_keys"
	// SudoersPath is the executor account's sudoers drop-in. sudo skips
	// files in /etc/sudoers.d whose names hold a '.', so SudoersStage (in
	// /etc/herd) is where it is written and checked with `visudo -cf`
	// before it is renamed into place.
	SudoersPath  = "/etc/sudoers.d/herd"
	SudoersStage = "/etc/herd/sudoers.new"
)

// SudoArgv is argv run as root with `sudo -n`: no password prompt (sudo
// fails instead), and "--" so that no element of argv is ever taken as an
// option of sudo. The result is argv data for the executor's wrapper,
// never a shell string.
func SudoArgv(argv []string) []string {
	return append([]string{"sudo", "-n", "--"}, argv...)
}

// SudoSFTPCommand is the exec request that runs the board's sftp-server
// as root for a login user that is not root. server must be one of
// sshgate.SFTPServerPaths: the command line is parsed by the login shell,
// so it is made of constants only.
func SudoSFTPCommand(server string) (string, error) {
	if !slices.Contains(sshgate.SFTPServerPaths, server) {
		return "", fmt.Errorf("bootstrap: sftp-server %q is not one of the known paths", server)
	}
	return "sudo -n " + server, nil
}

// sudoRemote runs every command of a Remote through SudoArgv. Its files go
// through the Remote's own SFTP connection, which the executor runs as
// `sudo -n sftp-server` (SudoSFTPCommand).
type sudoRemote struct{ Remote }

func (s sudoRemote) Run(ctx context.Context, node string, argv []string) (sshexec.Result, error) {
	return s.Remote.Run(ctx, node, SudoArgv(argv))
}

// RenderSudoers is the executor account's sudoers drop-in: herd-exec may
// run, as root and without a password, exactly the gate's elevated
// command lines (sshgate.SudoersCommands; sudoers matches the arguments
// too, so no other argument list is admitted).
func RenderSudoers() []byte {
	var b strings.Builder
	b.WriteString("# Written by herdctl bootstrap. The leader's executor logs in as " + ExecUser + "\n")
	b.WriteString("# with the cluster SSH key, forced through herd ssh-gate, and may run\n")
	b.WriteString("# herd's gate as root: nothing else.\n")
	b.WriteString("Defaults:" + ExecUser + " !requiretty, !lecture\n")
	b.WriteString(ExecUser + " ALL=(root) NOPASSWD: " + strings.Join(sshgate.SudoersCommands(), ", ") + "\n")
	return []byte(b.String())
}

// AccountArgv creates the executor account: a system user and group with
// no password ('*' matches no password yet is not "locked", which sshd
// refuses without PAM), the home ExecHome (made by bootstrap, root-owned,
// so the account cannot change its own authorized_keys) and a POSIX shell
// for sshd to run the forced command with.
func AccountArgv() []string {
	return []string{"useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", ExecHome, "--shell", ExecShell, "--password", "*",
		"--comment", "herd executor", ExecUser}
}

// CheckAccount checks `getent passwd herd-exec` output: the account must
// have ExecHome as its home (a different account of that name is not
// herd's).
func CheckAccount(getent []byte) error {
	f := strings.Split(strings.TrimSpace(string(getent)), ":")
	if len(f) != 7 || f[0] != ExecUser {
		return fmt.Errorf("bootstrap: getent passwd %s: unexpected output %q", ExecUser, getent)
	}
	if f[5] != ExecHome {
		return fmt.Errorf("bootstrap: user %s exists with home %s, not %s: it is not herd's executor account (remove it or rename it)", ExecUser, f[5], ExecHome)
	}
	return nil
}

// SudoProbeError explains a board where the login user cannot use sudo
// without a password: `sudo -n true` exited with status (127: no sudo).
func SudoProbeError(board, user, host string, status int, stderr string) error {
	if status == 127 {
		return fmt.Errorf("bootstrap: %s: sudo is not installed: herd needs it (apt-get install sudo, as root)", board)
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", status)
	}
	return fmt.Errorf("bootstrap: %s: %s cannot use sudo without a password (sudo -n true: %s): give %s passwordless sudo "+
		"(as root: echo '%s ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/010_%s-nopasswd; chmod 0440 /etc/sudoers.d/010_%s-nopasswd) or log in as root@%s",
		board, user, msg, user, user, user, user, host)
}
