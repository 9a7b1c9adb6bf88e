package sshexec

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/internal/testutil"
)

// nastyArgs must arrive on the board exactly as sent.
var nastyArgs = []string{
	"plain",
	"with space",
	"single'quote",
	`double"quote`,
	"semi;colon && echo pwned",
	"$(touch /tmp/herd-pwned)",
	"`touch /tmp/herd-pwned`",
	"*",
	"/*",
	"new\nline",
	"tab\there",
	"",
	"-n",
	"--help",
	"-",
	"back\\slash\\n",
	"ünïcødé ☃ 日本",
	"$HOME ${PATH} $1 $@ $$",
	"trailing newline\n",
	"\n",
	" ",
	"|pipe >redir <in 2>&1",
	"#comment",
	"~root",
	"a=b",
	"\x01\x7f\xff",
}

// localShells are the shells the wrapper is checked under locally (the
// login shell on a board may be any of them).
func localShells(t *testing.T) []string {
	if _, err := exec.LookPath("xargs"); err != nil {
		t.Skip("xargs not installed")
	}
	var shells []string
	for _, sh := range []string{"sh", "dash", "bash", "busybox", "zsh", "ksh", "mksh"} {
		if _, err := exec.LookPath(sh); err == nil {
			shells = append(shells, sh)
		}
	}
	if len(shells) == 0 {
		t.Skip("no shell found")
	}
	return shells
}

// localWrapper is wrapperCommand running the way sshd would run it
// ($SHELL -c CMD in a new session), with stdin as the lifeline.
type localWrapper struct {
	cmd      *exec.Cmd
	lifeline *os.File
	stdout   lockedBuffer
	stderr   lockedBuffer
}

// lockedBuffer is a bytes.Buffer safe to read while os/exec writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startWrapperLocally(t *testing.T, shell string, frame []byte) *localWrapper {
	t.Helper()
	args := []string{"-c", wrapperCommand}
	if shell == "busybox" {
		args = append([]string{"sh"}, args...)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	lw := &localWrapper{cmd: exec.Command(shell, args...), lifeline: w}
	lw.cmd.Stdin, lw.cmd.Stdout, lw.cmd.Stderr = r, &lw.stdout, &lw.stderr
	// Its own session, as under sshd: the wrapper signals its process group.
	lw.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := lw.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() {
		w.Close()
		if lw.cmd.ProcessState == nil {
			syscall.Kill(-lw.cmd.Process.Pid, syscall.SIGKILL)
			lw.cmd.Wait()
		}
	})
	// The wrapper may stop reading early (refusing the argv); the pipe is
	// smaller than large frames, so write without blocking the test.
	go w.Write(frame)
	return lw
}

// wait returns the exit status (-signal if killed).
func (lw *localWrapper) wait(t *testing.T) int {
	t.Helper()
	err := lw.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", err)
	return 0
}

// runWrapperLocally runs argv through the wrapper to completion, keeping
// the lifeline open meanwhile.
func runWrapperLocally(t *testing.T, shell string, argv []string) (stdout, stderr string, status int) {
	t.Helper()
	frame, err := encodeArgv(argv)
	if err != nil {
		t.Fatalf("encodeArgv: %v", err)
	}
	lw := startWrapperLocally(t, shell, frame)
	status = lw.wait(t)
	return lw.stdout.String(), lw.stderr.String(), status
}

func TestWrapperArgvLiteral(t *testing.T) {
	for _, sh := range localShells(t) {
		t.Run(sh, func(t *testing.T) {
			out, errOut, status := runWrapperLocally(t, sh, append([]string{"printf", `%s\0`}, nastyArgs...))
			if status != 0 {
				t.Fatalf("status %d, stderr %q", status, errOut)
			}
			got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
			if diff := cmp.Diff(nastyArgs, got); diff != "" {
				t.Errorf("argv changed in transit (-sent +received):\n%s", diff)
			}
		})
	}
}

func TestWrapperExitStatus(t *testing.T) {
	for _, sh := range localShells(t) {
		for _, want := range []int{0, 1, 2, 3, 4, 123, 124, 125, 126, 127, 128, 200, 255} {
			t.Run(sh+"/"+strconv.Itoa(want), func(t *testing.T) {
				_, errOut, got := runWrapperLocally(t, sh, []string{"sh", "-c", `exit "$1"`, "sh", strconv.Itoa(want)})
				if got != want {
					t.Errorf("status = %d, want %d (stderr %q)", got, want, errOut)
				}
			})
		}
	}
}

func TestWrapperSpecialCases(t *testing.T) {
	tests := []struct {
		name       string
		argv       []string
		wantStatus int
		wantOut    string
		wantErrSub string
	}{
		{name: "not found", argv: []string{"herd-no-such-command"}, wantStatus: 127, wantErrSub: "not found"},
		{name: "builtin exit is not run", argv: []string{"exit", "7"}, wantStatus: 127},
		{name: "builtin cd is not run", argv: []string{"cd", "/"}, wantStatus: 127},
		{name: "stdin is empty", argv: []string{"cat"}, wantStatus: 0, wantOut: ""},
		{name: "killed by signal", argv: []string{"sh", "-c", "kill -9 $$"}, wantStatus: 128 + 9},
		{name: "stdout and stderr kept apart", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 4"},
			wantStatus: 4, wantOut: "out\n", wantErrSub: "err\n"},
		{name: "fd 3 and 4 are closed", argv: []string{"sh", "-c", "echo x >&3 || echo x >&4 || echo closed"},
			wantStatus: 0, wantOut: "closed\n"},
	}
	for _, sh := range localShells(t) {
		for _, tt := range tests {
			t.Run(sh+"/"+tt.name, func(t *testing.T) {
				out, errOut, status := runWrapperLocally(t, sh, tt.argv)
				if status != tt.wantStatus {
					t.Errorf("status = %d, want %d (stderr %q)", status, tt.wantStatus, errOut)
				}
				if out != tt.wantOut {
					t.Errorf("stdout = %q, want %q", out, tt.wantOut)
				}
				if !strings.Contains(errOut, tt.wantErrSub) {
					t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErrSub)
				}
			})
		}
	}
}

func TestWrapperFailureIsReported(t *testing.T) {
	for _, sh := range localShells(t) {
		t.Run(sh, func(t *testing.T) {
			// An argv element longer than xargs' 128 KiB buffer: xargs -x
			// refuses it and nothing runs.
			argv := "echo\x00" + strings.Repeat("x", 200<<10) + "\x00"
			lw := startWrapperLocally(t, sh, []byte(strconv.Itoa(len(argv))+"\n"+argv))
			if status := lw.wait(t); status != 255 {
				t.Fatalf("status %d, want 255", status)
			}
			if !strings.HasSuffix(lw.stderr.String(), wrapperFailMarker+"\n") {
				t.Errorf("stderr = %q, want it to end with the marker", lw.stderr.String())
			}
		})
	}
}

func TestWrapperLifeline(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		slow bool
	}{
		{"silent command", []string{"sh", "-c", "echo $$; exec sleep 60"}, false},
		{"command ignoring TERM", []string{"sh", "-c", "trap '' TERM; echo $$; while :; do sleep 0.05; done"}, true},
	}
	for i, sh := range localShells(t) {
		for _, tt := range tests {
			if tt.slow && i > 0 {
				continue // the KILL path takes 2 s; one shell is enough
			}
			t.Run(sh+"/"+tt.name, func(t *testing.T) {
				frame, _ := encodeArgv(tt.argv)
				lw := startWrapperLocally(t, sh, frame)
				var pid int
				testutil.Until(t, 20*time.Second, "the command to start", func() bool {
					line, _, ok := strings.Cut(lw.stdout.String(), "\n")
					if ok {
						pid, _ = strconv.Atoi(line)
					}
					return ok
				})
				lw.lifeline.Close()
				status := lw.wait(t)
				if status >= 0 {
					t.Errorf("wrapper exited with status %d, want killed by a signal", status)
				}
				testutil.Until(t, 20*time.Second, "the command to be gone", func() bool { return processGone(pid) })
			})
		}
	}
}

func TestEncodeArgv(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		want    string
		wantErr bool
	}{
		{name: "simple", argv: []string{"systemctl", "start", "herd-a.service"}, want: "31\nsystemctl\x00start\x00herd-a.service\x00"},
		{name: "empty args kept", argv: []string{"printf", "", "x"}, want: "10\nprintf\x00\x00x\x00"},
		{name: "empty argv", argv: nil, wantErr: true},
		{name: "empty argv0", argv: []string{""}, wantErr: true},
		{name: "dash argv0", argv: []string{"-c"}, wantErr: true},
		{name: "NUL", argv: []string{"echo", "a\x00b"}, wantErr: true},
		{name: "too long", argv: []string{"echo", strings.Repeat("x", maxArgvBytes)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeArgv(tt.argv)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCapBuffer(t *testing.T) {
	b := newCapBuffer(5)
	b.Write([]byte("abc"))
	b.Write([]byte("defgh"))
	if string(b.Bytes()) != "abcde" || !b.dropped {
		t.Errorf("got %q dropped=%v, want %q dropped=true", b.Bytes(), b.dropped, "abcde")
	}
	if !b.trimSuffix("fgh") {
		t.Error("trimSuffix did not see the tail past the cap")
	}
	b = newCapBuffer(100)
	b.Write([]byte("oops\n" + wrapperFailMarker + "\n"))
	if !b.trimSuffix(wrapperFailMarker+"\n") || string(b.Bytes()) != "oops\n" || b.dropped {
		t.Errorf("got %q dropped=%v", b.Bytes(), b.dropped)
	}
}

// processGone reports whether pid has exited (a zombie counts: its reaper
// may be slow in a container).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
