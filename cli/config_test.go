package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/client"
)

// Tokens of the resolution tables (at least 16 characters).
const (
	labTok  = "lab-token-0123456789"
	homeTok = "home-token-0123456789"
	onlyTok = "only-token-0123456789"
	envTok  = "env-token-0123456789"
	fileTok = "file-token-0123456789"
	devTok  = "dev-token-0123456789"
	ctxFTok = "ctxfile-token-0123456789"
)

func TestResolveTarget(t *testing.T) {
	cfg := config{
		CurrentContext: "lab",
		Contexts: []configContext{
			{Name: "lab", Addrs: []string{"http://10.0.0.2:7948", "10.0.0.3:7948"}, Token: labTok,
				SSH: &sshConfig{User: "pi", Hosts: []string{"pi1"}}},
			{Name: "home", Addrs: []string{"unix:///run/herd/api.sock"}, Token: homeTok},
			{Name: "tokenonly", Token: onlyTok},
			{Name: "filed", Addrs: []string{"http://10.0.0.9:7948"}, TokenFile: "~/.config/herd/clusters/filed/api.token"},
			{Name: "relative", Addrs: []string{"http://10.0.0.9:7948"}, TokenFile: "clusters/rel/api.token"},
			{Name: "missing", Addrs: []string{"http://10.0.0.9:7948"}, TokenFile: "/nope/api.token"},
			{Name: "short", Addrs: []string{"http://10.0.0.9:7948"}, Token: "short"},
		},
	}
	noCurrent := cfg
	noCurrent.CurrentContext = ""
	files := map[string]string{
		"/home/u/.config/herd/clusters/filed/api.token": "# rotated\n" + ctxFTok + "\n" + labTok + "\n",
		"/cfg/clusters/rel/api.token":                   ctxFTok + "\n",
		"/tok/flag":                                     fileTok + "\n",
		"/tok/env":                                      fileTok + "\n",
		"/tok/empty":                                    "\n",
		"/home/u/.config/herd/dev.token":                devTok + "\n",
		"/xdg/herd/dev.token":                           devTok + "\n",
	}
	home := map[string]string{"HOME": "/home/u"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name    string
		in      targetInput
		env     map[string]string
		noFiles bool
		want    target
		wantErr string
	}{
		{name: "nothing: default address, dev token",
			in:   targetInput{},
			env:  home,
			want: target{Addrs: []string{client.DefaultAddr}, Token: devTok}},
		{name: "nothing, no dev token file",
			in: targetInput{}, env: home, noFiles: true,
			want: target{Addrs: []string{client.DefaultAddr}}},
		{name: "dev token under XDG_CONFIG_HOME",
			in:   targetInput{},
			env:  with(home, "XDG_CONFIG_HOME", "/xdg"),
			want: target{Addrs: []string{client.DefaultAddr}, Token: devTok}},
		{name: "dev token for any loopback http address",
			in:   targetInput{FlagAddrs: []string{"localhost:7000", "http://[::1]:7001"}},
			env:  home,
			want: target{Addrs: []string{"http://localhost:7000", "http://[::1]:7001"}, Token: devTok}},
		{name: "dev token never sent off loopback",
			in:   targetInput{FlagAddrs: []string{"http://127.0.0.1:7948", "http://10.0.0.5:7948"}},
			env:  home,
			want: target{Addrs: []string{"http://127.0.0.1:7948", "http://10.0.0.5:7948"}}},
		{name: "dev token not sent over https or a socket",
			in:   targetInput{FlagAddrs: []string{"https://127.0.0.1:7948", "/run/herd/api.sock"}},
			env:  home,
			want: target{Addrs: []string{"https://127.0.0.1:7948", "unix:///run/herd/api.sock"}}},
		{name: "env token beats dev token",
			in:   targetInput{},
			env:  with(home, "HERD_TOKEN", envTok),
			want: target{Addrs: []string{client.DefaultAddr}, Token: envTok}},
		{name: "current context",
			in:   targetInput{Config: cfg},
			env:  home,
			want: target{Addrs: []string{"http://10.0.0.2:7948", "http://10.0.0.3:7948"}, Token: labTok, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "env beats current context",
			in:   targetInput{Config: cfg},
			env:  map[string]string{"HERD_ADDR": "http://a:1, http://b:2", "HERD_TOKEN": envTok},
			want: target{Addrs: []string{"http://a:1", "http://b:2"}, Token: envTok, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "current context's token is not sent to $HERD_ADDR",
			in:   targetInput{Config: cfg},
			env:  map[string]string{"HERD_ADDR": "http://a:1"},
			want: target{Addrs: []string{"http://a:1"}, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "current context's token is not sent to --addr",
			in:   targetInput{Config: cfg, FlagAddrs: []string{"http://f:1"}},
			want: target{Addrs: []string{"http://f:1"}, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "HERD_TOKEN beats HERD_TOKEN_FILE",
			in:   targetInput{Config: noCurrent},
			env:  map[string]string{"HERD_ADDR": "http://a:1", "HERD_TOKEN": envTok, "HERD_TOKEN_FILE": "/tok/env"},
			want: target{Addrs: []string{"http://a:1"}, Token: envTok}},
		{name: "HERD_TOKEN_FILE",
			in:   targetInput{Config: cfg},
			env:  map[string]string{"HERD_TOKEN_FILE": "/tok/env"},
			want: target{Addrs: []string{"http://10.0.0.2:7948", "http://10.0.0.3:7948"}, Token: fileTok, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "--token-file beats everything",
			in:   targetInput{Config: cfg, FlagContext: "home", FlagTokenFile: "/tok/flag"},
			env:  map[string]string{"HERD_TOKEN": envTok},
			want: target{Addrs: []string{"unix:///run/herd/api.sock"}, Token: fileTok, Context: "home"}},
		{name: "flag addrs beat env",
			in:   targetInput{Config: cfg, FlagAddrs: []string{"http://f:1", "/run/herd.sock"}},
			env:  map[string]string{"HERD_ADDR": "http://a:1", "HERD_TOKEN": envTok},
			want: target{Addrs: []string{"http://f:1", "unix:///run/herd.sock"}, Token: envTok, Context: "lab", SSH: cfg.Contexts[0].SSH}},
		{name: "explicit context beats env",
			in:   targetInput{Config: cfg, FlagContext: "home"},
			env:  map[string]string{"HERD_ADDR": "http://a:1", "HERD_TOKEN": envTok},
			want: target{Addrs: []string{"unix:///run/herd/api.sock"}, Token: homeTok, Context: "home"}},
		{name: "context token_file with ~/, first token used",
			in:   targetInput{Config: cfg, FlagContext: "filed"},
			env:  home,
			want: target{Addrs: []string{"http://10.0.0.9:7948"}, Token: ctxFTok, Context: "filed"}},
		{name: "relative token_file is relative to the config file",
			in:   targetInput{Config: cfg, FlagContext: "relative", ConfigDir: "/cfg"},
			want: target{Addrs: []string{"http://10.0.0.9:7948"}, Token: ctxFTok, Context: "relative"}},
		{name: "missing token_file names the context",
			in:      targetInput{Config: cfg, FlagContext: "missing"},
			wantErr: `context "missing": token_file: open /nope/api.token`},
		{name: "bad inline token names the context",
			in:      targetInput{Config: cfg, FlagContext: "short"},
			wantErr: `context "short": token: token of 5 characters is too short`},
		{name: "empty --token-file",
			in:      targetInput{FlagTokenFile: "/tok/empty"},
			wantErr: `--token-file: /tok/empty: no token in the file`},
		{name: "missing HERD_TOKEN_FILE",
			in:      targetInput{},
			env:     map[string]string{"HERD_TOKEN_FILE": "/tok/nope"},
			wantErr: `$HERD_TOKEN_FILE: open /tok/nope`},
		{name: "bad HERD_TOKEN",
			in:      targetInput{},
			env:     map[string]string{"HERD_TOKEN": "has space in it ok"},
			wantErr: `$HERD_TOKEN: a token is printable ASCII without blanks`},
		{name: "context without addrs defers to env",
			in:   targetInput{Config: cfg, FlagContext: "tokenonly"},
			env:  map[string]string{"HERD_ADDR": "http://a:1"},
			want: target{Addrs: []string{"http://a:1"}, Token: onlyTok, Context: "tokenonly"}},
		{name: "context without addrs and no env: default",
			in:   targetInput{Config: cfg, FlagContext: "tokenonly"},
			want: target{Addrs: []string{client.DefaultAddr}, Token: onlyTok, Context: "tokenonly"}},
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
			tt.in.ReadFile = func(p string) ([]byte, error) {
				if d, ok := files[p]; ok && !tt.noFiles {
					return []byte(d), nil
				}
				return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
			}
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

func TestConfigTokenAndTokenFileExclusive(t *testing.T) {
	_, err := parseConfig("c.toml", []byte("[[context]]\nname = \"x\"\ntoken = \"aaaaaaaaaaaaaaaa\"\ntoken_file = \"/t\"\n"))
	if err == nil || !strings.Contains(err.Error(), `context "x": set token or token_file, not both`) {
		t.Errorf("both token and token_file: %v", err)
	}
	c, err := parseConfig("c.toml", []byte("[[context]]\nname = \"x\"\ntoken_file = \"~/.config/herd/clusters/x/api.token\"\n"))
	if err != nil || c.Contexts[0].TokenFile != "~/.config/herd/clusters/x/api.token" {
		t.Errorf("token_file: %+v %v", c, err)
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
		{Name: "lab", Addrs: []string{"http://a:1"}, TokenFile: "~/.config/herd/clusters/lab/api.token",
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
	_, errOut = h.mustRun(2, "config", "set-context", "lab", "--addr", "10.0.0.2:7948", "--token", "tok")
	if !strings.Contains(errOut, "--token-file") {
		t.Errorf("set-context --token: %q, want a pointer to --token-file", errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("refused set-context wrote the config: %v", err)
	}
	out, _ := h.mustRun(0, "config", "set-context", "lab", "--addr", "10.0.0.2:7948,http://10.0.0.3:7948", "--token-file", "~/lab.token")
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
		{Name: "lab", Addrs: []string{"http://10.0.0.4:7948"}, TokenFile: "~/lab.token"},
		{Name: "home", Addrs: []string{"unix:///run/herd/api.sock"}},
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	// The current context is used for requests, with its token file; --addr
	// still wins.
	if err := os.WriteFile(filepath.Join(h.env["HOME"], "lab.token"), []byte(labTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if h.targets[0].Token != labTok || h.targets[1].Token != "" {
		t.Errorf("tokens used %q, %q: want the context's token file for its own address only", h.targets[0].Token, h.targets[1].Token)
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
