package bootstrap

import (
	"bytes"
	"fmt"
	"io"

	"github.com/BurntSushi/toml"
	"github.com/coreos/go-systemd/v22/unit"
)

// Paths on a board. They are what the agent configuration and the unit
// name; Options.Root only moves where bootstrap writes them (tests).
const (
	BinaryPath      = "/usr/local/bin/herd"
	ConfigDir       = "/etc/herd"
	AgentConfigPath = "/etc/herd/agent.toml"
	GossipKeyPath   = "/etc/herd/gossip.key"
	ServerKeyPath   = "/etc/herd/server.key"
	APITokenPath    = "/etc/herd/api.token"
	// MetricsTokenPath is the metrics token on every board; MetricsListen
	// the agent's metrics listener (the advertised IP, MetricsPort).
	MetricsTokenPath = "/etc/herd/metrics.token"
	MetricsListen    = "auto:7949"
	MetricsPort      = 7949
	// DNSPort is the port of every agent's DNS listener on loopback,
	// where ResolvedDropInPath sends herd. names: agent.DefaultDNSPort,
	// which bootstrap does not import (the agent's tests import bootstrap,
	// and herdctl would link the whole agent); a test in agent checks
	// that the two agree.
	DNSPort       = 8600
	ClusterSSHKey = "/etc/herd/cluster_ssh_key"
	// ClusterSSHPub and ClusterKeyPath are files of older bootstraps
	// (the public key, and the one key of both purposes): removed from
	// every board.
	ClusterSSHPub    = "/etc/herd/cluster_ssh_key.pub"
	ClusterKeyPath   = "/etc/herd/cluster.key"
	UnitPath         = "/etc/systemd/system/herd.service"
	UnitName         = "herd.service"
	DataDir          = "/var/lib/herd"
	APISocket        = "/run/herd/api.sock"
	APIAddr          = "127.0.0.1:7948"
	GossipPort       = 7946
	RaftPort         = 7947
	RootAuthKeysPath = "/root/.ssh/authorized_keys"
)

// HostKeyFiles are the board's sshd public host keys bootstrap looks for,
// in order of preference; the first present one is pinned.
var HostKeyFiles = []string{
	"/etc/ssh/ssh_host_ed25519_key.pub",
	"/etc/ssh/ssh_host_ecdsa_key.pub",
	"/etc/ssh/ssh_host_rsa_key.pub",
}

// AgentConfig is the /etc/herd/agent.toml bootstrap writes: the keys of
// agent.Config it sets, with the same TOML names (a test decodes the
// rendered file strictly with the agent's own loader).
type AgentConfig struct {
	Name            string   `toml:"name"`
	DataDir         string   `toml:"data_dir"`
	Server          bool     `toml:"server"`
	BootstrapExpect int      `toml:"bootstrap_expect,omitzero"`
	Join            []string `toml:"join"`
	GossipKeyFile   string   `toml:"gossip_key_file"`
	ServerKeyFile   string   `toml:"server_key_file,omitempty"`
	// ClusterKeyFile is always empty: a bootstrapped board never falls
	// back to the legacy single key (the agent's default path).
	ClusterKeyFile   string            `toml:"cluster_key_file"`
	GossipBind       string            `toml:"gossip_bind"`
	GossipAdvertise  string            `toml:"gossip_advertise"`
	RaftBind         string            `toml:"raft_bind"`
	RaftAdvertise    string            `toml:"raft_advertise"`
	APIListen        []string          `toml:"api_listen"`
	APITokenFile     string            `toml:"api_token_file,omitempty"`
	MetricsListen    string            `toml:"metrics_listen,omitempty"`
	MetricsTokenFile string            `toml:"metrics_token_file,omitempty"`
	SSHAddress       string            `toml:"ssh_address"`
	SSHHostKeyFile   string            `toml:"ssh_host_key_file"`
	SSHUser          string            `toml:"ssh_user"`
	SSHKeyFile       string            `toml:"ssh_key_file,omitempty"`
	Labels           map[string]string `toml:"labels,omitempty"`
}

const agentConfigHeader = `# herd agent configuration, written by herdctl bootstrap.
# Running bootstrap again rewrites this file; keep local changes elsewhere
# (flags in a systemd drop-in win over this file).

`

// RenderAgentConfig encodes c as TOML (with the BurntSushi encoder: values
// are data, never spliced into text), after a fixed header comment.
func RenderAgentConfig(c AgentConfig) ([]byte, error) {
	if c.Join == nil {
		c.Join = []string{}
	}
	var buf bytes.Buffer
	buf.WriteString(agentConfigHeader)
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("bootstrap: encode agent config: %w", err)
	}
	return buf.Bytes(), nil
}

// RuntimeEnv is the Go runtime setting herd.service starts the agent
// with. A schedtrace period keeps the runtime's monitor thread (sysmon)
// out of its deep sleep, so that it wakes every 10 ms instead of at every
// system call the agent makes after an idle moment, and then every 20 µs
// while the agent works: on an idle lab server that was 200–400 wake-ups
// a second and a third of the agent's CPU (BENCHMARKS.md, "Idle: the
// runtime's monitor thread"). The period itself is a day: one SCHED line
// a day in the journal. A drop-in's own Environment=GODEBUG=... replaces
// it.
const RuntimeEnv = "GODEBUG=schedtrace=86400000"

// UnitOptions are the options of herd.service.
func UnitOptions() []*unit.UnitOption {
	o := unit.NewUnitOption
	return []*unit.UnitOption{
		o("Unit", "Description", "herd agent"),
		o("Unit", "Documentation", "https://github.com/herd-dev/herd"),
		o("Unit", "Wants", "network-online.target"),
		o("Unit", "After", "network-online.target"),
		o("Unit", "StartLimitIntervalSec", "0"),
		o("Service", "Type", "simple"),
		o("Service", "ExecStart", BinaryPath+" agent --config "+AgentConfigPath),
		o("Service", "Restart", "always"),
		o("Service", "RestartSec", "1"),
		o("Service", "TimeoutStopSec", "30"),
		o("Service", "LimitNOFILE", "65536"),
		o("Service", "Environment", RuntimeEnv),
		o("Service", "StateDirectory", "herd"),
		o("Service", "StateDirectoryMode", "0700"),
		o("Service", "RuntimeDirectory", "herd"),
		o("Service", "RuntimeDirectoryMode", "0755"),
		o("Service", "UMask", "0077"),
		o("Install", "WantedBy", "multi-user.target"),
	}
}

// RenderUnit returns herd.service, serialised by go-systemd.
func RenderUnit() []byte {
	b, _ := io.ReadAll(unit.Serialize(UnitOptions())) // a bytes.Buffer: no error
	return b
}
