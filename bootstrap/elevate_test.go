package bootstrap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/units/sshexec"
)

// TestSudoArgv: the elevated command is argv data: sudo -n --, then every
// element as it was, hostile ones included.
func TestSudoArgv(t *testing.T) {
	hostile := []string{"mkdir", "-p", "--", "/etc/herd; rm -rf /", "$(id)", "`id`", "-u root", "a\nb", "", "'\""}
	got := SudoArgv(hostile)
	want := append([]string{"sudo", "-n", "--"}, hostile...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SudoArgv (-want +got):\n%s", diff)
	}
	// The input is not changed, and the result does not alias it.
	got[3] = "x"
	if hostile[0] != "mkdir" {
		t.Error("SudoArgv changed its input")
	}

	var seen []string
	r := sudoRemote{fakeRun(func(argv []string) { seen = argv })}
	if _, err := r.Run(context.Background(), "b1", []string{"rm", "-f", "--", "/x y"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sudo", "-n", "--", "rm", "-f", "--", "/x y"}, seen); diff != "" {
		t.Errorf("sudoRemote ran (-want +got):\n%s", diff)
	}
}

type fakeRun func([]string)

func (f fakeRun) Run(_ context.Context, _ string, argv []string) (sshexec.Result, error) {
	f(argv)
	return sshexec.Result{}, nil
}
func (fakeRun) PutFile(context.Context, string, string, []byte, os.FileMode, ...sshexec.PutFileOptions) error {
	return nil
}
func (fakeRun) ReadFile(context.Context, string, string) ([]byte, error) { return nil, os.ErrNotExist }

// TestSudoSFTPCommand: only the known sftp-server paths make a command
// line (the login shell parses it).
func TestSudoSFTPCommand(t *testing.T) {
	got, err := SudoSFTPCommand("/usr/lib/openssh/sftp-server")
	if err != nil || got != "sudo -n /usr/lib/openssh/sftp-server" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"/tmp/sftp-server", "/usr/lib/openssh/sftp-server; id", "", "sftp-server"} {
		if got, err := SudoSFTPCommand(bad); err == nil {
			t.Errorf("%q: accepted as %q", bad, got)
		}
	}
}

func TestRenderSudoers(t *testing.T) {
	want := `# Written by herdctl bootstrap. The leader's executor logs in as herd-exec
# with the cluster SSH key, forced through herd ssh-gate, and may run
# herd's gate as root: nothing else.
Defaults:herd-exec !requiretty, !lecture
herd-exec ALL=(root) NOPASSWD: /usr/local/bin/herd ssh-gate --elevated wrapper, /usr/local/bin/herd ssh-gate --elevated sftp, /usr/local/bin/herd ssh-gate --elevated session
`
	if diff := cmp.Diff(want, string(RenderSudoers())); diff != "" {
		t.Errorf("sudoers (-want +got):\n%s", diff)
	}
}

func TestCheckAccount(t *testing.T) {
	if err := CheckAccount([]byte("herd-exec:x:998:998:herd executor:/var/lib/herd-exec:/bin/sh\n")); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"herd-exec:x:998:998::/home/herd-exec:/bin/sh", "other:x:1:1::/var/lib/herd-exec:/bin/sh", "garbage"} {
		if err := CheckAccount([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSudoProbeError(t *testing.T) {
	err := SudoProbeError("pi1", "pi", "pi1.local", 1, "sudo: a password is required\n")
	for _, s := range []string{"pi1", "a password is required", "give pi passwordless sudo", "NOPASSWD", "log in as root@pi1.local"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%v: lacks %q", err, s)
		}
	}
	if err := SudoProbeError("pi1", "pi", "pi1.local", 127, ""); !strings.Contains(err.Error(), "sudo is not installed") {
		t.Errorf("no sudo: %v", err)
	}
}

// TestBootstrapAsSudoUser: a login user that is not root (the fake id
// says so) gets every command through sudo -n -- and its files through
// `sudo -n sftp-server`; a user whose sudo wants a password fails in the
// probe with the fix, and nothing is written on that board.
func TestBootstrapAsSudoUser(t *testing.T) {
	l := newLab(t, "b1", "b2")
	ctx := runCtx(t)
	for _, n := range []string{"b1", "b2"} {
		writeFile(t, l.boards[n].bin, "nonroot", nil, 0o644)
	}
	writeFile(t, l.boards["b2"].bin, "password", nil, 0o644)
	o := l.options(t, map[string]*counting{}, "b1", "b2")
	o.Servers = 1
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Boards[0].Err; err != nil {
		t.Fatalf("b1: %v", err)
	}
	if err := res.Boards[1].Err; err == nil || !strings.Contains(err.Error(), "cannot use sudo without a password") || !strings.Contains(err.Error(), "log in as root@") {
		t.Errorf("b2: %v; want the password refusal with its fix", err)
	}
	if _, err := os.Stat(filepath.Join(l.boards["b2"].root, "usr/local/bin/herd")); !os.IsNotExist(err) {
		t.Errorf("b2 got the herd binary (%v)", err)
	}

	b1 := l.boards["b1"]
	for _, f := range []string{BinaryPath, SudoersPath, ExecAuthKeysPath, UnitPath} {
		if _, err := os.Stat(filepath.Join(b1.root, f)); err != nil {
			t.Errorf("b1: %v", err)
		}
	}
	var sftp, direct int
	for _, line := range strings.Split(strings.TrimSuffix(mustRead(t, filepath.Join(b1.bin, "sudo.log")), "\n"), "\n") {
		argv := strings.Split(strings.TrimSuffix(line, "\x00"), "\x00")
		switch {
		case cmp.Equal(argv, []string{"-n", "true"}):
		case cmp.Equal(argv, []string{"-n", "/usr/lib/openssh/sftp-server"}):
			sftp++
		case len(argv) > 2 && argv[0] == "-n" && argv[1] == "--":
			direct++
		default:
			t.Errorf("sudo ran as %q", argv)
		}
	}
	if sftp != 1 || direct < 10 {
		t.Errorf("sudo ran sftp-server %d times (want 1) and %d commands", sftp, direct)
	}
	// Every command after the probe's first two went through sudo: the
	// fake systemctl, useradd and visudo only ran under it.
	if !strings.Contains(mustRead(t, filepath.Join(b1.bin, "systemctl.log")), "start") {
		t.Error("herd.service was not started")
	}

	// Idempotent as a sudo user too.
	remotes := map[string]*counting{}
	o = l.options(t, remotes, "b1")
	o.Servers = 1
	res, err = Run(ctx, o)
	if err != nil || res.Boards[0].Err != nil {
		t.Fatal(err, res.Boards[0].Err)
	}
	if w := remotes["b1"].take(); len(w) > 0 {
		t.Errorf("second run wrote %q", w)
	}
}
