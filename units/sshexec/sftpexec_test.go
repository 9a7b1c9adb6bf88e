package sshexec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// sftpServer returns the local OpenSSH sftp-server, or skips.
func sftpServer(t *testing.T) string {
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no sftp-server installed")
	return ""
}

// TestSFTPCommand: with Config.SFTPCommand the executor speaks SFTP to
// that command over an exec session (as bootstrap does with
// "sudo -n sftp-server"), and a command that fails before speaking SFTP
// (sudo wanting a password) is reported with its stderr.
func TestSFTPCommand(t *testing.T) {
	server := sftpServer(t)
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	fakeSudo := filepath.Join(dir, "sudo")
	// A stand-in for sudo -n (the test runs as the login user already).
	script := "#!/bin/sh\n[ \"$1\" = -n ] || exit 2\nshift\necho \"$*\" >> " + marker + "\nexec \"$@\"\n"
	if err := os.WriteFile(fakeSudo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newTestExecutor(t, srv, func(c *Config) { c.SFTPCommand = fakeSudo + " -n " + server })
	ctx := testCtx(t)
	target := filepath.Join(dir, "sub", "file")
	if err := e.PutFile(ctx, "b1", target, []byte("hello\n"), 0o640, PutFileOptions{MkdirAll: true}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	got, err := e.ReadFile(ctx, "b1", target)
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile: %q, %v", got, err)
	}
	if st, err := os.Stat(target); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("stat %s: %v, %v", target, st, err)
	}
	ran, err := os.ReadFile(marker)
	if err != nil || strings.TrimSpace(string(ran)) != server {
		t.Fatalf("the SFTP command ran as %q (%v), want %q once", ran, err, server)
	}

	refuse := filepath.Join(dir, "refuse")
	if err := os.WriteFile(refuse, []byte("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e2 := newTestExecutor(t, srv, func(c *Config) { c.SFTPCommand = refuse })
	_, err = e2.ReadFile(ctx, "b1", target)
	if err == nil || !strings.Contains(err.Error(), "a password is required") {
		t.Fatalf("ReadFile through a refusing command: %v, want the command's stderr", err)
	}
}
