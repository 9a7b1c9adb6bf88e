package sshexec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// sessionExecutor is helperExecutor with the board session on, the
// session being this test binary (TestMain).
func sessionExecutor(t *testing.T, srv *sshdtest.Server, mutate func(*Config)) *Executor {
	t.Helper()
	return helperExecutor(t, srv, func(c *Config) {
		c.BoardSession = true
		if mutate != nil {
			mutate(c)
		}
	})
}

func TestBoardSession(t *testing.T) {
	srv := sshdtest.Start(t)
	e := sessionExecutor(t, srv, nil)
	ctx := testCtx(t)

	t.Run("commands run in the session", func(t *testing.T) {
		res, err := e.Run(ctx, "b1", []string{"sh", "-c", `tr '\0' ' ' < /proc/$PPID/cmdline`})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(res.Stdout), " board session ") {
			t.Errorf("parent of the command is %q, want the board session", res.Stdout)
		}
	})
	t.Run("argv arrives literally", func(t *testing.T) {
		res, err := e.Run(ctx, "b1", append([]string{"printf", `%s\0`}, nastyArgs...))
		if err != nil || res.ExitStatus != 0 {
			t.Fatalf("status %d, %v, stderr %q", res.ExitStatus, err, res.Stderr)
		}
		got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\x00"), "\x00")
		if diff := cmp.Diff(nastyArgs, got); diff != "" {
			t.Errorf("argv changed in transit (-sent +received):\n%s", diff)
		}
	})
	t.Run("exit status and streams", func(t *testing.T) {
		res, err := e.Run(ctx, "b1", []string{"sh", "-c", `echo out; echo err >&2; exit 200`})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Result{Stdout: []byte("out\n"), Stderr: []byte("err\n"), ExitStatus: 200}, res); diff != "" {
			t.Errorf("Run (-want +got):\n%s", diff)
		}
	})
	t.Run("not found", func(t *testing.T) {
		res, err := e.Run(ctx, "b1", []string{"herd-no-such-command"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitStatus != 127 || !bytes.Contains(res.Stderr, []byte("not found")) {
			t.Errorf("got status %d stderr %q, want 127 and 'not found'", res.ExitStatus, res.Stderr)
		}
	})
	t.Run("file writes need no staging", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "etc", "conf")
		if err := e.WriteFileNoFollow(ctx, "b1", p, []byte("a=1\n"), NoFollowOptions{Mode: 0o600, ParentMode: 0o700}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "a=1\n" {
			t.Errorf("content %q, %v", b, err)
		}
		if st, _ := os.Stat(filepath.Dir(p)); st.Mode().Perm() != 0o700 {
			t.Errorf("parent mode %v, want 0700", st.Mode())
		}
		if _, err := os.Stat(e.stageDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stage dir: %v, want none (no SFTP staging)", err)
		}
		victim := filepath.Join(dir, "victim")
		os.MkdirAll(victim, 0o755)
		os.Symlink(victim, filepath.Join(dir, "link"))
		err := e.WriteFileNoFollow(ctx, "b1", filepath.Join(dir, "link", "x"), []byte("owned"), NoFollowOptions{Mode: 0o644})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("write through a link = %v, want ErrRefused naming the link", err)
		}
		if err := e.RemoveNoFollow(ctx, "b1", p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file still there: %v", err)
		}
	})
	t.Run("output cap", func(t *testing.T) {
		e := sessionExecutor(t, srv, func(c *Config) { c.MaxOutputBytes = 1000 })
		res, err := e.Run(ctx, "b1", []string{"head", "-c", "5000", "/dev/zero"})
		if !errors.Is(err, ErrOutputTooLarge) || len(res.Stdout) != 1000 {
			t.Errorf("err = %v, kept %d bytes; want ErrOutputTooLarge and 1000", err, len(res.Stdout))
		}
	})
	t.Run("cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := e.Run(ctx, "b1", []string{"sleep", "60"})
			errc <- err
		}()
		testutil.Until(t, 20*time.Second, "the request to be in flight", func() bool { return e.Stats().OpenSessions == 1 })
		cancel()
		returnsWith(t, errc, context.Canceled, "Run did not return after cancellation")
	})
}

// A board without the session (an older herd, or sudoers without its
// line) is driven through the wrapper.
func TestBoardSessionFallback(t *testing.T) {
	srv := sshdtest.Start(t)
	e := sessionExecutor(t, srv, func(c *Config) { c.BoardHelper = "/nonexistent/herd" })
	res, err := e.Run(testCtx(t), "b1", []string{"sh", "-c", "echo ok"})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("Run = %q, %v; want ok through the wrapper", res.Stdout, err)
	}
	n, _ := e.node("b1")
	c := n.live()
	if c == nil || !c.bsNone {
		t.Error("the connection does not remember that the board has no session")
	}
}

// Warm dials the board and starts its session without running anything;
// the next command finds both ready.
func TestWarm(t *testing.T) {
	srv := sshdtest.Start(t)
	e := sessionExecutor(t, srv, nil)
	ctx := testCtx(t)
	if err := e.Warm(ctx, "b1"); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	if got := e.Stats().Dials; got != 1 {
		t.Errorf("dials after Warm = %d, want 1", got)
	}
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().Dials; got != 1 {
		t.Errorf("dials after Warm and a command = %d, want 1", got)
	}
}

// CloseIdle closes a warmed connection once nothing has asked for it for
// the idle time (on the executor's clock), never one with a command in
// flight, and the next operation dials afresh.
func TestCloseIdle(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	srv := sshdtest.Start(t)
	e := sessionExecutor(t, srv, func(c *Config) { c.Clock = clk })
	ctx := testCtx(t)
	if err := e.Warm(ctx, "b1"); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	clk.Advance(time.Minute)
	if got := e.CloseIdle(2 * time.Minute); len(got) != 0 {
		t.Fatalf("CloseIdle(2m) one minute after Warm closed %v", got)
	}

	// A command in flight keeps its connection however old its start.
	running, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(running, "b1", []string{"sleep", "60"})
		done <- err
	}()
	testutil.Until(t, 10*time.Second, "the command to start", func() bool { return e.Stats().OpenSessions == 1 })
	clk.Advance(time.Hour)
	if got := e.CloseIdle(2 * time.Minute); len(got) != 0 {
		t.Fatalf("CloseIdle closed %v with a command in flight", got)
	}
	cancel()
	<-done
	testutil.Until(t, 10*time.Second, "the command's slot to be free", func() bool { return e.Stats().OpenSessions == 0 })

	clk.Advance(2 * time.Minute)
	if diff := cmp.Diff([]string{"b1"}, e.CloseIdle(2*time.Minute)); diff != "" {
		t.Fatalf("CloseIdle two minutes after the last use (-want +got):\n%s", diff)
	}
	if got := e.CloseIdle(0); len(got) != 0 {
		t.Errorf("CloseIdle closed %v again", got)
	}
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatalf("Run after CloseIdle: %v", err)
	}
	if got := e.Stats().Dials; got != 2 {
		t.Errorf("dials = %d, want 2 (Warm, then the command after CloseIdle)", got)
	}
}

// noListEnv, set in the board's environment, makes the test binary's
// board session one from before the list op (TestMain).
const noListEnv = "HERD_TEST_SESSION_NO_LIST"

// TestBoardSessionList: a board session with the list op answers
// ShowUnits itself (ListLocal: systemctl from the board's PATH, no
// shell); one without it (an older herd) gets the script, through its
// run op. A fake sh first in the board's PATH logs every `sh` run there.
func TestBoardSessionList(t *testing.T) {
	if m, _ := filepath.Glob(filepath.Join(UnitDir, "herd-*")); len(m) > 0 {
		t.Skipf("this host has herd unit files in %s: %v", UnitDir, m)
	}
	bin := t.TempDir()
	fakeSystemd(t, bin)
	realSh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "sh"), []byte("#!"+realSh+"\n"+
		`printf '%s\n' "$1" >> "$(dirname "$0")/sh.log"`+"\nexec "+realSh+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin + ":/usr/bin:/bin:/usr/sbin:/sbin"
	wantNames := []string{"herd-crashy.service", "herd-dead.service", "herd-gone.service", "herd-web-1.service"}
	show := func(t *testing.T, e *Executor) {
		t.Helper()
		os.Remove(filepath.Join(bin, "systemctl.log"))
		os.Remove(filepath.Join(bin, "sh.log"))
		got, err := e.ShowUnits(testCtx(t), "b1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range got {
			names = append(names, u.Unit)
		}
		if diff := cmp.Diff(wantNames, names); diff != "" {
			t.Errorf("units (-want +got):\n%s", diff)
		}
		if n := len(calls(t, bin, "systemctl")); n != 2 {
			t.Errorf("systemctl ran %d times, want 2 (list-units, show)", n)
		}
	}
	shRuns := func(t *testing.T) []string {
		b, err := os.ReadFile(filepath.Join(bin, "sh.log"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}

	t.Run("a session that lists", func(t *testing.T) {
		srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{path}})
		e := sessionExecutor(t, srv, nil)
		show(t, e)
		if runs := shRuns(t); len(runs) != 0 {
			t.Errorf("sh ran on the board %d times (%q), want none", len(runs), runs)
		}
		t.Run("systemctl fails", func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bin, "list-units.fail"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(filepath.Join(bin, "list-units.fail"))
			got, err := e.ShowUnits(testCtx(t), "b1")
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Status != 1 || !strings.Contains(err.Error(), "Failed to connect to bus") {
				t.Errorf("ShowUnits = %v, %v; want *ExitError status 1 with systemctl's message", got, err)
			}
		})
	})
	t.Run("a session from before the list op", func(t *testing.T) {
		srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{path, noListEnv + "=1"}})
		e := sessionExecutor(t, srv, nil)
		show(t, e)
		if diff := cmp.Diff([]string{"-c"}, shRuns(t)); diff != "" {
			t.Errorf("sh runs on the board (-want +got):\n%s", diff)
		}
		n, _ := e.node("b1")
		if c := n.live(); c == nil || c.bs == nil {
			t.Error("the script did not run through the board session")
		}
	})
}
