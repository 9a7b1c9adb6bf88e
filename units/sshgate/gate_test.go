package sshgate

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

func TestDecide(t *testing.T) {
	debian := func(p string) bool { return p == "/usr/lib/openssh/sftp-server" }
	fedora := func(p string) bool { return p == "/usr/libexec/openssh/sftp-server" }
	none := func(string) bool { return false }
	w := sshexec.WrapperCommand
	for _, tc := range []struct {
		name     string
		original string
		present  bool
		exists   func(string) bool
		want     []string
		refused  bool
	}{
		{"wrapper", w, true, debian, []string{"/bin/sh", "-c", w}, false},
		{"board session", boardsession.Command, true, debian, []string{"/usr/local/bin/herd", "board", "session"}, false},
		{"board session plus more", boardsession.Command + " --x", true, debian, nil, true},
		{"board session of another binary", "/tmp/herd board session", true, debian, nil, true},
		{"internal-sftp", "internal-sftp", true, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"internal-sftp with options", "internal-sftp -l INFO", true, fedora, []string{"/usr/libexec/openssh/sftp-server"}, false},
		{"sftp", "sftp", true, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"sftp-server path", "/usr/lib/openssh/sftp-server", true, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"sftp-server path, options dropped", "/usr/libexec/openssh/sftp-server -d /", true, fedora, []string{"/usr/libexec/openssh/sftp-server"}, false},
		{"login shell", "", false, debian, nil, true},
		{"blank command", "  ", true, debian, nil, true},
		{"other command", "id", true, debian, nil, true},
		{"wrapper plus more", w + "; id", true, debian, nil, true},
		{"wrapper with a trailing newline", w + "\n", true, debian, nil, true},
		{"wrapper prefix", w[:len(w)-1], true, debian, nil, true},
		{"other sftp-server path", "/tmp/sftp-server", true, debian, nil, true},
		{"sftp path with a shell", "/usr/lib/openssh/sftp-server;id", true, debian, nil, true},
		{"scp", "scp -t /root", true, debian, nil, true},
		{"sftp without a server", "internal-sftp", true, none, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decide(tc.original, tc.present, tc.exists)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("admitted as %q", got)
				}
				if errors.Is(err, ErrRefused) != tc.refused {
					t.Fatalf("err %v, refused %v, want %v", err, errors.Is(err, ErrRefused), tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMain lets the test binary act as `herd ssh-gate` for TestGateProcess.
func TestMain(m *testing.M) {
	if os.Getenv("HERD_SSHGATE_TEST") == "1" {
		os.Exit(Main(nil, os.Environ(), os.Stderr))
	}
	os.Exit(m.Run())
}

// TestGateProcess runs the gate as a real process, as sshd would: the
// wrapper request runs the argv it reads from stdin; anything else exits 1
// with a message and runs nothing.
func TestGateProcess(t *testing.T) {
	for _, p := range []string{"dd", "xargs"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed", p)
		}
	}
	run := func(original string, stdin string) (string, string, int) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "HERD_SSHGATE_TEST=1", "SSH_ORIGINAL_COMMAND="+original)
		// Its own session, as under sshd: the wrapper signals its process
		// group when its stdin (the SSH channel, its lifeline) closes, which
		// must not reach the test. stdin stays open until the gate exits.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(in, stdin); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	argv := "echo\x00gate ok\x00sh\x00"
	out, errOut, code := run(sshexec.WrapperCommand, "12\n"+argv[:12])
	if code != 0 || out != "gate ok\n" {
		t.Errorf("wrapper: stdout %q, stderr %q, status %d; want \"gate ok\\n\", 0", out, errOut, code)
	}
	marker := t.TempDir() + "/ran"
	out, errOut, code = run("touch "+marker, "")
	if code != 1 || out != "" || !strings.Contains(errOut, "only runs herd's executor and sftp") {
		t.Errorf("other command: stdout %q, stderr %q, status %d; want a refusal, 1", out, errOut, code)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the refused command ran")
	}
}

// TestGateElevation: as another user than root the gate admits exactly
// what it admits as root, and turns it into one of the two sudo command
// lines the sudoers drop-in names; --elevated runs only as root and only
// for those two kinds.
func TestGateElevation(t *testing.T) {
	debian := func(p string) bool { return p == "/usr/lib/openssh/sftp-server" || p == "/usr/bin/sudo" }
	noSudo := func(p string) bool { return p == "/usr/lib/openssh/sftp-server" }
	w := sshexec.WrapperCommand
	sudo := func(kind string) []string {
		return []string{"/usr/bin/sudo", "-n", "/usr/local/bin/herd", "ssh-gate", "--elevated", kind}
	}
	for _, tc := range []struct {
		name     string
		args     []string
		original string
		present  bool
		euid     int
		exists   func(string) bool
		want     []string
		refused  bool
	}{
		{"root wrapper", nil, w, true, 0, debian, []string{"/bin/sh", "-c", w}, false},
		{"root sftp", nil, "internal-sftp", true, 0, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"account wrapper", nil, w, true, 998, debian, sudo("wrapper"), false},
		{"account sftp", nil, "/usr/lib/openssh/sftp-server -l INFO", true, 998, debian, sudo("sftp"), false},
		{"account board session", nil, boardsession.Command, true, 998, debian, sudo("session"), false},
		{"root board session", nil, boardsession.Command, true, 0, debian, []string{"/usr/local/bin/herd", "board", "session"}, false},
		{"elevated session", []string{"--elevated", "session"}, "", false, 0, debian, []string{"/usr/local/bin/herd", "board", "session"}, false},
		{"elevated session not as root", []string{"--elevated", "session"}, "", false, 998, debian, nil, true},
		{"account login shell", nil, "", false, 998, debian, nil, true},
		{"account other command", nil, "sudo -n id", true, 998, debian, nil, true},
		{"account wrapper plus more", nil, w + "; id", true, 998, debian, nil, true},
		{"account without sudo", nil, w, true, 998, noSudo, nil, false},
		{"elevated wrapper", []string{"--elevated", "wrapper"}, "", false, 0, debian, []string{"/bin/sh", "-c", w}, false},
		{"elevated sftp", []string{"--elevated", "sftp"}, "", false, 0, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"elevated ignores the request", []string{"--elevated", "sftp"}, "id", true, 0, debian, []string{"/usr/lib/openssh/sftp-server"}, false},
		{"elevated not as root", []string{"--elevated", "wrapper"}, "", false, 998, debian, nil, true},
		{"elevated other kind", []string{"--elevated", "shell"}, "", false, 0, debian, nil, true},
		{"elevated extra argument", []string{"--elevated", "wrapper", "id"}, "", false, 0, debian, nil, true},
		{"other flag", []string{"--shell"}, w, true, 0, debian, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Gate(tc.args, tc.original, tc.present, tc.euid, tc.exists)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("admitted as %q", got)
				}
				if errors.Is(err, ErrRefused) != tc.refused {
					t.Fatalf("err %v, refused %v, want %v", err, errors.Is(err, ErrRefused), tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
	want := []string{"/usr/local/bin/herd ssh-gate --elevated wrapper", "/usr/local/bin/herd ssh-gate --elevated sftp",
		"/usr/local/bin/herd ssh-gate --elevated session"}
	if diff := cmp.Diff(want, SudoersCommands()); diff != "" {
		t.Errorf("SudoersCommands (-want +got):\n%s", diff)
	}
}
