package boardsession

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/testutil"
)

// pair starts Serve on one end of two pipes and returns a client on the
// other, and the channel Serve's result arrives on.
func pair(t *testing.T) (*Client, <-chan error) {
	t.Helper()
	return pairWith(t, Options{})
}

// pairWith is pair with a server that has opts (ServeWith).
func pairWith(t *testing.T, opts Options) (*Client, <-chan error) {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := ServeWith(reqR, respW, opts)
		respW.Close()
		reqR.Close()
		served <- err
	}()
	c, err := NewClient(respR, reqW)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, served
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRun(t *testing.T) {
	c, _ := pair(t)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name string
		req  Request
		want Response
	}{
		{"exit status and both streams",
			Run([]string{"sh", "-c", "echo out; echo err >&2; exit 3", "x"}, 0),
			Response{Exit: 3, Stdout: []byte("out\n"), Stderr: []byte("err\n")}},
		{"argv stays data",
			Run([]string{"printf", "%s|", "$(id)", "a b", "*"}, 0),
			Response{Stdout: []byte("$(id)|a b|*|")}},
		{"killed by a signal is 128+N",
			Run([]string{"sh", "-c", "kill -TERM $$"}, 0),
			Response{Exit: 143}},
		{"stdin is empty",
			Run([]string{"wc", "-c"}, 0),
			Response{Stdout: []byte("0\n")}},
		{"output over the cap is cut and flagged",
			Run([]string{"sh", "-c", "printf 0123456789abcdef"}, 10),
			Response{Stdout: []byte("0123456789"), Truncated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Do(ctx, tc.req, wait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got.ID = 0
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("unknown op", func(t *testing.T) {
		got, err := c.Do(ctx, Request{Op: "reboot"}, wait(time.Second))
		want := `unknown op "reboot" (want run, put, rm or cancel)`
		if !errors.Is(err, ErrUnknownOp) || got.Error != want {
			t.Errorf("got %+v, %v; want ErrUnknownOp and %q", got, err, want)
		}
	})
	t.Run("a command that does not exist", func(t *testing.T) {
		got, err := c.Do(ctx, Run([]string{"/nonexistent/cmd"}, 0), wait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got.Exit != 127 || !strings.Contains(got.Error, "/nonexistent/cmd") {
			t.Errorf("got exit %d, error %q; want 127 naming the command", got.Exit, got.Error)
		}
	})
	t.Run("bad argv", func(t *testing.T) {
		for _, argv := range [][]string{nil, {""}, {"-c", "id"}} {
			got, err := c.Do(ctx, Run(argv, 0), wait(time.Second))
			if err != nil || !strings.Contains(got.Error, "bad argv") {
				t.Errorf("argv %q: %+v, %v; want a bad argv error", argv, got, err)
			}
		}
	})
}

// pidFrom waits for a pid written to path.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testutil.Until(t, 10*time.Second, "the command to write its pid", func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func TestCancelKillsTheProcessGroup(t *testing.T) {
	c, _ := pair(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() {
		// A child that ignores nothing: the group gets TERM.
		_, err := c.Do(ctx, Run([]string{"sh", "-c", `sleep 60 & echo $! > "$1"; wait`, "x", pidFile}, 0), wait(5*time.Second))
		errc <- err
	}()
	pid := pidFrom(t, pidFile)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	testutil.Until(t, 10*time.Second, "the command's child to be killed", func() bool { return gone(pid) })
}

func TestEndOfInputCancelsEverything(t *testing.T) {
	c, served := pair(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	go c.Do(context.Background(), Run([]string{"sh", "-c", `echo $$ > "$1"; exec sleep 60`, "x", pidFile}, 0), wait(time.Second))
	pid := pidFrom(t, pidFile)
	c.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil at the end of its input", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its input ended")
	}
	if !gone(pid) {
		t.Error("the running command outlived the session")
	}
	if _, err := c.Do(ctxFor(t), Run([]string{"true"}, 0), wait(time.Second)); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}

func TestBusy(t *testing.T) {
	// The requests in flight are lists that wait for their cancel: the
	// bound counts requests, and no process has to start (under qemu a
	// process start once took over 10 s with other emulated tests beside).
	entered := make(chan struct{}, MaxRunning)
	c, _ := pairWith(t, Options{List: func(ctx context.Context) ([]byte, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	for range MaxRunning {
		go c.Do(ctx, Request{Op: OpList}, wait(time.Second))
	}
	for i := range MaxRunning {
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d requests in flight after 30s", i, MaxRunning)
		}
	}
	got, err := c.Do(ctxFor(t), Run([]string{"true"}, 0), wait(time.Second))
	if err != nil || !strings.Contains(got.Error, "busy") {
		t.Errorf("request %d = %+v, %v; want busy", MaxRunning+1, got, err)
	}
}

func TestPutAndRemove(t *testing.T) {
	c, _ := pair(t)
	ctx := ctxFor(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "etc", "app", "conf")
	content := []byte("a=1\n\x00\xff $(reboot)\n")
	got, err := c.Do(ctx, Put(p, content, 0o640, 0, false), wait(time.Second))
	if err != nil || got.Error != "" {
		t.Fatalf("put = %+v, %v", got, err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, content) {
		t.Errorf("content = %q, %v; want %q", b, err, content)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", st.Mode())
	}

	// A link where a directory is expected: refused, nothing written.
	victim := filepath.Join(dir, "victim")
	os.MkdirAll(victim, 0o755)
	if err := os.Symlink(victim, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err = c.Do(ctx, Put(filepath.Join(dir, "link", "x"), []byte("owned"), 0o644, 0, false), wait(time.Second))
	if err != nil || !got.Refused || !strings.Contains(got.Error, "symbolic link") {
		t.Errorf("put through a link = %+v, %v; want refused naming the link", got, err)
	}
	if _, err := os.Stat(filepath.Join(victim, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file appeared behind the link: %v", err)
	}
	got, err = c.Do(ctx, Put(p, []byte("x"), 0o4755, 0, false), wait(time.Second))
	if err != nil || !got.Refused {
		t.Errorf("setuid put without AllowSetID = %+v, %v; want refused", got, err)
	}

	got, err = c.Do(ctx, Remove(p), wait(time.Second))
	if err != nil || got.Error != "" {
		t.Fatalf("rm = %+v, %v", got, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file still there after rm: %v", err)
	}
}

func TestBadFrames(t *testing.T) {
	frame := func(body string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		return append(b, body...)
	}
	huge := binary.BigEndian.AppendUint32(nil, MaxFrame+1)
	for _, tc := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"oversized frame", huge, "frame too large"},
		{"truncated header", []byte{0, 0}, "truncated frame header"},
		{"truncated body", frame(`{"id":1,"op":"run"}`)[:10], "truncated frame"},
		{"not JSON", frame(`{"id":1,`), "bad frame"},
		{"unknown field", frame(`{"id":1,"op":"run","shell":"id"}`), "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			done := make(chan error, 1)
			go func() { done <- Serve(bytes.NewReader(tc.input), &out) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Serve = %v, want an error containing %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
		})
	}
}

func TestNoHello(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stdout string
	}{
		{"nothing: the command failed", ""},
		{"a shell's error message", "sh: 1: /usr/local/bin/herd: not found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, w := io.Pipe()
			if _, err := NewClient(strings.NewReader(tc.stdout), w); err == nil {
				t.Error("NewClient succeeded without a hello")
			}
		})
	}
	var hello bytes.Buffer
	writeFrame(&hello, Hello{Protocol: "herd-board-session/0"})
	_, w := io.Pipe()
	if _, err := NewClient(&hello, w); err == nil || !strings.Contains(err.Error(), "herd-board-session/0") {
		t.Errorf("NewClient with another protocol = %v, want an error naming it", err)
	}
}

func TestIdleSessionExits(t *testing.T) {
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := serve(reqR, respW, 200*time.Millisecond, Options{})
		respW.Close()
		served <- err
	}()
	c, err := NewClient(respR, reqW)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Busy past the idle time: the session stays.
	got, err := c.Do(ctxFor(t), Run([]string{"sleep", "0.5"}, 0), wait(time.Second))
	if err != nil || got.Exit != 0 {
		t.Fatalf("run = %+v, %v", got, err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil after idling", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an idle session did not exit")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not see the session end")
	}
}

// wait is a constant grace for Client.Do.
func wait(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

// exitErr is an error with an exit status, as sshexec.ListError.
type exitErr int

func (e exitErr) Error() string {
	return "systemctl list-units exited with status " + strconv.Itoa(int(e))
}
func (e exitErr) ExitCode() int { return int(e) }

// TestList: a list is answered with what Options.List produces (a
// failure's exit status passed on, a listing over the request's cap
// refused); a session without List answers it as an older herd would,
// and the client then stops asking.
func TestList(t *testing.T) {
	ctx := ctxFor(t)
	var fail error
	c, _ := pairWith(t, Options{List: func(context.Context) ([]byte, error) {
		if fail != nil {
			return nil, fail
		}
		return []byte("@@herd-mark@@ 1 2\nId=herd-a.service\n"), nil
	}})
	for _, tc := range []struct {
		name string
		fail error
		req  Request
		want Response
	}{
		{"the listing", nil, List(0), Response{Stdout: []byte("@@herd-mark@@ 1 2\nId=herd-a.service\n")}},
		{"over the cap", nil, List(10), Response{Truncated: true, Error: "the listing is 36 bytes, limit 10"}},
		{"a failed command's status", exitErr(1), List(0), Response{Exit: 1, Error: "systemctl list-units exited with status 1"}},
		{"another failure", errors.New("no"), List(0), Response{Error: "no"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail = tc.fail // the server reads it only while Do waits
			got, err := c.Do(ctx, tc.req, wait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got.ID = 0
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a session without it", func(t *testing.T) {
		old, _ := pair(t)
		_, err := old.Do(ctx, List(0), wait(time.Second))
		if !errors.Is(err, ErrUnknownOp) || !strings.Contains(err.Error(), `unknown op "list"`) {
			t.Fatalf("list to a session without it: %v, want ErrUnknownOp", err)
		}
		old.mu.Lock()
		remembered := old.unknown[OpList]
		old.mu.Unlock()
		if !remembered {
			t.Error("the client does not remember that the session does not list")
		}
		if _, err := old.Do(ctx, List(0), wait(time.Second)); !errors.Is(err, ErrUnknownOp) {
			t.Errorf("second list: %v, want ErrUnknownOp", err)
		}
		if got, err := old.Do(ctx, Run([]string{"true"}, 0), wait(time.Second)); err != nil || got.Error != "" {
			t.Errorf("run after the unknown list = %+v, %v", got, err)
		}
	})
}

// TestListCancel: cancelling a list cancels the context Options.List got.
func TestListCancel(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	c, _ := pairWith(t, Options{List: func(ctx context.Context) ([]byte, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}})
	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, List(0), wait(5*time.Second))
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the listing's context was not cancelled")
	}
}

// TestHelloIsStrict: a client refuses a Hello with a field it does not
// know, which is why the Hello announces no operations (a new field would
// cut every older leader off the session): the list op is found out by
// asking instead.
func TestHelloIsStrict(t *testing.T) {
	var in bytes.Buffer
	body := `{"protocol":"` + Protocol + `","ops":["list"]}`
	in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	in.WriteString(body)
	_, w := io.Pipe()
	if _, err := NewClient(&in, w); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("NewClient with an extra Hello field = %v, want an unknown field error", err)
	}
}
