package sshexec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/units/sshexec/boardfs"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// TestMain lets the test binary stand in for the board helper: run as
// `sshexec.test board put-file ...` or `sshexec.test board session`
// (through sshd) it is `herd board`. With noListEnv set the session is
// one from before the list op.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "board" && os.Args[2] == "session" {
		opts := boardsession.Options{List: ListLocal}
		if os.Getenv(noListEnv) != "" {
			opts = boardsession.Options{}
		}
		os.Exit(boardsession.Main(os.Stderr, opts))
	}
	if len(os.Args) > 1 && os.Args[1] == "board" {
		os.Exit(boardfs.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// helperExecutor is an executor whose board helper is this test binary,
// changed by mutate when not nil.
func helperExecutor(t *testing.T, srv *sshdtest.Server, mutate func(*Config)) *Executor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(t.TempDir(), "run", "stage")
	return newTestExecutor(t, srv, func(c *Config) {
		c.BoardHelper = self
		c.StageDir = stage
		if mutate != nil {
			mutate(c)
		}
	})
}

func TestWriteFileNoFollow(t *testing.T) {
	srv := sshdtest.Start(t)
	e := helperExecutor(t, srv, nil)
	ctx := testCtx(t)
	dir := t.TempDir()

	p := filepath.Join(dir, "etc", "app", "conf")
	content := []byte("a=1\n\x00\xff $(reboot)\n")
	if err := e.WriteFileNoFollow(ctx, "b1", p, content, NoFollowOptions{Mode: 0o640}); err != nil {
		t.Fatalf("WriteFileNoFollow: %v", err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != string(content) {
		t.Fatalf("content = %q, %v; want %q", got, err, content)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", st.Mode())
	}
	stage, _ := os.ReadDir(e.stageDir())
	if len(stage) != 0 {
		t.Errorf("stage dir holds %d entries after the write, want 0", len(stage))
	}
	if st, err := os.Stat(e.stageDir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("stage dir = %v, %v; want mode 0700", st.Mode(), err)
	}

	// The pod user swaps a directory of the path for a link to a root
	// directory: the write and the removal are refused, nothing changes.
	victim := filepath.Join(dir, "victim")
	os.MkdirAll(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "shadow"), []byte("secret"), 0o600)
	podDir := filepath.Join(dir, "srv", "pod")
	os.MkdirAll(podDir, 0o777)
	if err := os.Symlink(victim, filepath.Join(podDir, "data")); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(podDir, "data", "shadow")
	err = e.WriteFileNoFollow(ctx, "b1", evil, []byte("owned"), NoFollowOptions{Mode: 0o644})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("write through a link = %v, want ErrRefused naming the link", err)
	}
	if err := e.RemoveNoFollow(ctx, "b1", evil); !errors.Is(err, ErrRefused) {
		t.Errorf("remove through a link = %v, want ErrRefused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "shadow")); string(b) != "secret" {
		t.Errorf("victim = %q, want it untouched", b)
	}
	if stage, _ := os.ReadDir(e.stageDir()); len(stage) != 0 {
		t.Errorf("stage dir holds %d entries after a refusal, want 0", len(stage))
	}

	// setuid needs the opt-in.
	tool := filepath.Join(dir, "bin", "tool")
	if err := e.WriteFileNoFollow(ctx, "b1", tool, []byte("x"), NoFollowOptions{Mode: 0o4755}); !errors.Is(err, ErrRefused) {
		t.Errorf("setuid without opt-in = %v, want ErrRefused", err)
	}
	if err := e.WriteFileNoFollow(ctx, "b1", tool, []byte("x"), NoFollowOptions{Mode: 0o4755, AllowSetID: true}); err != nil {
		t.Fatalf("setuid with opt-in: %v", err)
	}
	if st, _ := os.Stat(tool); st.Mode()&os.ModeSetuid == 0 {
		t.Errorf("mode = %v, want setuid", st.Mode())
	}

	// A private parent directory (the env dir) ends up 0700.
	envFile := filepath.Join(dir, "env", "herd-web.env")
	if err := e.WriteFileNoFollow(ctx, "b1", envFile, []byte("K=v\n"), NoFollowOptions{Mode: 0o600, ParentMode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(envFile)); st.Mode().Perm() != 0o700 {
		t.Errorf("env dir mode = %v, want 0700", st.Mode())
	}

	if err := e.RemoveNoFollow(ctx, "b1", p); err != nil {
		t.Fatalf("RemoveNoFollow: %v", err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", p, err)
	}
	if err := e.RemoveNoFollow(ctx, "b1", p); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
}

func TestWriteFileNoFollowMissingHelper(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.BoardHelper = "/nonexistent/herd"
		c.StageDir = filepath.Join(t.TempDir(), "stage")
	})
	err := e.WriteFileNoFollow(testCtx(t), "b1", filepath.Join(t.TempDir(), "f"), []byte("x"), NoFollowOptions{Mode: 0o644})
	var ee *ExitError
	if !errors.As(err, &ee) || errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want an *ExitError (helper not found), not a refusal", err)
	}
	if stage, _ := os.ReadDir(e.stageDir()); len(stage) != 0 {
		t.Errorf("staged copy left behind: %d entries", len(stage))
	}
}

func TestProbeArgv(t *testing.T) {
	got, err := ProbeArgv(ProbeCommand{User: "nobody", WorkingDir: "/srv/app", EnvironmentFile: "/etc/herd/env/herd-web.env",
		Timeout: 1500 * time.Millisecond, Argv: []string{"sh", "-c", "test -f ready; $(x) `y`"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"systemd-run", "--quiet", "--pipe", "--wait", "--collect", "--uid=nobody", "--property=NoNewPrivileges=yes",
		"--property=WorkingDirectory=/srv/app", "--property=EnvironmentFile=-/etc/herd/env/herd-web.env",
		"--property=RuntimeMaxSec=2", "--", "sh", "-c", "test -f ready; $$(x) `y`"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ProbeArgv (-want +got):\n%s", d)
	}
	root, err := ProbeArgv(ProbeCommand{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"systemd-run", "--quiet", "--pipe", "--wait", "--collect", "--property=WorkingDirectory=/", "--", "true"}, root); d != "" {
		t.Errorf("root pod ProbeArgv (-want +got):\n%s", d)
	}
	for _, bad := range []ProbeCommand{
		{Argv: nil},
		{Argv: []string{"-x"}},
		{Argv: []string{"$HOME/check"}},
		{User: "--uid=0", Argv: []string{"true"}},
		{User: "a=b", Argv: []string{"true"}},
		{WorkingDir: "rel", Argv: []string{"true"}},
		{EnvironmentFile: "/a/../b", Argv: []string{"true"}},
	} {
		if _, err := ProbeArgv(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ProbeArgv(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestProbeRunsAsPodUser runs readiness checks through the real sshd and
// the board's systemd: a check of a `user = "nobody"` pod runs as nobody,
// in the pod's working directory, with its env file, and a root pod's as
// root. It needs systemd as PID 1 (a lab board, a CI host with systemd).
func TestProbeRunsAsPodUser(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("systemd is not running here (no /run/systemd/system); the lab e2e covers probes")
	}
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	envDir := t.TempDir()
	envFile := filepath.Join(envDir, "herd-p.env")
	if err := os.WriteFile(envFile, []byte("SECRET='s3'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := `[ "$(id -u)" = "$1" ] && [ "$(pwd)" = "$2" ] && [ "$SECRET" = s3 ] && ! cat "$3"`
	nobody := ProbeCommand{User: "nobody", WorkingDir: "/tmp", EnvironmentFile: envFile, Timeout: 10 * time.Second,
		Argv: []string{"sh", "-c", check, "probe", "65534", "/tmp", envFile}}
	if st, err := e.Probe(ctx, "b1", nobody); err != nil || st != 0 {
		t.Errorf("nobody probe = %d, %v; want 0 (uid 65534, cwd /tmp, env set, env file unreadable)", st, err)
	}
	// The same check expecting root fails for the nobody pod.
	nobody.Argv = []string{"sh", "-c", `[ "$(id -u)" = 0 ]`}
	if st, err := e.Probe(ctx, "b1", nobody); err != nil || st == 0 {
		t.Errorf("nobody probe expecting root = %d, %v; want non-zero", st, err)
	}
	root := ProbeCommand{Timeout: 10 * time.Second, Argv: []string{"sh", "-c", `[ "$(id -u)" = 0 ]`}}
	if st, err := e.Probe(ctx, "b1", root); err != nil || st != 0 {
		t.Errorf("root probe = %d, %v; want 0", st, err)
	}
	if st, err := e.Probe(ctx, "b1", ProbeCommand{Argv: []string{"sh", "-c", "exit 7"}}); err != nil || st != 7 {
		t.Errorf("exit status = %d, %v; want 7", st, err)
	}
}
