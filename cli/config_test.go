package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/client"
)

func TestResolveTarget(t *testing.T) {
	cfg := config{
		CurrentContext: "lab",
		Contexts: []configContext{
			{Name: "lab", Addrs: []string{"http://10.0.0.2:7948", "10.0.0.3:7948"}, Token: "labtok",
				SSH: &sshConfig{User: "pi", Hosts: []string{"pi1"}}},
			{Name: "home", Addrs: []string{"unix:///run/herd/api.sock"}, Token: "hometok"},
			{Name: "tokenonly", Token: "t"},
		},
	}
	tests := []struct {
		name    string
		in      targetInput
		env     map[string]string
		want    target
		wantErr string
	}{
		{name: "nothing: default address",
			in:   targetInput{},
			want: target{Addrs: []string{client.DefaultAddr}}},
		{name: "current context",
			in:   targetInput{Config: cfg},
			want: target{Addrs: []string{"http://10.0.0.2:7948", "http://10.0.0.3:7948"}, Token: "labtok", Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "env beats current context",
			in:   targetInput{Config: cfg},
			env:  map[string]string{"HERD_ADDR": "http://a:1, http://b:2", "HERD_TOKEN": "envtok"},
			want: target{Addrs: []string{"http://a:1", "http://b:2"}, Token: "envtok", Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "flag beats env",
			in:   targetInput{Config: cfg, FlagAddrs: []string{"http://f:1", "/run/herd.sock"}, FlagToken: "flagtok"},
			env:  map[string]string{"HERD_ADDR": "http://a:1", "HERD_TOKEN": "envtok"},
			want: target{Addrs: []string{"http://f:1", "unix:///run/herd.sock"}, Token: "flagtok", Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "explicit context beats env",
			in:   targetInput{Config: cfg, FlagContext: "home"},
			env:  map[string]string{"HERD_ADDR": "http://a:1", "HERD_TOKEN": "envtok"},
			want: target{Addrs: []string{"unix:///run/herd/api.sock"}, Token: "hometok", Context: "home"}},
		{name: "context without addrs defers to env",
			in:   targetInput{Config: cfg, FlagContext: "tokenonly"},
			env:  map[string]string{"HERD_ADDR": "http://a:1"},
			want: target{Addrs: []string{"http://a:1"}, Token: "t", Context: "tokenonly"}},
		{name: "context without addrs and no env: default",
			in:   targetInput{Config: cfg, FlagContext: "tokenonly"},
			want: target{Addrs: []string{client.DefaultAddr}, Token: "t", Context: "tokenonly"}},
		{name: "unknown explicit context",
			in:      targetInput{Config: cfg, FlagContext: "nope"},
			wantErr: `context "nope" is not in the config file`},
		{name: "dangling current context",
			in:      targetInput{Config: config{CurrentContext: "gone"}},
			wantErr: `current_context "gone" is not in the config file`},
		{name: "bad flag address",
			in:      targetInput{FlagAddrs: []string{"ftp://x"}},
			wantErr: `scheme "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Getenv = func(k string) string { return tt.env[k] }
			got, err := resolveTarget(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultConfigPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/herd/config.toml"},
		{"relative xdg is ignored", map[string]string{"XDG_CONFIG_HOME": "x", "HOME": "/h"}, "/h/.config/herd/config.toml"},
		{"home", map[string]string{"HOME": "/h"}, "/h/.config/herd/config.toml"},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultConfigPath(func(k string) string { return tt.env[k] })
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseConfigStrict(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		{"ok", `current_context = "lab"
[[context]]
name = "lab"
addrs = ["http://a:1"]
ssh = { user = "pi", key = "~/.ssh/id", known_hosts = "~/.ssh/known_hosts", hosts = ["pi1", "pi2"] }
`, ""},
		{"unknown top-level key", "current = \"lab\"\n", "unknown key(s) current"},
		{"unknown context key", "[[context]]\nname = \"a\"\naddr = \"x\"\n", "unknown key(s) context.addr"},
		{"unknown ssh key", "[[context]]\nname = \"a\"\n[context.ssh]\nport = 22\n", "context.ssh.port"},
		{"syntax error with position", "current_context = \n", "c.toml:1:"},
		{"duplicate context", "[[context]]\nname = \"a\"\n[[context]]\nname = \"a\"\n", `name "a" is used twice`},
		{"empty name", "[[context]]\naddrs = [\"http://a:1\"]\n", "name is empty"},
		{"bad address", "[[context]]\nname = \"a\"\naddrs = [\"ftp://x\"]\n", `context "a": addrs[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("c.toml", []byte(tt.data))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSaveConfigRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.toml")
	want := config{CurrentContext: "lab", Contexts: []configContext{
		{Name: "lab", Addrs: []string{"http://a:1"}, Token: "secret",
			SSH: &sshConfig{User: "pi", Key: "~/.ssh/id_ed25519", KnownHosts: "~/.ssh/known_hosts", Hosts: []string{"pi1", "pi2"}}},
		{Name: "other"},
	}}
	if err := saveConfig(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if _, err := loadConfig(filepath.Join(t.TempDir(), "missing.toml")); err != nil {
		t.Errorf("missing file: %v, want an empty config", err)
	}
}

func TestConfigCommands(t *testing.T) {
	h := newHarness(t)
	path := filepath.Join(h.env["HOME"], ".config", "herd", "config.toml")

	_, errOut := h.mustRun(0, "config", "get-contexts")
	if !strings.Contains(errOut, "No contexts") {
		t.Errorf("get-contexts on no file: %q", errOut)
	}
	out, _ := h.mustRun(0, "config", "set-context", "lab", "--addr", "10.0.0.2:7948,http://10.0.0.3:7948", "--token", "tok")
	if out != "Context \"lab\" created and made current.\n" {
		t.Errorf("set-context: %q", out)
	}
	h.mustRun(0, "config", "set-context", "home", "--addr", "unix:///run/herd/api.sock")
	out, _ = h.mustRun(0, "config", "set-context", "lab", "--addr", "http://10.0.0.4:7948")
	if out != "Context \"lab\" modified.\n" {
		t.Errorf("set-context again: %q", out)
	}
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := config{CurrentContext: "lab", Contexts: []configContext{
		{Name: "lab", Addrs: []string{"http://10.0.0.4:7948"}, Token: "tok"},
		{Name: "home", Addrs: []string{"unix:///run/herd/api.sock"}},
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	// The current context is used for requests; --addr still wins.
	h.mustRun(0, "status")
	h.mustRun(0, "status", "--addr", "http://x:1")
	h.mustRun(0, "status", "--context", "home")
	var got [][]string
	for _, tg := range h.targets {
		got = append(got, tg.Addrs)
	}
	if diff := cmp.Diff([][]string{{"http://10.0.0.4:7948"}, {"http://x:1"}, {"unix:///run/herd/api.sock"}}, got); diff != "" {
		t.Errorf("addresses used (-want +got):\n%s", diff)
	}

	out, _ = h.mustRun(0, "config", "use-context", "home")
	if out != "Switched to context \"home\".\n" {
		t.Errorf("use-context: %q", out)
	}
	out, _ = h.mustRun(0, "config", "get-contexts")
	golden(t, "config_get_contexts.golden", out)

	_, errOut = h.mustRun(1, "config", "use-context", "nope")
	if !strings.Contains(errOut, `error: context "nope" is not in`) {
		t.Errorf("use-context nope: %q", errOut)
	}
	h.mustRun(2, "config", "use-context")
	h.mustRun(2, "config", "set-context", "x", "--addr", "ftp://nope")

	// XDG_CONFIG_HOME moves the file; --config overrides both.
	h.env["XDG_CONFIG_HOME"] = t.TempDir()
	h.mustRun(0, "config", "set-context", "xdg")
	if _, err := os.Stat(filepath.Join(h.env["XDG_CONFIG_HOME"], "herd", "config.toml")); err != nil {
		t.Error(err)
	}
	explicit := filepath.Join(t.TempDir(), "my.toml")
	h.mustRun(0, "--config", explicit, "config", "set-context", "mine")
	if c, err := loadConfig(explicit); err != nil || c.CurrentContext != "mine" {
		t.Errorf("--config file: %+v, %v", c, err)
	}

	// A broken config file is an error for commands that need it.
	if err := os.WriteFile(explicit, []byte("bogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut = h.mustRun(1, "--config", explicit, "get", "pods")
	if !strings.Contains(errOut, "unknown key(s) bogus") {
		t.Errorf("broken config: %q", errOut)
	}
}
