package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// ErrBadTarget: a board argument is not [user@]host[:port].
var ErrBadTarget = errors.New("bootstrap: bad board address")

// Target is one board as named on the command line, resolved through
// ssh_config: values given on the command line win over the config files,
// which win over the defaults (port 22, the local user).
type Target struct {
	// Arg is the argument as given ("pi@pi1:2222", "pi1").
	Arg string
	// Alias is its host part as given: the ssh_config Host it matches.
	Alias string
	// User is the login user.
	User string
	// Host is the host to connect to (ssh_config HostName, else Alias).
	Host string
	// Port is the SSH port.
	Port int
	// IdentityFiles are the ssh_config IdentityFile entries, expanded.
	IdentityFiles []string
	// KnownHostsFiles are the ssh_config UserKnownHostsFile entries,
	// expanded; empty when the config names none.
	KnownHostsFiles []string
}

// Addr returns "host:port", the address dialled and looked up in
// known_hosts.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// HostPort returns Host, with ":port" only when the port is not 22: the
// form stored in herdctl contexts.
func (t Target) HostPort() string {
	if t.Port == 22 {
		if strings.Contains(t.Host, ":") {
			return "[" + t.Host + "]"
		}
		return t.Host
	}
	return t.Addr()
}

// SplitTarget splits "[user@]host[:port]" ("[v6addr]:port" for IPv6; a bare
// IPv6 address is taken whole). port is 0 when not given.
func SplitTarget(arg string) (user, host string, port int, err error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadTarget, arg, why) }
	if arg == "" {
		return "", "", 0, bad("empty")
	}
	if strings.ContainsAny(arg, " \t\r\n\x00/,") {
		return "", "", 0, bad("contains a space, slash, comma or control character")
	}
	rest := arg
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, rest = rest[:i], rest[i+1:]
		if user == "" {
			return "", "", 0, bad("empty user before '@'")
		}
		if strings.HasPrefix(user, "-") {
			return "", "", 0, bad("user starts with '-'")
		}
	}
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", 0, bad("missing ']'")
		}
		host = rest[1:end]
		tail := rest[end+1:]
		if tail != "" {
			p, ok := strings.CutPrefix(tail, ":")
			if !ok {
				return "", "", 0, bad("want [host]:port")
			}
			if port, err = parsePort(p); err != nil {
				return "", "", 0, bad(err.Error())
			}
		}
	case net.ParseIP(rest) != nil:
		host = rest
	case strings.Count(rest, ":") == 1:
		h, p, _ := strings.Cut(rest, ":")
		host = h
		if port, err = parsePort(p); err != nil {
			return "", "", 0, bad(err.Error())
		}
	case strings.Contains(rest, ":"):
		return "", "", 0, bad("an IPv6 address with a port must be written [addr]:port")
	default:
		host = rest
	}
	if host == "" {
		return "", "", 0, bad("empty host")
	}
	if strings.HasPrefix(host, "-") {
		return "", "", 0, bad("host starts with '-'")
	}
	return user, host, port, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want 1-65535", p)
	}
	return n, nil
}

// SSHConfig resolves Host aliases like ssh does, from OpenSSH client
// configuration files read in order (the first value obtained wins).
// It is read-only after LoadSSHConfig and safe for concurrent use.
type SSHConfig struct {
	files     []*ssh_config.Config
	names     []string
	home      string
	localUser string
}

// LoadSSHConfig reads the given ssh_config files. Files listed in required
// must exist (-F FILE); optional ones (~/.ssh/config, /etc/ssh/ssh_config)
// are skipped when missing. home expands "~" and %d; localUser is the
// default login user and %u.
func LoadSSHConfig(required, optional []string, home, localUser string) (*SSHConfig, error) {
	c := &SSHConfig{home: home, localUser: localUser}
	load := func(path string, must bool) error {
		data, err := os.ReadFile(path)
		if err != nil {
			if !must && errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("bootstrap: ssh config: %w", err)
		}
		cfg, err := ssh_config.Decode(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("bootstrap: ssh config %s: %w", path, err)
		}
		c.files = append(c.files, cfg)
		c.names = append(c.names, path)
		return nil
	}
	for _, p := range required {
		if err := load(p, true); err != nil {
			return nil, err
		}
	}
	for _, p := range optional {
		if err := load(p, false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// get returns the first value of key for alias.
func (c *SSHConfig) get(alias, key string) (string, error) {
	if c == nil {
		return "", nil
	}
	for i, f := range c.files {
		v, err := f.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("bootstrap: ssh config %s: %s for %s: %w", c.names[i], key, alias, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

// getAll returns every value of key for alias, in file order.
func (c *SSHConfig) getAll(alias, key string) ([]string, error) {
	if c == nil {
		return nil, nil
	}
	var out []string
	for i, f := range c.files {
		vs, err := f.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: ssh config %s: %s for %s: %w", c.names[i], key, alias, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

// Resolve parses arg ([user@]host[:port] or an ssh_config Host alias) and
// fills in HostName, User, Port, IdentityFile and UserKnownHostsFile from
// the config. c may be nil (no config files).
func (c *SSHConfig) Resolve(arg string) (Target, error) {
	user, alias, port, err := SplitTarget(arg)
	if err != nil {
		return Target{}, err
	}
	t := Target{Arg: arg, Alias: alias, User: user, Port: port}
	home, local := "", ""
	if c != nil {
		home, local = c.home, c.localUser
	}
	hostName, err := c.get(alias, "HostName")
	if err != nil {
		return Target{}, err
	}
	if hostName == "" {
		t.Host = alias
	} else {
		// HostName accepts %h (the alias) and %%.
		if t.Host, err = expandTokens(hostName, map[byte]string{'h': alias}); err != nil {
			return Target{}, fmt.Errorf("bootstrap: ssh config: HostName for %s: %w", alias, err)
		}
	}
	if t.User == "" {
		if t.User, err = c.get(alias, "User"); err != nil {
			return Target{}, err
		}
		if t.User == "" {
			t.User = local
		}
	}
	if t.User == "" {
		return Target{}, fmt.Errorf("%w %q: no user (give user@host)", ErrBadTarget, arg)
	}
	if t.Port == 0 {
		p, err := c.get(alias, "Port")
		if err != nil {
			return Target{}, err
		}
		if p == "" {
			t.Port = 22
		} else if t.Port, err = parsePort(p); err != nil {
			return Target{}, fmt.Errorf("bootstrap: ssh config: Port for %s: %w", alias, err)
		}
	}
	tokens := map[byte]string{'h': t.Host, 'n': alias, 'p': strconv.Itoa(t.Port), 'r': t.User, 'u': local, 'd': home}
	ids, err := c.getAll(alias, "IdentityFile")
	if err != nil {
		return Target{}, err
	}
	for _, id := range ids {
		if strings.EqualFold(id, "none") {
			continue
		}
		p, err := expandPath(id, home, tokens)
		if err != nil {
			return Target{}, fmt.Errorf("bootstrap: ssh config: IdentityFile %q for %s: %w", id, alias, err)
		}
		t.IdentityFiles = append(t.IdentityFiles, p)
	}
	kh, err := c.get(alias, "UserKnownHostsFile")
	if err != nil {
		return Target{}, err
	}
	for _, f := range strings.Fields(kh) {
		if strings.EqualFold(f, "none") {
			continue
		}
		p, err := expandPath(f, home, tokens)
		if err != nil {
			return Target{}, fmt.Errorf("bootstrap: ssh config: UserKnownHostsFile %q for %s: %w", f, alias, err)
		}
		t.KnownHostsFiles = append(t.KnownHostsFiles, p)
	}
	return t, nil
}

// expandTokens replaces %X tokens from tokens and %% by %.
func expandTokens(s string, tokens map[byte]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", errors.New("'%' at the end")
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
			continue
		}
		v, ok := tokens[s[i]]
		if !ok {
			return "", fmt.Errorf("token %%%c is not supported here", s[i])
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// expandPath expands tokens and a leading "~/" (home).
func expandPath(p, home string, tokens map[byte]string) (string, error) {
	p, err := expandTokens(p, tokens)
	if err != nil {
		return "", err
	}
	return ExpandHome(p, home)
}

// ExpandHome expands a leading "~" or "~/" to home; "~user" is refused.
// Relative paths are returned unchanged.
func ExpandHome(p, home string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", fmt.Errorf("cannot expand %q: home folder unknown", p)
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
	}
	if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("cannot expand %q: only ~/ is supported", p)
	}
	return p, nil
}
