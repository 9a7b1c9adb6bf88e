package cli

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/herd-dev/herd/client"
)

// config is herdctl's configuration file (TOML, decoded strictly):
//
//	current_context = "lab"
//
//	[[context]]
//	name  = "lab"
//	addrs = ["http://10.0.0.2:7948", "http://10.0.0.3:7948"]
//	token = "..."
//	ssh   = { user = "pi", key = "~/.ssh/id_ed25519", known_hosts = "~/.ssh/known_hosts", hosts = ["pi1", "pi2"] }
type config struct {
	CurrentContext string          `toml:"current_context,omitempty"`
	Contexts       []configContext `toml:"context,omitempty"`
}

// configContext is one named cluster.
type configContext struct {
	Name  string   `toml:"name"`
	Addrs []string `toml:"addrs,omitempty"`
	Token string   `toml:"token,omitempty"`
	// TokenFile names a file holding the token (its first line), written
	// by herdctl bootstrap: the cluster state folder's api.token.
	TokenFile string `toml:"token_file,omitempty"`
	// SSH is kept for the SSH tunnel (a later issue): parsed and written
	// back, not used yet.
	SSH *sshConfig `toml:"ssh,omitempty"`
}

// sshConfig says how to reach the agents' loopback API through SSH.
type sshConfig struct {
	User       string   `toml:"user,omitempty"`
	Key        string   `toml:"key,omitempty"`
	KnownHosts string   `toml:"known_hosts,omitempty"`
	Hosts      []string `toml:"hosts,omitempty"`
}

// Environment variables herdctl reads.
const (
	envAddr  = "HERD_ADDR"
	envToken = "HERD_TOKEN"
)

// context returns the context called name.
func (c *config) context(name string) (*configContext, bool) {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i], true
		}
	}
	return nil, false
}

// validate checks names and addresses.
func (c *config) validate() error {
	seen := map[string]bool{}
	for i, ctx := range c.Contexts {
		if ctx.Name == "" {
			return fmt.Errorf("context[%d]: name is empty", i)
		}
		if seen[ctx.Name] {
			return fmt.Errorf("context[%d]: name %q is used twice", i, ctx.Name)
		}
		seen[ctx.Name] = true
		for j, a := range ctx.Addrs {
			if _, err := normalizeAddr(a); err != nil {
				return fmt.Errorf("context %q: addrs[%d]: %v", ctx.Name, j, err)
			}
		}
	}
	return nil
}

// defaultConfigPath is $XDG_CONFIG_HOME/herd/config.toml, or
// $HOME/.config/herd/config.toml.
func defaultConfigPath(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "herd", "config.toml"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "herd", "config.toml"), nil
	}
	return "", errors.New("cannot find the config file: neither $XDG_CONFIG_HOME nor $HOME is set (use --config)")
}

// loadConfig reads the config file at path. A missing file is an empty
// config.
func loadConfig(path string) (config, error) {
	var c config
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	c, err = parseConfig(path, data)
	if err != nil {
		return config{}, err
	}
	return c, nil
}

// parseConfig decodes a config file strictly: unknown keys are errors.
func parseConfig(path string, data []byte) (config, error) {
	var c config
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return config{}, fmt.Errorf("%s:%d:%d: %s", path, pe.Position.Line, pe.Position.Col, pe.Message)
		}
		return config{}, fmt.Errorf("%s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return config{}, fmt.Errorf("%s: unknown key(s) %s (want current_context and [[context]] with name, addrs, token, ssh)", path, strings.Join(keys, ", "))
	}
	if err := c.validate(); err != nil {
		return config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// saveConfig writes c to path atomically (temporary file, fsync, rename)
// with mode 0600, creating the folder (0700) when needed.
func saveConfig(path string, c config) error {
	if err := c.validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		return fmt.Errorf("config: encode: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f, err := os.CreateTemp(dir, ".config-*.toml")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("config: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("config: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("config: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// target is where herdctl sends requests.
type target struct {
	Addrs   []string
	Token   string
	Context string     // name of the context used, "" for none
	SSH     *sshConfig // from the context; unused for now
}

// targetInput is what address resolution looks at.
type targetInput struct {
	FlagAddrs   []string // --addr, repeatable or comma-separated
	FlagToken   string   // --token
	FlagContext string   // --context
	Getenv      func(string) string
	Config      config
}

// resolveTarget picks the agent addresses and token. Addresses come from the
// first of: --addr; the context named by --context; $HERD_ADDR
// (comma-separated); the config file's current context; client.DefaultAddr.
// The token comes from --token, the --context context, $HERD_TOKEN, then the
// current context. An explicit --context beats the environment because it
// is a flag; a context without addrs defers to the next source.
func resolveTarget(in targetInput) (target, error) {
	var ctx *configContext
	explicit := in.FlagContext != ""
	name := in.FlagContext
	if name == "" {
		name = in.Config.CurrentContext
	}
	if name != "" {
		c, ok := in.Config.context(name)
		if !ok {
			if explicit {
				return target{}, fmt.Errorf("context %q is not in the config file (see herdctl config get-contexts)", name)
			}
			return target{}, fmt.Errorf("current_context %q is not in the config file (fix it with herdctl config use-context)", name)
		}
		ctx = c
	}
	var t target
	if ctx != nil {
		t.Context, t.SSH = ctx.Name, ctx.SSH
	}
	var ctxAddrs []string
	var ctxToken string
	if ctx != nil {
		ctxAddrs, ctxToken = ctx.Addrs, ctx.Token
		if ctxToken == "" && ctx.TokenFile != "" {
			b, err := os.ReadFile(ctx.TokenFile)
			if err != nil {
				return target{}, fmt.Errorf("context %q: token_file: %w", ctx.Name, err)
			}
			ctxToken, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		}
	}
	envAddrs := splitList(in.Getenv(envAddr))
	var raw []string
	switch {
	case len(splitList(in.FlagAddrs...)) > 0:
		raw = splitList(in.FlagAddrs...)
	case explicit && len(ctxAddrs) > 0:
		raw = ctxAddrs
	case len(envAddrs) > 0:
		raw = envAddrs
	case len(ctxAddrs) > 0:
		raw = ctxAddrs
	default:
		raw = []string{client.DefaultAddr}
	}
	for _, a := range raw {
		n, err := normalizeAddr(a)
		if err != nil {
			return target{}, err
		}
		t.Addrs = append(t.Addrs, n)
	}
	switch {
	case in.FlagToken != "":
		t.Token = in.FlagToken
	case explicit && ctxToken != "":
		t.Token = ctxToken
	case in.Getenv(envToken) != "":
		t.Token = in.Getenv(envToken)
	default:
		t.Token = ctxToken
	}
	return t, nil
}

// splitList splits comma-separated values and drops empty ones.
func splitList(vals ...string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// normalizeAddr accepts http://host:port, https://host:port,
// unix:///path, a bare host:port (http) or an absolute socket path.
func normalizeAddr(a string) (string, error) {
	a = strings.TrimSpace(a)
	switch {
	case a == "":
		return "", errors.New("empty address")
	case strings.HasPrefix(a, "/"):
		return "unix://" + a, nil
	case !strings.Contains(a, "://"):
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", fmt.Errorf("address %q: %v", a, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return "", fmt.Errorf("address %q has no host", a)
		}
	case "unix":
		if u.Path == "" {
			return "", fmt.Errorf("address %q has no socket path", a)
		}
	default:
		return "", fmt.Errorf("address %q: scheme %q is not http, https or unix", a, u.Scheme)
	}
	return a, nil
}
