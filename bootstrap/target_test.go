package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitTarget(t *testing.T) {
	tests := []struct {
		arg     string
		user    string
		host    string
		port    int
		wantErr string
	}{
		{arg: "pi1", host: "pi1"},
		{arg: "pi@pi1", user: "pi", host: "pi1"},
		{arg: "root@10.0.0.2:2222", user: "root", host: "10.0.0.2", port: 2222},
		{arg: "10.0.0.2", host: "10.0.0.2"},
		{arg: "[fe80::1]:22", host: "fe80::1", port: 22},
		{arg: "root@[::1]", user: "root", host: "::1"},
		{arg: "::1", host: "::1"},
		{arg: "a@b@host", user: "a@b", host: "host"},
		{arg: "", wantErr: "empty"},
		{arg: "@pi1", wantErr: "empty user"},
		{arg: "pi@", wantErr: "empty host"},
		{arg: "pi1:0", wantErr: "want 1-65535"},
		{arg: "pi1:ssh", wantErr: "want 1-65535"},
		{arg: "pi1:70000", wantErr: "want 1-65535"},
		{arg: "-oProxyCommand=x", wantErr: "starts with '-'"},
		{arg: "-l@pi1", wantErr: "user starts with '-'"},
		{arg: "pi 1", wantErr: "space"},
		{arg: "pi1/x", wantErr: "slash"},
		{arg: "[::1", wantErr: "missing ']'"},
		{arg: "[::1]x", wantErr: "want [host]:port"},
		{arg: "fe80::1:22:x", wantErr: "[addr]:port"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			user, host, port, err := SplitTarget(tt.arg)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SplitTarget(%q) err = %v, want %q", tt.arg, err, tt.wantErr)
				}
				return
			}
			if err != nil || user != tt.user || host != tt.host || port != tt.port {
				t.Fatalf("SplitTarget(%q) = %q, %q, %d, %v; want %q, %q, %d", tt.arg, user, host, port, err, tt.user, tt.host, tt.port)
			}
		})
	}
}

func TestSSHConfigResolve(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	user := writeFile(t, dir, "config", []byte(`
Host pi1
  HostName 10.0.0.2
  User pi
  Port 2222
  IdentityFile ~/.ssh/pi_key
  UserKnownHostsFile ~/.ssh/lab_hosts /etc/lab_hosts

Host *.lab
  HostName %h.example.net
  IdentityFile ~/.ssh/%r@%h

Host *
  IdentityFile ~/.ssh/id_common
`), 0o644)
	system := writeFile(t, dir, "ssh_config", []byte(`
Host pi1
  User ignored
  Port 9999
Host sys
  User sysuser
`), 0o644)
	c, err := LoadSSHConfig([]string{user}, []string{system, filepath.Join(dir, "missing")}, home, "me")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg  string
		want Target
	}{
		{"pi1", Target{Arg: "pi1", Alias: "pi1", User: "pi", Host: "10.0.0.2", Port: 2222,
			IdentityFiles:   []string{home + "/.ssh/pi_key", home + "/.ssh/id_common"},
			KnownHostsFiles: []string{home + "/.ssh/lab_hosts", "/etc/lab_hosts"}}},
		{"root@pi1:22", Target{Arg: "root@pi1:22", Alias: "pi1", User: "root", Host: "10.0.0.2", Port: 22,
			IdentityFiles:   []string{home + "/.ssh/pi_key", home + "/.ssh/id_common"},
			KnownHostsFiles: []string{home + "/.ssh/lab_hosts", "/etc/lab_hosts"}}},
		{"b1.lab", Target{Arg: "b1.lab", Alias: "b1.lab", User: "me", Host: "b1.lab.example.net", Port: 22,
			IdentityFiles: []string{home + "/.ssh/me@b1.lab.example.net", home + "/.ssh/id_common"}}},
		{"sys", Target{Arg: "sys", Alias: "sys", User: "sysuser", Host: "sys", Port: 22,
			IdentityFiles: []string{home + "/.ssh/id_common"}}},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, err := c.Resolve(tt.arg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve(%q) (-want +got):\n%s", tt.arg, diff)
			}
		})
	}
	t.Run("nil config", func(t *testing.T) {
		var none *SSHConfig
		got, err := none.Resolve("root@10.0.0.9")
		if err != nil || got.Addr() != "10.0.0.9:22" || got.User != "root" {
			t.Errorf("Resolve = %+v, %v", got, err)
		}
		if _, err := none.Resolve("10.0.0.9"); err == nil || !strings.Contains(err.Error(), "no user") {
			t.Errorf("Resolve without user: err = %v", err)
		}
	})
	t.Run("required file missing", func(t *testing.T) {
		if _, err := LoadSSHConfig([]string{filepath.Join(dir, "nope")}, nil, home, "me"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want not exist", err)
		}
	})
	t.Run("bad port in config", func(t *testing.T) {
		p := writeFile(t, dir, "badport", []byte("Host x\n  Port abc\n"), 0o644)
		c, err := LoadSSHConfig([]string{p}, nil, home, "me")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resolve("x"); err == nil || !strings.Contains(err.Error(), "Port for x") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		p := writeFile(t, dir, "badtoken", []byte("Host x\n  IdentityFile ~/.ssh/%C\n"), 0o644)
		c, err := LoadSSHConfig([]string{p}, nil, home, "me")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resolve("x"); err == nil || !strings.Contains(err.Error(), "%C") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestTargetHostPort(t *testing.T) {
	for _, tt := range []struct {
		t    Target
		want string
	}{
		{Target{Host: "pi1", Port: 22}, "pi1"},
		{Target{Host: "pi1", Port: 2222}, "pi1:2222"},
		{Target{Host: "::1", Port: 22}, "[::1]"},
		{Target{Host: "::1", Port: 2222}, "[::1]:2222"},
	} {
		if got := tt.t.HostPort(); got != tt.want {
			t.Errorf("HostPort(%+v) = %q, want %q", tt.t, got, tt.want)
		}
		if u, h, p, err := SplitTarget(tt.t.HostPort()); err != nil || u != "" || h != tt.t.Host || (p != 0 && p != tt.t.Port) {
			t.Errorf("SplitTarget(HostPort(%+v)) = %q %q %d %v: does not round-trip", tt.t, u, h, p, err)
		}
	}
}
