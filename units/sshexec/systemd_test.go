package sshexec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

func TestParseShow(t *testing.T) {
	tests := []struct {
		name string
		file string // under testdata, or "" for in
		in   string
		want []UnitState
	}{
		{name: "mixed states", file: "show-mixed.txt", want: []UnitState{
			{Unit: "herd-crashy.service", LoadState: "loaded", ActiveState: "activating", SubState: "auto-restart",
				UnitFileState: "enabled", FragmentPath: "/etc/systemd/system/herd-crashy.service",
				NRestarts: 7, ExecMainStatus: 1, ExecMainStartTimestamp: "Tue 2024-05-07 09:15:40 UTC"},
			{Unit: "herd-dead.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed",
				UnitFileState: "disabled", FragmentPath: "/etc/systemd/system/herd-dead.service",
				NRestarts: 5, ExecMainStatus: 203, ExecMainStartTimestamp: "Tue 2024-05-07 08:00:00 UTC"},
			{Unit: "herd-gone.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead"},
			{Unit: "herd-web-1.service", LoadState: "loaded", ActiveState: "active", SubState: "running",
				UnitFileState: "enabled", FragmentPath: "/etc/systemd/system/herd-web-1.service",
				MainPID: 4242, ExecMainStartTimestamp: "Tue 2024-05-07 09:12:03 UTC"},
		}},
		{name: "systemd property order", file: "show-systemd-order.txt", want: []UnitState{
			{Unit: "herd-node-exporter.service", LoadState: "loaded", ActiveState: "active", SubState: "running",
				UnitFileState: "enabled", FragmentPath: "/etc/systemd/system/herd-node-exporter.service",
				MainPID: 812, NRestarts: 2, ExecMainStartTimestamp: "Wed 2024-05-08 17:01:22 CEST"},
		}},
		{name: "old systemd", file: "show-old-systemd.txt", want: []UnitState{
			{Unit: "herd-legacy.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead",
				UnitFileState: "static", FragmentPath: "/etc/systemd/system/herd-legacy.service"},
		}},
		{name: "empty", in: "", want: nil},
		{name: "only blank lines", in: "\n\n\n", want: nil},
		{name: "crlf", in: "Id=herd-a.service\r\nActiveState=active\r\n", want: []UnitState{{Unit: "herd-a.service", ActiveState: "active"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if tt.file != "" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ParseShow(in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseShow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseShowErrors(t *testing.T) {
	tests := []struct {
		name, in, wantSub string
	}{
		{"no Id", "ActiveState=active\n\nId=herd-b.service\n", "no Id"},
		{"not key=value", "Id=herd-a.service\ngarbage\n", `line 2: "garbage" is not Key=Value`},
		{"bad number", "Id=herd-a.service\nMainPID=12x\n", `line 2: MainPID="12x" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseShow([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantSub)
			}
		})
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

func sshdtestSigner(t *testing.T) ssh.Signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
		{"pattern option", func() error { _, err := e.ShowUnits(ctx, "b1", "--all"); return err }},
		{"pattern empty", func() error { _, err := e.ShowUnits(ctx, "b1", ""); return err }},
		{"pattern space", func() error { _, err := e.ShowUnits(ctx, "b1", "herd-* x"); return err }},
		{"journal other unit", func() error { return e.Journal(ctx, "b1", "sshd.service", false, "", &sink) }},
		{"journal uppercase", func() error { return e.Journal(ctx, "b1", "herd-A.service", false, "", &sink) }},
		{"journal empty name", func() error { return e.Journal(ctx, "b1", "herd-.service", false, "", &sink) }},
		{"since with quote", func() error { return e.Journal(ctx, "b1", "herd-a.service", false, "today'", &sink) }},
		{"since with newline", func() error { return e.Journal(ctx, "b1", "herd-a.service", false, "1h\n", &sink) }},
		{"since too long", func() error {
			return e.Journal(ctx, "b1", "herd-a.service", false, strings.Repeat("1", 65), &sink)
		}},
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
	for _, p := range []string{"herd-*", "herd-*.service", "herd-web-[0-9]*"} {
		if !isUnitPattern(p) {
			t.Errorf("isUnitPattern(%q) = false", p)
		}
	}
	for _, s := range []string{"today", "-1h", "2024-05-01 10:00:00", "2024-05-01T10:00:00+02:00", "-30min"} {
		if !isSince(s) {
			t.Errorf("isSince(%q) = false", s)
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

// fakeSystemd installs fake systemctl and journalctl into dir. They log
// their argv (NUL-separated, one file per tool) and print canned output.
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
list-units) cat "$d/list-units.out" ;;
list-unit-files) [ -s "$d/list-unit-files.out" ] || exit 1; cat "$d/list-unit-files.out" ;;
show) cat "$d/show.out" ;;
start) case "$*" in *missing*) echo "Failed to start herd-missing.service: Unit herd-missing.service not found." >&2; exit 5;; esac ;;
esac
`, 0o755)
	write("journalctl", `#!/bin/sh
printf '%s\n' "$@"
case "$*" in *-f*) echo following; exec sleep 60;; esac
`, 0o755)
	write("list-units.out", "herd-web-1.service loaded active running herd pod web-1\n"+
		"herd-gone.service not-found inactive dead herd-gone.service\n", 0o644)
	write("list-unit-files.out", "herd-web-1.service enabled enabled\nherd-idle.service disabled enabled\n", 0o644)
	show, err := os.ReadFile(filepath.Join("testdata", "show-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	write("show.out", string(show), 0o644)
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

func TestSystemdOverSSH(t *testing.T) {
	bin := t.TempDir()
	fakeSystemd(t, bin)
	srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{"PATH=" + bin + ":/usr/bin:/bin:/usr/sbin:/sbin"}})
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)

	t.Run("ShowUnits", func(t *testing.T) {
		os.Remove(filepath.Join(bin, "systemctl.log"))
		units, err := e.ShowUnits(ctx, "b1", "herd-*")
		if err != nil {
			t.Fatal(err)
		}
		if len(units) != 4 || units[0].Unit != "herd-crashy.service" {
			t.Errorf("units = %+v", units)
		}
		want := [][]string{
			{"list-units", "--all", "--plain", "--no-legend", "--no-pager", "--type=service", "--", "herd-*"},
			{"list-unit-files", "--no-legend", "--no-pager", "--type=service", "--", "herd-*"},
			{"show", "--all", "--no-pager", "--property=" + showProperties, "--",
				"herd-gone.service", "herd-idle.service", "herd-web-1.service"},
		}
		if diff := cmp.Diff(want, calls(t, bin, "systemctl")); diff != "" {
			t.Errorf("systemctl calls (-want +got):\n%s", diff)
		}
	})

	t.Run("ShowUnits none", func(t *testing.T) {
		os.Remove(filepath.Join(bin, "systemctl.log"))
		os.WriteFile(filepath.Join(bin, "list-units.out"), nil, 0o644)
		os.WriteFile(filepath.Join(bin, "list-unit-files.out"), nil, 0o644) // exits 1, as systemd >= 246 does
		units, err := e.ShowUnits(ctx, "b1", "herd-*")
		if err != nil || len(units) != 0 {
			t.Fatalf("ShowUnits = %v, %v; want none", units, err)
		}
		if got := calls(t, bin, "systemctl"); len(got) != 2 {
			t.Errorf("systemctl called %d times, want 2 (no show): %q", len(got), got)
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
		err := e.Systemctl(ctx, "b1", "start", "herd-missing.service")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Status != 5 || !strings.Contains(err.Error(), "not found") {
			t.Errorf("start of a missing unit: %v, want *ExitError status 5", err)
		}
		want := [][]string{
			{"daemon-reload"},
			{"enable", "--", "herd-a.service", "herd-b.service"},
			{"start", "--", "herd-missing.service"},
		}
		if diff := cmp.Diff(want, calls(t, bin, "systemctl")); diff != "" {
			t.Errorf("systemctl calls (-want +got):\n%s", diff)
		}
	})

	t.Run("Journal", func(t *testing.T) {
		var out bytes.Buffer
		if err := e.Journal(ctx, "b1", "herd-web-1.service", false, "-1h", &out); err != nil {
			t.Fatal(err)
		}
		want := "-u\nherd-web-1.service\n-o\nshort-iso\n--no-pager\n--since=-1h\n"
		if out.String() != want {
			t.Errorf("journalctl argv:\n%s\nwant\n%s", out.String(), want)
		}
	})

	t.Run("Journal follow", func(t *testing.T) {
		fctx, cancel := context.WithCancel(ctx)
		w := &signalWriter{want: "following", ch: make(chan struct{})}
		errc := make(chan error, 1)
		go func() { errc <- e.Journal(fctx, "b1", "herd-web-1.service", true, "", w) }()
		select {
		case <-w.ch:
		case err := <-errc:
			t.Fatalf("Journal ended early: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("no output within 20s")
		}
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Journal did not return after cancellation")
		}
		if !strings.Contains(w.buf.String(), "-f\n") {
			t.Errorf("journalctl argv lacks -f: %q", w.buf.String())
		}
	})
}
