package agent

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// Default addresses. The API default is what herdctl uses when nothing else
// is set (client.DefaultAddr).
const (
	DefaultGossipPort = 7946
	DefaultRaftPort   = 7947
	DefaultAPIAddr    = "127.0.0.1:7948"
	DefaultAPISocket  = "/run/herd/api.sock"
	DefaultDataDir    = "/var/lib/herd"
	DefaultConfigFile = "/etc/herd/agent.toml"
	// DefaultGossipKeyFile and DefaultServerKeyFile are where bootstrap
	// puts the keys.
	DefaultGossipKeyFile = "/etc/herd/gossip.key"
	DefaultServerKeyFile = "/etc/herd/server.key"
	// DefaultClusterKeyFile is the legacy single key of older installs.
	DefaultClusterKeyFile = "/etc/herd/cluster.key"
)

// Config is the agent configuration. Every key can be given in the TOML
// file named by --config and as a flag of the same name with dashes
// (data_dir → --data-dir); flags win over the file.
type Config struct {
	// Name of this board: a DNS label, unique in the cluster. Default: the
	// host name's first label in lower case (api.NameFromHost); a host
	// name that does not make a DNS label needs a name given here.
	Name string `toml:"name"`
	// DataDir holds the Raft log, snapshots and the node's state.
	DataDir string `toml:"data_dir"`
	// RaftLogStore is a server's on-disk Raft log: "wal" (raft-wal, the
	// default) or "bolt" (raft-boltdb, what herd used before). A data dir
	// holding the other one is migrated at start, the old copy kept as
	// raft.db.migrated or wal.migrated (raftstore.Config.LogStore).
	RaftLogStore string `toml:"raft_log_store"`
	// Server makes this agent a Raft server (voter or non-voter). Agents
	// with server = false are gossip members only.
	Server bool `toml:"server"`
	// BootstrapExpect is how many servers must be seen before the first
	// Raft configuration is formed; they become the voters.
	BootstrapExpect int `toml:"bootstrap_expect"`
	// Join lists gossip addresses (host or host:port) of other agents.
	Join []string `toml:"join"`
	// GossipKeyFile holds the gossip key every member has: base64 32-byte
	// keys (herd keygen), one per line. The first encrypts; all are
	// accepted (rotation lists two).
	GossipKeyFile string `toml:"gossip_key_file"`
	// ServerKeyFile holds the server key, the Raft and forwarding TLS
	// identity only servers have (same format: the first is presented,
	// every one is accepted from peers). Required for server = true;
	// ignored otherwise.
	ServerKeyFile string `toml:"server_key_file"`
	// ClusterKeyFile is the legacy single key of older installs, used for
	// gossip and for Raft when GossipKeyFile or ServerKeyFile does not
	// exist (the agent logs a warning): one key for both purposes means
	// any member can act as a server. Re-run herdctl bootstrap to split it.
	ClusterKeyFile string `toml:"cluster_key_file"`
	// Labels are user labels of this node, for node selectors.
	Labels map[string]string `toml:"labels"`

	// GossipBind is the memberlist bind address, host:port.
	GossipBind string `toml:"gossip_bind"`
	// GossipAdvertise is the address other boards reach this one on:
	// host:port, or "auto" / "auto:PORT" / empty to let the agent pick the
	// bind address when it names one, else its local address on the route
	// to its join peers, else its first private IPv4 address (see
	// AdvertiseAuto); the port defaults to the bind port.
	GossipAdvertise string `toml:"gossip_advertise"`
	// RaftBind is the Raft transport bind address, host:port.
	RaftBind string `toml:"raft_bind"`
	// RaftAdvertise is the Raft address other servers use: host:port, or
	// auto (as GossipAdvertise; the gossip host and the raft bind port).
	RaftAdvertise string `toml:"raft_advertise"`

	// APIListen lists API listeners: host:port or unix:///path.
	APIListen []string `toml:"api_listen"`
	// APITokenFile holds the API bearer tokens, one per line; the first is
	// the one clients should use, every one is accepted (rotation: add the
	// new one first, move clients, drop the old). Re-read when it changes.
	// Default: <data_dir>/api.token, generated (0600) when missing.
	// Required (explicitly) for a non-loopback API.
	APITokenFile string `toml:"api_token_file"`
	// APIHosts are the DNS names (host or host:port) requests may carry in
	// their Host header besides IP literals and localhost; other names are
	// refused (against DNS rebinding).
	APIHosts []string `toml:"api_hosts"`

	// MetricsListen is a listener that serves only GET /metrics: "" (the
	// default) for none, host:port, or "auto:PORT" for the gossip
	// advertise IP and PORT (herdctl bootstrap sets "auto:7949"). It needs
	// MetricsTokenFile. On servers /metrics is also on the API listeners.
	MetricsListen string `toml:"metrics_listen"`
	// MetricsTokenFile holds bearer tokens (same format and rotation as
	// api_token_file) that grant GET /metrics and nothing else, on every
	// listener; API tokens work on /metrics too. Empty: none.
	MetricsTokenFile string `toml:"metrics_token_file"`
	// DNSListen is where this agent answers DNS for the herd. zone (UDP
	// and TCP, package herddns), from its view of the services (a server's
	// store, a worker's view file from the leader; package svcview): ""
	// (the default) for 127.0.0.1:8600 and the gossip advertise IP port
	// 8600, either skipped with a warning when its port is taken; "off"
	// for nowhere; or one host:port or "auto:PORT" (the gossip advertise
	// IP and PORT), which must open. DNS carries no credentials; see
	// docs/security.md for why this listener may still be open.
	DNSListen string `toml:"dns_listen"`
	// ServiceProxy is the address the service proxy listens on for every
	// service port with a port (package svcproxy): "" (the default) for
	// every address of the board, "off" for none, or one IP address. A
	// port that cannot be opened (a process already holds it) is logged
	// and retried when the services change.
	ServiceProxy string `toml:"service_proxy"`
	// UnitReports is whether this board's agent watches its own herd units
	// through systemd's D-Bus signals and reports every change to the
	// servers (package agent/unitwatch), signed with its SSH host key
	// (the private half of ssh_host_key_file): "" (the default) does when
	// the agent runs as root on a systemd board, "off" never. Without
	// reports the leader lists the board over SSH every 5 s; with them,
	// every 2 minutes.
	UnitReports string `toml:"unit_reports"`
	// BoardSession is how a server's placer runs commands on boards over
	// SSH: "" (the default) through one long-lived `herd board session`
	// per connection (units/sshexec/boardsession), falling back to one
	// exec session per command on a board without it; "off" always one
	// exec session per command (the wrapper).
	BoardSession string `toml:"board_session"`

	// SSHAddress is where the leader reaches this board's sshd: host:port,
	// or auto / auto:PORT / empty for the gossip advertise IP and PORT
	// (default 22).
	SSHAddress string `toml:"ssh_address"`
	// SSHHostKeyFile is this board's sshd public host key, pinned in gossip.
	SSHHostKeyFile string `toml:"ssh_host_key_file"`
	// SSHUser is the user the leader logs in as on boards.
	SSHUser string `toml:"ssh_user"`
	// SSHKeyFile is the cluster SSH private key the leader uses.
	SSHKeyFile string `toml:"ssh_key_file"`

	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// Pprof serves Go's runtime profiles (as net/http/pprof would) under
	// /debug/pprof/ on the API listeners, behind the API token (root on
	// the unix socket); never on the metrics listener. Default off: the
	// paths are then 404. For profiling an agent with go tool pprof.
	Pprof bool `toml:"pprof"`

	// Dev runs a single throw-away agent (herd agent -dev).
	Dev bool `toml:"-"`

	// hostName is the host name the default Name came from, for the error
	// when it does not make a name.
	hostName string
}

// DefaultConfig returns the configuration of a board agent before its
// file and flags are applied.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:           api.NameFromHost(host),
		hostName:       host,
		DataDir:        DefaultDataDir,
		Server:         true,
		GossipKeyFile:  DefaultGossipKeyFile,
		ServerKeyFile:  DefaultServerKeyFile,
		ClusterKeyFile: DefaultClusterKeyFile,
		GossipBind:     fmt.Sprintf("0.0.0.0:%d", DefaultGossipPort),
		RaftBind:       fmt.Sprintf("0.0.0.0:%d", DefaultRaftPort),
		APIListen:      []string{DefaultAPIAddr, "unix://" + DefaultAPISocket},
		SSHHostKeyFile: "/etc/ssh/ssh_host_ed25519_key.pub",
		SSHUser:        "root",
		SSHKeyFile:     "/etc/herd/cluster_ssh_key",
		LogLevel:       "info",
	}
}

// DevConfig returns the configuration of `herd agent -dev`: one server on
// loopback that bootstraps alone, its API on the default address.
func DevConfig(dataDir string) Config {
	c := DefaultConfig()
	c.Name = "dev"
	c.DataDir = dataDir
	c.BootstrapExpect = 1
	c.GossipKeyFile = ""
	c.ServerKeyFile = ""
	c.ClusterKeyFile = ""
	c.GossipBind = fmt.Sprintf("127.0.0.1:%d", DefaultGossipPort)
	c.RaftBind = fmt.Sprintf("127.0.0.1:%d", DefaultRaftPort)
	c.APIListen = []string{DefaultAPIAddr}
	c.SSHAddress = "127.0.0.1:22"
	c.SSHHostKeyFile = ""
	c.ServiceProxy = "127.0.0.1"
	c.Dev = true
	return c
}

// LoadConfigFile decodes a TOML agent configuration over c. Unknown keys
// are errors naming file:line:col.
func LoadConfigFile(c *Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("agent: config: %w", err)
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("agent: config: %s:%d:%d: %s", path, pe.Position.Line, pe.Position.Col, pe.Message)
		}
		return fmt.Errorf("agent: config: %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var msgs []string
		for _, k := range und {
			msgs = append(msgs, fmt.Sprintf("%s: unknown key %q", keyPos(path, data, k), k.String()))
		}
		return fmt.Errorf("agent: config: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// keyPos finds the line of a key's last element in the file (BurntSushi
// keeps key positions private), falling back to the file name alone.
func keyPos(path string, data []byte, k toml.Key) string {
	if len(k) == 0 {
		return path
	}
	last := k[len(k)-1]
	for i, line := range strings.Split(string(data), "\n") {
		t := strings.TrimLeft(line, " \t")
		if strings.HasPrefix(t, last) && strings.HasPrefix(strings.TrimLeft(t[len(last):], " \t"), "=") {
			return fmt.Sprintf("%s:%d:%d", path, i+1, len(line)-len(t)+1)
		}
	}
	return path
}

// Validate checks the configuration and names every problem.
func (c *Config) Validate() error {
	var errs problems
	c.validateNode(&errs)
	c.validateAddresses(&errs)
	c.validateAPIListen(&errs)
	if err := checkMetricsListen(c.MetricsListen, c.MetricsTokenFile); err != nil {
		errs.add("metrics_listen %q: %v", c.MetricsListen, err)
	}
	switch c.RaftLogStore {
	case "", raftstore.LogStoreWAL, raftstore.LogStoreBolt:
	default:
		errs.add("raft_log_store %q: want %q (the default) or %q", c.RaftLogStore, raftstore.LogStoreWAL, raftstore.LogStoreBolt)
	}
	if err := checkServiceProxy(c.ServiceProxy); err != nil {
		errs.add("service_proxy %q: %v", c.ServiceProxy, err)
	}
	switch c.UnitReports {
	case "", "off":
	default:
		errs.add("unit_reports %q: want \"\" (the default: on where systemd runs) or \"off\"", c.UnitReports)
	}
	switch c.BoardSession {
	case "", "off":
	default:
		errs.add("board_session %q: want \"\" (the default: on) or \"off\"", c.BoardSession)
	}
	if err := checkDNSListen(c.DNSListen); err != nil {
		errs.add("dns_listen %q: %v", c.DNSListen, err)
	}
	for i, h := range c.APIHosts {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			errs.add("api_hosts[%d] %q: want a host name or host:port", i, h)
		}
	}
	for _, j := range c.Join {
		if j == "" {
			errs.add("join: empty address")
		}
	}
	c.validateLabels(&errs)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs.add("log_level %q: must be debug, info, warn or error", c.LogLevel)
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent: invalid config:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// problems are what Validate finds wrong, one message each, in the order
// found.
type problems []string

func (p *problems) add(format string, a ...any) {
	*p = append(*p, fmt.Sprintf(format, a...))
}

// validateNode checks what makes the board itself: its name, its data
// directory (an absolute path) and bootstrap_expect (0-7, servers only).
func (c *Config) validateNode(errs *problems) {
	if err := api.ValidateName(c.Name); err != nil {
		from := ""
		if c.hostName != "" && c.Name == api.NameFromHost(c.hostName) {
			from = fmt.Sprintf(", from the host name %q", c.hostName)
		}
		errs.add("%v%s (1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit): set name in the agent's file or --name", err, from)
	}
	if c.DataDir == "" {
		errs.add("data_dir: must be set")
	} else if !filepath.IsAbs(c.DataDir) {
		errs.add("data_dir %q: must be an absolute path", c.DataDir)
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect > 7 {
		errs.add("bootstrap_expect %d: must be 0-7 (3 or 5 voters are usual)", c.BootstrapExpect)
	}
	if c.BootstrapExpect > 0 && !c.Server {
		errs.add("bootstrap_expect: only servers bootstrap; set server = true or drop bootstrap_expect")
	}
}

// validateAddresses checks the gossip and Raft addresses: the binds are
// host:port, the advertised addresses (and ssh_address) as
// checkAdvertise wants them.
func (c *Config) validateAddresses(errs *problems) {
	for _, kv := range []struct{ key, val string }{
		{"gossip_bind", c.GossipBind}, {"raft_bind", c.RaftBind},
	} {
		if err := checkHostPort(kv.val, false); err != nil {
			errs.add("%s %q: %v", kv.key, kv.val, err)
		}
	}
	for _, kv := range []struct{ key, val string }{
		{"gossip_advertise", c.GossipAdvertise}, {"raft_advertise", c.RaftAdvertise}, {"ssh_address", c.SSHAddress},
	} {
		if err := checkAdvertise(kv.val); err != nil {
			errs.add("%s %q: %v", kv.key, kv.val, err)
		}
	}
}

// validateAPIListen checks each api_listen address: a unix socket's path
// is absolute; any other is host:port, and one that is not a loopback IP
// needs api_token_file.
func (c *Config) validateAPIListen(errs *problems) {
	for i, l := range c.APIListen {
		if strings.HasPrefix(l, "unix://") {
			if p := strings.TrimPrefix(l, "unix://"); !filepath.IsAbs(p) {
				errs.add("api_listen[%d] %q: unix socket path must be absolute", i, l)
			}
			continue
		}
		if err := checkHostPort(l, false); err != nil {
			errs.add("api_listen[%d] %q: %v", i, l, err)
			continue
		}
		host, _, _ := net.SplitHostPort(l)
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && c.APITokenFile == "" {
			errs.add("api_listen[%d] %q: a non-loopback API needs api_token_file", i, l)
		}
	}
}

// validateLabels checks the board's labels (validLabel), in key order.
func (c *Config) validateLabels(errs *problems) {
	keys := make([]string, 0, len(c.Labels))
	for k := range c.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validLabel(k, c.Labels[k]); err != nil {
			errs.add("labels.%s = %q: %v", k, c.Labels[k], err)
		}
	}
}

// validLabel checks one board label with api's label rules.
func validLabel(k, v string) error {
	if err := api.ValidateLabelKey(k); err != nil {
		return err
	}
	return api.ValidateLabelValue(v)
}

func checkHostPort(s string, needHost bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if needHost && (host == "" || host == "0.0.0.0" || host == "::") {
		return fmt.Errorf("must name a reachable host, not %q", host)
	}
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port must be 0-65535")
	}
	return nil
}

// ReadClusterKey reads a key file holding exactly one base64 key (32
// bytes once decoded).
func ReadClusterKey(path string) ([]byte, error) {
	keys, err := ReadKeyFile(path)
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("agent: key file %s: %d keys, want 1", path, len(keys))
	}
	return keys[0], nil
}

// ReadKeyFile reads a key file: base64 32-byte keys, one per line (blank
// lines and lines starting with '#' are skipped), at least one. The first
// is the primary key.
func ReadKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent: key file: %w (create one with `herd keygen > %s`)", err, path)
	}
	if len(data) > 64<<10 {
		return nil, fmt.Errorf("agent: key file %s: %d bytes, a key file is a few lines", path, len(data))
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseClusterKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("agent: key file %s holds no key", path)
	}
	return keys, nil
}

// ParseClusterKey decodes one base64 key.
func ParseClusterKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("agent: key: not base64: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("agent: key: %d bytes, want 32 (herd keygen makes one)", len(key))
	}
	return key, nil
}
