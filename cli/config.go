package cli

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/atomicfile"
)

// config is herdctl's configuration file (TOML, decoded strictly):
//
//	current_context = "lab"
//
//	[[context]]
//	name  = "lab"
//	addrs = ["http://10.0.0.2:7948", "http://10.0.0.3:7948"]
//	token_file = "~/.config/herd/clusters/lab/api.token"   # or token = "..."
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
	// TokenFile names a token file (one token per line, the first is
	// used): ~/ is the home directory, a relative path is relative to the
	// config file's directory. At most one of Token and TokenFile is set.
	TokenFile string `toml:"token_file,omitempty"`
	// SSH, when set, makes herdctl reach the agents' API through SSH.
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
	envAddr      = "HERD_ADDR"
	envToken     = "HERD_TOKEN"
	envTokenFile = "HERD_TOKEN_FILE"
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
		if ctx.Token != "" && ctx.TokenFile != "" {
			return fmt.Errorf("context %q: set token or token_file, not both", ctx.Name)
		}
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
		return config{}, fmt.Errorf("%s: unknown key(s) %s (want current_context and [[context]] with name, addrs, token_file or token, ssh)", path, strings.Join(keys, ", "))
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
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// target is where herdctl sends requests.
type target struct {
	Addrs   []string
	Token   string
	Context string     // name of the context used, "" for none
	SSH     *sshConfig // from the context
}

// targetInput is what address and token resolution look at.
type targetInput struct {
	FlagAddrs     []string // --addr, repeatable or comma-separated
	FlagTokenFile string   // --token-file
	FlagContext   string   // --context
	Getenv        func(string) string
	Config        config
	// ConfigDir is the config file's directory, for relative token_file
	// paths.
	ConfigDir string
	// ReadFile reads token files; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// resolveTarget picks the agent addresses and token. Addresses come from the
// first of: --addr; the context named by --context; $HERD_ADDR
// (comma-separated); the config file's current context; client.DefaultAddr.
// An explicit --context beats the environment because it is a flag; a
// context without addrs defers to the next source.
//
// The token comes from the first of: --token-file; the --context
// context's token_file or token; $HERD_TOKEN; $HERD_TOKEN_FILE; the current
// context's token_file or token, when the addresses are the context's own
// (or it has none), so that a context's token is not sent to an address
// given by --addr or $HERD_ADDR. When none gives a token and every address
// is a loopback http address, the token `herd agent -dev` wrote
// (api.DevTokenPath) is used if that file exists. A token never comes
// from argv.
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
	var ctxAddrs []string
	if ctx != nil {
		t.Context, t.SSH = ctx.Name, ctx.SSH
		ctxAddrs = ctx.Addrs
	}
	envAddrs := splitList(in.Getenv(envAddr))
	var raw []string
	fromCtx := false
	switch {
	case len(splitList(in.FlagAddrs...)) > 0:
		raw = splitList(in.FlagAddrs...)
	case explicit && len(ctxAddrs) > 0:
		raw, fromCtx = ctxAddrs, true
	case len(envAddrs) > 0:
		raw = envAddrs
	case len(ctxAddrs) > 0:
		raw, fromCtx = ctxAddrs, true
	default:
		raw = []string{client.DefaultAddr}
		fromCtx = true // the context (if any) has no addrs: it defers
	}
	for _, a := range raw {
		n, err := normalizeAddr(a)
		if err != nil {
			return target{}, err
		}
		t.Addrs = append(t.Addrs, n)
	}
	tok, err := resolveToken(in, ctx, explicit, fromCtx, t.Addrs)
	if err != nil {
		return target{}, err
	}
	t.Token = tok
	return t, nil
}

// resolveToken applies resolveTarget's token rules.
func resolveToken(in targetInput, ctx *configContext, explicit, fromCtx bool, addrs []string) (string, error) {
	ctxHas := ctx != nil && (ctx.Token != "" || ctx.TokenFile != "")
	fromContext := func() (string, error) {
		if ctx.Token != "" {
			if err := api.CheckToken(ctx.Token); err != nil {
				return "", fmt.Errorf("context %q: token: %v", ctx.Name, strings.TrimPrefix(err.Error(), "api: "))
			}
			return ctx.Token, nil
		}
		return in.readToken(fmt.Sprintf("context %q: token_file", ctx.Name), in.expand(ctx.TokenFile))
	}
	switch {
	case in.FlagTokenFile != "":
		return in.readToken("--token-file", in.FlagTokenFile)
	case explicit && ctxHas:
		return fromContext()
	case in.Getenv(envToken) != "":
		tok := strings.TrimSpace(in.Getenv(envToken))
		if err := api.CheckToken(tok); err != nil {
			return "", fmt.Errorf("$%s: %v", envToken, strings.TrimPrefix(err.Error(), "api: "))
		}
		return tok, nil
	case in.Getenv(envTokenFile) != "":
		return in.readToken("$"+envTokenFile, in.Getenv(envTokenFile))
	case ctxHas && fromCtx:
		return fromContext()
	}
	if ctx != nil && ctx.SSH != nil {
		return "", nil // the tunnel's loopback is a board's, not this host's
	}
	for _, a := range addrs {
		if !isLoopbackHTTP(a) {
			return "", nil
		}
	}
	p, err := api.DevTokenPath(in.Getenv)
	if err != nil {
		return "", nil
	}
	tok, err := in.readToken("dev token", p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// readToken reads the first token of the token file at path; what names
// the source in errors.
func (in targetInput) readToken(what, path string) (string, error) {
	read := in.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	data, err := read(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > api.MaxTokenFileBytes {
		return "", fmt.Errorf("%s: %s is larger than %d bytes", what, path, api.MaxTokenFileBytes)
	}
	toks, err := api.ParseTokens(path, data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return toks[0], nil
}

// expand resolves a context's token_file: ~/ is $HOME, a relative path is
// relative to the config file's directory.
func (in targetInput) expand(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h := in.Getenv("HOME"); h != "" {
			return filepath.Join(h, rest)
		}
	}
	if !filepath.IsAbs(p) && in.ConfigDir != "" {
		return filepath.Join(in.ConfigDir, p)
	}
	return p
}

// isLoopbackHTTP reports whether a is http://127.x, [::1] or localhost.
func isLoopbackHTTP(a string) bool {
	u, err := url.Parse(a)
	if err != nil || u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
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
