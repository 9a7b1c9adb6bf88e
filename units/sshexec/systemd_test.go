package sshexec

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// hashOf is a fake sha256sum for test input: 64 hex digits derived from c.
func hashOf(c byte) string { return strings.Repeat(string(c), 64) }

// showOutput is what the ShowUnits script prints: the show blocks, the
// marker line, the hash lines.
func showOutput(show string, hashes ...string) string {
	var b strings.Builder
	b.WriteString(show)
	b.WriteString(hashMarker + "\n")
	for _, h := range hashes {
		b.WriteString(h + "\n")
	}
	return b.String()
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseShowUnits(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []units.UnitState
	}{
		{name: "mixed states with hashes", in: showOutput(
			strings.Replace(readTestdata(t, "show-mixed.txt"),
				"Id=herd-web-1.service\n", "Id=herd-web-1.service\nNeedDaemonReload=yes\n", 1),
			hashOf('a')+" herd-web-1.service",
			hashOf('b')+" herd-crashy.service",
			hashOf('c')+" herd-dead.service",
			hashOf('d')+" herd-new.service", // a file systemd does not know yet
		), want: []units.UnitState{
			{Unit: "herd-crashy.service", LoadState: "loaded", ActiveState: "activating", SubState: "auto-restart",
				UnitFileState: "enabled", NRestarts: 7, ExecMainStatus: 1,
				ExecMainStartTimestamp: "Tue 2024-05-07 09:15:40 UTC", FileHash: hashOf('b')},
			{Unit: "herd-dead.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed",
				UnitFileState: "disabled", NRestarts: 5, ExecMainStatus: 203,
				ExecMainStartTimestamp: "Tue 2024-05-07 08:00:00 UTC", FileHash: hashOf('c')},
			{Unit: "herd-gone.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead"},
			{Unit: "herd-new.service", FileHash: hashOf('d')},
			{Unit: "herd-web-1.service", LoadState: "loaded", ActiveState: "active", SubState: "running",
				UnitFileState: "enabled", MainPID: 4242, NeedDaemonReload: true,
				ExecMainStartTimestamp: "Tue 2024-05-07 09:12:03 UTC", FileHash: hashOf('a')},
		}},
		{name: "systemd property order", in: showOutput(readTestdata(t, "show-systemd-order.txt"),
			hashOf('e')+" herd-node-exporter.service"), want: []units.UnitState{
			{Unit: "herd-node-exporter.service", LoadState: "loaded", ActiveState: "active", SubState: "running",
				UnitFileState: "enabled", MainPID: 812, NRestarts: 2,
				ExecMainStartTimestamp: "Wed 2024-05-08 17:01:22 CEST", FileHash: hashOf('e')},
		}},
		{name: "old systemd", in: showOutput(readTestdata(t, "show-old-systemd.txt")), want: []units.UnitState{
			{Unit: "herd-legacy.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead",
				UnitFileState: "static"},
		}},
		{name: "files only", in: showOutput("", hashOf('1')+" herd-b.service", hashOf('2')+" herd-a.service"),
			want: []units.UnitState{{Unit: "herd-a.service", FileHash: hashOf('2')}, {Unit: "herd-b.service", FileHash: hashOf('1')}}},
		{name: "sha256sum format and binary mark", in: showOutput("Id=herd-a.service\n",
			hashOf('f')+"  *herd-a.service"),
			want: []units.UnitState{{Unit: "herd-a.service", FileHash: hashOf('f')}}},
		{name: "not herd units skipped", in: showOutput("Id=herd-a.service\n",
			hashOf('0')+" herd-A.service", hashOf('0')+" sshd.service", hashOf('0')+" herd-.service"),
			want: []units.UnitState{{Unit: "herd-a.service"}}},
		{name: "marker without final newline", in: "Id=herd-a.service\n" + hashMarker,
			want: []units.UnitState{{Unit: "herd-a.service"}}},
		{name: "crlf", in: "Id=herd-a.service\r\nActiveState=active\r\n" + hashMarker + "\r\n" + hashOf('9') + " herd-a.service\r\n",
			want: []units.UnitState{{Unit: "herd-a.service", ActiveState: "active", FileHash: hashOf('9')}}},
		{name: "disconnect marks", in: showOutput("Id=herd-a.service\nActiveState=inactive\n\nId=herd-b.service\n",
			hashOf('a')+" herd-a.service", hashOf('c')+" herd-c.service",
			disconnectMarker, "herd-a.service", "herd-c.service", "herd-unlisted.service", "sshd.service"),
			want: []units.UnitState{
				{Unit: "herd-a.service", ActiveState: "inactive", FileHash: hashOf('a'), DisconnectMark: true},
				{Unit: "herd-b.service"},
				{Unit: "herd-c.service", FileHash: hashOf('c'), DisconnectMark: true},
			}},
		{name: "timers", in: showOutput("Id=herd-job-a.service\nActiveState=inactive\nExecMainExitTimestamp=Tue 2024-05-07 03:00:01 UTC\nResult=exit-code\n"+
			"ExecMainStartTimestampMonotonic=1000000\nExecMainExitTimestampMonotonic=1250000\n",
			hashOf('a')+" herd-job-a.service",
			timerMarker, "Id=herd-job-a.timer", "LoadState=loaded", "ActiveState=active", "",
			"Id=herd-orphan.timer", "LoadState=loaded", "ActiveState=active", "",
			"Id=herd-gone.timer", "LoadState=not-found", "ActiveState=inactive",
			timerHashMarker, hashOf('b')+" herd-job-a.timer", hashOf('c')+" herd-orphan.timer", hashOf('d')+" sshd.timer"),
			want: []units.UnitState{
				{Unit: "herd-gone.service"},
				{Unit: "herd-job-a.service", ActiveState: "inactive", ExecMainExitTimestamp: "Tue 2024-05-07 03:00:01 UTC", Result: "exit-code",
					ExecMainStartMonotonic: 1000000, ExecMainExitMonotonic: 1250000,
					FileHash: hashOf('a'), TimerActiveState: "active", TimerFileHash: hashOf('b')},
				{Unit: "herd-orphan.service", TimerActiveState: "active", TimerFileHash: hashOf('c')},
			}},
		{name: "instances", in: showOutput("Id=herd-tick.service\nActiveState=inactive\n",
			hashOf('a')+" herd-tick.service",
			instanceMarker,
			"Id=herd-tick@bbb.service", "ActiveState=active", "SubState=running", "ExecMainStartTimestampMonotonic=300", "",
			"Id=herd-tick@aaa.service", "ActiveState=active", "SubState=exited", "Result=success", "ExecMainStartTimestampMonotonic=100",
			"ExecMainStartTimestamp=Tue 2024-05-07 03:00:00 UTC", "ExecMainExitTimestamp=Tue 2024-05-07 03:00:12 UTC", "",
			"Id=herd-gone@ccc.service", "LoadState=not-found", "",
			"Id=herd-orph@ddd.service", "ActiveState=failed", "SubState=failed", "ExecMainStatus=3", "",
			// A run that failed after its job's template was removed: not
			// found, but loaded until reset, so listed to be reset.
			"Id=herd-del@eee.service", "LoadState=not-found", "ActiveState=failed", "SubState=failed", "",
			"Id=herd-del@fff.service", "LoadState=not-found", "ActiveState=inactive", "SubState=dead", "",
			"Id=herd-tick.service", "ActiveState=active", "",
			"Id=sshd@1.service", "ActiveState=active",
			timerMarker, "Id=herd-tick.timer", "ActiveState=active", timerHashMarker),
			want: []units.UnitState{
				{Unit: "herd-del.service", Instances: []units.UnitState{
					{Unit: "herd-del@eee.service", LoadState: "not-found", ActiveState: "failed", SubState: "failed"}}},
				{Unit: "herd-orph.service", Instances: []units.UnitState{
					{Unit: "herd-orph@ddd.service", ActiveState: "failed", SubState: "failed", ExecMainStatus: 3}}},
				{Unit: "herd-tick.service", ActiveState: "inactive", FileHash: hashOf('a'), TimerActiveState: "active", Instances: []units.UnitState{
					{Unit: "herd-tick@aaa.service", ActiveState: "active", SubState: "exited", Result: "success", ExecMainStartMonotonic: 100,
						ExecMainStartTimestamp: "Tue 2024-05-07 03:00:00 UTC", ExecMainExitTimestamp: "Tue 2024-05-07 03:00:12 UTC"},
					{Unit: "herd-tick@bbb.service", ActiveState: "active", SubState: "running", ExecMainStartMonotonic: 300}}},
			}},
		{name: "disconnect marker, no hashes", in: "Id=herd-a.service\n" + hashMarker + "\n" + disconnectMarker + "\nherd-a.service\n",
			want: []units.UnitState{{Unit: "herd-a.service", DisconnectMark: true}}},
		{name: "disconnect marker at the very end", in: "Id=herd-a.service\n" + hashMarker + "\n" + disconnectMarker,
			want: []units.UnitState{{Unit: "herd-a.service"}}},
		{name: "artifact failures", in: showOutput("Id=herd-a.service\n\nId=herd-b.service\n",
			hashOf('1')+" herd-a.service", artifactMarker,
			"herd-a.service unreachable http://f/x: HTTP status 404",
			"herd-b.service nonsense here", "herd-c.service mismatch not listed", ""),
			want: []units.UnitState{{Unit: "herd-a.service", FileHash: hashOf('1'), ArtifactFailure: "unreachable http://f/x: HTTP status 404"},
				{Unit: "herd-b.service"}}},
		{name: "empty", in: "", want: nil},
		{name: "only blank lines", in: "\n\n\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShowUnits([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseShowUnits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseShowUnitsErrors(t *testing.T) {
	tests := []struct {
		name, in, wantSub string
	}{
		{"no marker", "Id=herd-a.service\nActiveState=active\n", "no \"@@herd-hashes@@\" line"},
		{"marker inside a line", "Id=herd-a.service@@herd-hashes@@\n", "no \"@@herd-hashes@@\" line"},
		{"no Id", showOutput("ActiveState=active\n\nId=herd-b.service\n"), "without Id"},
		{"not key=value", showOutput("Id=herd-a.service\ngarbage\n"), `line 2: "garbage" is not Key=Value`},
		{"bad number", showOutput("Id=herd-a.service\nMainPID=12x\n"), `MainPID="12x" is not a number`},
		{"short hash", showOutput("", "abc herd-a.service"), `hash line 1: "abc herd-a.service"`},
		{"upper-case hash", showOutput("", strings.Repeat("A", 64)+" herd-a.service"), "hash line 1"},
		{"no name", showOutput("", "", hashOf('a')), "hash line 2"},
		{"name with blank", showOutput("", hashOf('a')+" herd-a b.service"), "hash line 1"},
		{"timers cut short", showOutput("Id=herd-a.service\n", timerMarker, "Id=herd-a.timer"), "after the timers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseShowUnits([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantSub)
			}
		})
	}
}

// TestShowUnitsScriptSyntax checks the fixed script parses as POSIX sh and
// carries the property list.
func TestShowUnitsScriptSyntax(t *testing.T) {
	script := showUnitsScript()
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s", err, out)
	}
	if want := "--property=" + strings.Join(units.ShowProperties(), ","); !strings.Contains(script, want) {
		t.Errorf("script lacks %q", want)
	}
}

// neverDial is an executor whose every dial fails the test: input
// validation must refuse before any connection.
func neverDial(t *testing.T) *Executor {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Signers = []ssh.Signer{sshdtestSigner(t)}
	cfg.HostKeys = HostKeyLookupFunc(func(node string) (string, ssh.PublicKey, error) {
		t.Errorf("dialled %s", node)
		return "", nil, errors.New("no")
	})
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func sshdtestSigner(t *testing.T) ssh.Signer { return testutil.SSHSigner(t) }

func TestInputValidation(t *testing.T) {
	e := neverDial(t)
	ctx := testCtx(t)
	var sink bytes.Buffer
	tests := []struct {
		name string
		call func() error
	}{
		{"verb", func() error { return e.Systemctl(ctx, "b1", "mask", "herd-a.service") }},
		{"verb daemon-reload", func() error { return e.Systemctl(ctx, "b1", "daemon-reload", "herd-a.service") }},
		{"no units", func() error { return e.Systemctl(ctx, "b1", "start") }},
		{"option as unit", func() error { return e.Systemctl(ctx, "b1", "start", "--all.service") }},
		{"unit without suffix", func() error { return e.Systemctl(ctx, "b1", "stop", "herd-a") }},
		{"unit with space", func() error { return e.Systemctl(ctx, "b1", "stop", "herd a.service") }},
		{"unit with slash", func() error { return e.Systemctl(ctx, "b1", "stop", "../x.service") }},
		{"run empty argv", func() error { _, err := e.Run(ctx, "b1", nil); return err }},
		{"stream dash argv0", func() error { return e.Stream(ctx, "b1", []string{"-x"}, &sink) }},
		{"empty node", func() error { _, err := e.Run(ctx, "", []string{"true"}); return err }},
		{"read relative", func() error { _, err := e.ReadFile(ctx, "b1", "etc/passwd"); return err }},
		{"remove root", func() error { return e.Remove(ctx, "b1", "/") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestValidInputsAccepted(t *testing.T) {
	for _, u := range []string{"herd-web-1.service", "herd-a.timer", "getty@tty1.service", `herd-x\x2dy.service`} {
		if !isUnitName(u) {
			t.Errorf("isUnitName(%q) = false", u)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Signers = []ssh.Signer{sshdtestSigner(t)}
		c.HostKeys = HostKeyLookupFunc(func(string) (string, ssh.PublicKey, error) { return "", nil, nil })
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantSub string
	}{
		{"user", func(c *Config) { c.User = "" }, "User"},
		{"signers", func(c *Config) { c.Signers = nil }, "Signers"},
		{"nil signer", func(c *Config) { c.Signers = []ssh.Signer{nil} }, "Signers[0]"},
		{"host keys", func(c *Config) { c.HostKeys = nil }, "HostKeys"},
		{"dial timeout", func(c *Config) { c.DialTimeout = 0 }, "DialTimeout"},
		{"keepalive", func(c *Config) { c.KeepaliveInterval = -1 }, "KeepaliveInterval"},
		{"keepalive max", func(c *Config) { c.KeepaliveMax = 0 }, "KeepaliveMax"},
		{"sessions", func(c *Config) { c.MaxSessionsPerNode = 0 }, "MaxSessionsPerNode"},
		{"backoff", func(c *Config) { c.BackoffMax = c.BackoffBase / 2 }, "BackoffMax"},
		{"output", func(c *Config) { c.MaxOutputBytes = 0 }, "MaxOutputBytes"},
		{"read", func(c *Config) { c.MaxReadFileBytes = 0 }, "MaxReadFileBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("Validate = %v, want ErrInvalidConfig naming %s", err, tt.wantSub)
			}
			if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	c := valid()
	c.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "missing")}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New with a missing known_hosts file = %v, want ErrInvalidConfig", err)
	}
}

func TestBackoffDelay(t *testing.T) {
	base, max := 250*time.Millisecond, 5*time.Second
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 125 * time.Millisecond},
		{1, 0.999999, 249999875 * time.Nanosecond},
		{2, 0, 250 * time.Millisecond},
		{3, 0.5, 750 * time.Millisecond},
		{5, 0, 2 * time.Second},
		{6, 0, 2500 * time.Millisecond}, // 8 s capped at 5 s
		{6, 0.5, 3750 * time.Millisecond},
		{100, 0.999, 4997500 * time.Microsecond},
	}
	for _, tt := range tests {
		if got := backoffDelay(tt.n, base, max, tt.r); got != tt.want {
			t.Errorf("backoffDelay(%d, r=%v) = %v, want %v", tt.n, tt.r, got, tt.want)
		}
	}
}

func TestCutMarkLine(t *testing.T) {
	for _, tt := range []struct{ in, mark, rest string }{
		{"", "", ""},
		{"Id=x\n", "", "Id=x\n"},
		{markPrefix + "\n", "", ""},
		{markPrefix + "1 2\nId=x\n", "1 2", "Id=x\n"},
		{markPrefix + strings.Repeat("9", maxMark+1) + "\nId=x\n", "", "Id=x\n"},
	} {
		mark, rest := cutMarkLine([]byte(tt.in))
		if mark != tt.mark || string(rest) != tt.rest {
			t.Errorf("cutMarkLine(%q) = %q, %q; want %q, %q", tt.in, mark, rest, tt.mark, tt.rest)
		}
	}
}

// TestShowUnitsScriptHashes runs the ShowUnits script locally (no ssh),
// on a board in temporary directories (listFixture), so the file listing
// and hashing that TestSystemdOverSSH cannot reach on a real host are
// exercised, with each shell a board may have; ListLocal on the same
// board must give the same. The fake systemctl's show prints an Id block
// per unit asked.
func TestShowUnitsScriptHashes(t *testing.T) {
	f := newListFixture(t)
	files := mixedBoard(t, f)
	want := []units.UnitState{
		{Unit: "herd-gone.service", LoadState: "loaded"},
		{Unit: "herd-new.service", LoadState: "loaded", FileHash: units.Hash([]byte(files["herd-new.service"])), DisconnectMark: true},
		{Unit: "herd-orph.service", Instances: []units.UnitState{{Unit: "herd-orph@2.service", LoadState: "loaded"}}},
		{Unit: "herd-web-1.service", LoadState: "loaded", FileHash: units.Hash([]byte(files["herd-web-1.service"])),
			ArtifactFailure: "mismatch http://files.lan/x: sha256 of the 3 bytes downloaded is abc, want def",
			Instances:       []units.UnitState{{Unit: "herd-web-1@abc1.service", LoadState: "loaded"}}},
	}
	check := func(t *testing.T, out []byte) {
		t.Helper()
		got, mark, err := ParseListing(out)
		if err != nil {
			t.Fatalf("ParseListing: %v\noutput:\n%s", err, out)
		}
		if mark != "1764700000000000000 42" {
			t.Errorf("mark = %q, want the seq file's first line", mark)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("listing (-want +got):\n%s\noutput:\n%s", diff, out)
		}
	}
	// Boards run it with their sh: dash (Debian), bash, or BusyBox ash.
	shells := [][]string{{"sh"}, {"bash", "--posix"}, {"busybox", "sh"}}
	for _, sh := range shells {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			if _, err := exec.LookPath(sh[0]); err != nil {
				t.Skipf("no %s here", sh[0])
			}
			out, stderr, err := f.runScript(sh...)
			if err != nil {
				t.Fatalf("script: %v\n%s", err, stderr)
			}
			check(t, out)
		})
	}
	t.Run("ListLocal", func(t *testing.T) {
		out, err := f.lister().list(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		check(t, out)
	})
}

// fakeSystemd installs a fake systemctl into dir. It logs its argv
// (NUL-separated, one line per call) and prints canned output: list-units
// prints list-units.out (or fails if list-units.fail exists), show prints
// show.out.
func fakeSystemd(t *testing.T, dir string) {
	t.Helper()
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("systemctl", `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/systemctl.log"
printf '\n' >> "$d/systemctl.log"
case "$1" in
list-units) [ -e "$d/list-units.fail" ] && { echo "Failed to connect to bus: No such file or directory" >&2; exit 1; }
	cat "$d/list-units.out" ;;
show) cat "$d/show.out" ;;
start) case "$*" in *missing*) echo "Failed to start herd-missing.service: Unit herd-missing.service not found." >&2; exit 5;; esac ;;
esac
`, 0o755)
	write("list-units.out", "herd-web-1.service loaded active running herd pod web-1\n"+
		"herd-gone.service not-found inactive dead herd-gone.service\n", 0o644)
	write("show.out", readTestdata(t, "show-mixed.txt"), 0o644)
}

// calls returns the logged argv of each call to a fake tool.
func calls(t *testing.T, dir, tool string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, tool+".log"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		out = append(out, strings.Split(strings.TrimSuffix(line, "\x00"), "\x00"))
	}
	return out
}

// TestSystemdOverSSH runs the systemd helpers against a real sshd and a
// fake systemctl. The ShowUnits script reads UnitDir, which is fixed: on
// the test host it holds no herd unit files, so no hashes come back here
// (TestParseShowUnits covers them).
func TestSystemdOverSSH(t *testing.T) {
	if m, _ := filepath.Glob(filepath.Join(UnitDir, "herd-*.service")); len(m) > 0 {
		t.Skipf("this host has herd unit files in %s: %v", UnitDir, m)
	}
	bin := t.TempDir()
	fakeSystemd(t, bin)
	srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{"PATH=" + bin + ":/usr/bin:/bin:/usr/sbin:/sbin"}})
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)

	t.Run("ShowUnits", func(t *testing.T) {
		os.Remove(filepath.Join(bin, "systemctl.log"))
		got, err := e.ShowUnits(ctx, "b1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range got {
			names = append(names, u.Unit)
		}
		wantNames := []string{"herd-crashy.service", "herd-dead.service", "herd-gone.service", "herd-web-1.service"}
		if diff := cmp.Diff(wantNames, names); diff != "" {
			t.Errorf("units (-want +got):\n%s", diff)
		}
		if len(got) == 4 && (got[3].ActiveState != "active" || got[3].MainPID != 4242) {
			t.Errorf("herd-web-1.service = %+v", got[3])
		}
		want := [][]string{
			{"list-units", "--all", "--plain", "--no-legend", "--no-pager", "--type=service,timer", "--", "herd-*.service", "herd-*.timer"},
			{"show", "--all", "--no-pager", "--property=" + strings.Join(units.ShowProperties(), ","), "--",
				"herd-gone.service", "herd-web-1.service"},
		}
		if diff := cmp.Diff(want, calls(t, bin, "systemctl")); diff != "" {
			t.Errorf("systemctl calls (-want +got):\n%s", diff)
		}
	})

	t.Run("ShowUnits none", func(t *testing.T) {
		os.Remove(filepath.Join(bin, "systemctl.log"))
		if err := os.WriteFile(filepath.Join(bin, "list-units.out"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := e.ShowUnits(ctx, "b1")
		if err != nil || len(got) != 0 {
			t.Fatalf("ShowUnits = %v, %v; want none", got, err)
		}
		if got := calls(t, bin, "systemctl"); len(got) != 1 {
			t.Errorf("systemctl called %d times, want 1 (no show): %q", len(got), got)
		}
	})

	t.Run("ShowUnits systemctl fails", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(bin, "list-units.fail"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(bin, "list-units.fail"))
		got, err := e.ShowUnits(ctx, "b1")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Status != 1 || !strings.Contains(err.Error(), "Failed to connect to bus") {
			t.Errorf("ShowUnits = %v, %v; want *ExitError status 1 with systemctl's message", got, err)
		}
	})

	t.Run("Systemctl", func(t *testing.T) {
		os.Remove(filepath.Join(bin, "systemctl.log"))
		if err := e.DaemonReload(ctx, "b1"); err != nil {
			t.Fatal(err)
		}
		if err := e.Systemctl(ctx, "b1", "enable", "herd-a.service", "herd-b.service"); err != nil {
			t.Fatal(err)
		}
		if err := e.Systemctl(ctx, "b1", "enable-now", "herd-c.service"); err != nil {
			t.Fatal(err)
		}
		err := e.Systemctl(ctx, "b1", "start", "herd-missing.service")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Status != 5 || !strings.Contains(err.Error(), "not found") {
			t.Errorf("start of a missing unit: %v, want *ExitError status 5", err)
		}
		want := [][]string{
			{"daemon-reload"},
			{"enable", "--", "herd-a.service", "herd-b.service"},
			{"--no-reload", "enable", "--now", "--", "herd-c.service"},
			{"start", "--", "herd-missing.service"},
		}
		if diff := cmp.Diff(want, calls(t, bin, "systemctl")); diff != "" {
			t.Errorf("systemctl calls (-want +got):\n%s", diff)
		}
	})
}
