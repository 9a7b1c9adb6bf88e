package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
	"github.com/herd-dev/herd/units/artifact"
	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshexec/boardfs"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

// Main runs the herd binary's command line (herd agent, herd keygen, herd
// version) and returns the process exit status: 0 ok, 1 error, 2 usage.
// `herd board ...` is the board-side file helper the leader runs over SSH
// (package boardfs, with its own exit statuses), and `herd board session`
// the leader's long-lived command session on a board (boardsession); `herd artifact fetch ...`
// is what a pod's unit runs to place its artifacts (package artifact).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "board" && args[1] == "session" {
		return boardsession.Main(stderr, boardsession.Options{List: sshexec.ListLocal})
	}
	if len(args) > 0 && args[0] == "board" {
		return boardfs.Main(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "artifact" {
		return artifact.Main(args[1:], stderr)
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if a := args[0]; a == "-h" || a == "--help" || a == "-help" || a == "help" {
		usage(stdout)
		return 0
	}
	var cmd *command
	for _, c := range commands(stdout, stderr) {
		if c.name == args[0] {
			cmd = &c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "error: unknown command %q for \"herd\" (herd --help lists them)\n", args[0])
		return 2
	}
	fs := pflag.NewFlagSet("herd "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	run := cmd.flags(fs)
	err := fs.Parse(goStyleFlags(args[1:]))
	switch {
	case errors.Is(err, pflag.ErrHelp):
		cmd.help(stdout, fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "error: %v (herd %s --help)\n", err, cmd.name)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "error: herd %s takes no arguments, got %q\n", cmd.name, fs.Args())
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

// command is one of herd's subcommands. Its flags and parsing are
// pflag's (as herdctl's, through cobra); the binary on every board does
// without cobra itself, whose help templates cost every agent about a
// quarter of a megabyte of resident memory (BENCHMARKS.md).
type command struct {
	name, short, long string
	// flags defines the command's flags on fs and returns what runs it
	// once they are parsed.
	flags func(fs *pflag.FlagSet) (run func() error)
}

// commands are herd's subcommands beside the board-side helpers.
func commands(stdout, stderr io.Writer) []command {
	return []command{agentCmd(stderr), keygenCmd(stdout), versionCmd(stdout)}
}

// usage prints herd's commands.
func usage(w io.Writer) {
	fmt.Fprint(w, "herd agent: runs on every board of a herd fleet\n\nUsage:\n  herd <command> [flags]\n\nCommands:\n")
	for _, c := range commands(io.Discard, io.Discard) {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, "\nherd <command> --help shows a command's flags.\n")
}

// help prints cmd's description and flags.
func (c command) help(w io.Writer, fs *pflag.FlagSet) {
	text := c.long
	if text == "" {
		text = c.short
	}
	fmt.Fprintf(w, "%s\n\nUsage:\n  herd %s [flags]\n\nFlags:\n%s", text, c.name, fs.FlagUsages())
}

// goStyleFlags accepts Go/Nomad-style single-dash long flags (herd agent
// -dev, -config FILE) by turning -name into --name.
func goStyleFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, '=') != 2 {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

func agentCmd(stderr io.Writer) command {
	return command{
		name:  "agent",
		short: "Run the agent (gossip, Raft, API; the leader also runs the controllers)",
		long: `Run the herd agent. Settings come from --config (TOML) and from flags of
the same names (data_dir = "..." or --data-dir ...); flags win.

  herd agent --config /etc/herd/agent.toml
  herd agent -dev          one throw-away agent on loopback, for trying herd

Every API listener needs a token. Without api_token_file the agent uses
<data_dir>/api.token, generating it (0600) when missing; -dev writes a fresh
one to ` + devTokenHint + `, and removes it on exit.`,
		flags: func(f *pflag.FlagSet) func() error {
			var configFile string
			var dev bool
			fc := DefaultConfig()
			f.StringVar(&configFile, "config", "", "agent configuration file (TOML), e.g. "+DefaultConfigFile)
			f.BoolVar(&dev, "dev", false, "run one throw-away agent on loopback (temporary data dir, bootstraps alone, API on "+DefaultAPIAddr+")")
			f.StringVar(&fc.Name, "name", fc.Name, "node name (a DNS label)")
			f.StringVar(&fc.DataDir, "data-dir", fc.DataDir, "data directory (Raft log and snapshots)")
			f.StringVar(&fc.RaftLogStore, "raft-log-store", fc.RaftLogStore, "Raft log store on disk: wal (default) or bolt; the other one's data is migrated at start")
			f.BoolVar(&fc.Server, "server", fc.Server, "take part in Raft (false: gossip member only)")
			f.IntVar(&fc.BootstrapExpect, "bootstrap-expect", fc.BootstrapExpect, "servers to wait for before forming the first Raft configuration")
			f.StringSliceVar(&fc.Join, "join", fc.Join, "gossip addresses of other agents (repeatable)")
			f.StringVar(&fc.GossipKeyFile, "gossip-key-file", fc.GossipKeyFile, "gossip key file: base64 keys (herd keygen), one per line, the first encrypts")
			f.StringVar(&fc.ServerKeyFile, "server-key-file", fc.ServerKeyFile, "server key file (Raft and forwarding identity; servers only), same format")
			f.StringVar(&fc.ClusterKeyFile, "cluster-key-file", fc.ClusterKeyFile, "legacy: one key for gossip and Raft, used where the gossip or server key file does not exist")
			f.StringToStringVar(&fc.Labels, "labels", fc.Labels, "node labels, k=v,k2=v2")
			f.StringVar(&fc.GossipBind, "gossip-bind", fc.GossipBind, "gossip bind address")
			f.StringVar(&fc.GossipAdvertise, "gossip-advertise", fc.GossipAdvertise, "gossip address other boards use")
			f.StringVar(&fc.RaftBind, "raft-bind", fc.RaftBind, "Raft bind address")
			f.StringVar(&fc.RaftAdvertise, "raft-advertise", fc.RaftAdvertise, "Raft address other servers use")
			f.StringSliceVar(&fc.APIListen, "api-listen", fc.APIListen, "API listeners: host:port or unix:///path (repeatable)")
			f.StringVar(&fc.APITokenFile, "api-token-file", fc.APITokenFile, "API bearer token file, one token per line (default <data-dir>/api.token, generated; -dev: "+devTokenHint+")")
			f.StringSliceVar(&fc.APIHosts, "api-hosts", fc.APIHosts, "extra names the API answers to in the Host header (repeatable)")
			f.StringVar(&fc.MetricsListen, "metrics-listen", fc.MetricsListen, "listener serving only GET /metrics: host:port or auto:PORT (default none; needs --metrics-token-file)")
			f.StringVar(&fc.DNSListen, "dns-listen", fc.DNSListen, "where this agent answers DNS for herd. (UDP and TCP): host:port, auto:PORT or off (default 127.0.0.1:8600 and the advertise IP's port 8600)")
			f.StringVar(&fc.UnitReports, "unit-reports", fc.UnitReports, "off: do not report this board's unit changes to the servers (default: report them where systemd runs)")
			f.StringVar(&fc.ServiceProxy, "service-proxy", fc.ServiceProxy, "IP address the service proxy listens on for services' ports, or off (default every address)")
			f.StringVar(&fc.MetricsTokenFile, "metrics-token-file", fc.MetricsTokenFile, "bearer tokens granting GET /metrics only, one per line")
			f.StringVar(&fc.SSHAddress, "ssh-address", fc.SSHAddress, "where the leader reaches this board's sshd")
			f.StringVar(&fc.SSHHostKeyFile, "ssh-host-key-file", fc.SSHHostKeyFile, "this board's sshd public host key (pinned in gossip)")
			f.StringVar(&fc.SSHUser, "ssh-user", fc.SSHUser, "user the leader logs in as on boards")
			f.StringVar(&fc.SSHKeyFile, "ssh-key-file", fc.SSHKeyFile, "cluster SSH private key the leader uses")
			f.StringVar(&fc.LogLevel, "log-level", fc.LogLevel, "debug, info, warn or error")
			f.BoolVar(&fc.Pprof, "pprof", fc.Pprof, "serve runtime profiles under /debug/pprof/ on the API listeners (behind the API token)")
			return func() error { return runAgent(f, stderr, configFile, dev, &fc) }
		},
	}
}

// runAgent runs herd agent: the configuration from -dev or configFile
// and the flags set (fc), then the agent until SIGINT or SIGTERM (leaving
// the cluster) or RestartSignal (staying in it).
func runAgent(flags *pflag.FlagSet, stderr io.Writer, configFile string, dev bool, fc *Config) error {
	var cfg Config
	var key []byte
	if dev {
		dir, err := os.MkdirTemp("", "herd-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg = DevConfig(dir)
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
	} else {
		cfg = DefaultConfig()
		if configFile != "" {
			if err := LoadConfigFile(&cfg, configFile); err != nil {
				return err
			}
		}
	}
	applyFlags(flags, &cfg, fc)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	tuneRuntime(cfg, os.Getenv)
	if dev && cfg.APITokenFile == "" {
		path, remove, err := writeDevToken(os.Getenv)
		if err != nil {
			return err
		}
		defer remove()
		cfg.APITokenFile = path
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: parseLevel(cfg.LogLevel)}))
	a, err := New(cfg, Options{ClusterKey: key, Logger: logger})
	if err != nil {
		return err
	}
	if dev {
		logger.Info("dev agent ready", "api", a.APIAddrs(), "dataDir", cfg.DataDir, "tokenFile", a.APITokenFile(), "hint", "herdctl apply -f examples/web.toml")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// RestartSignal: stop without leaving the cluster, for
	// systemd to start the agent again (herdctl upgrade).
	restart := make(chan os.Signal, 1)
	signal.Notify(restart, RestartSignal)
	defer signal.Stop(restart)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-restart:
			a.restarting.Store(true)
			cancel()
		case <-rctx.Done():
		}
	}()
	return a.Run(rctx)
}

// DefaultGCPercent is the agent's garbage collection target (GOGC) unless
// the environment sets GOGC: the heap may grow 50 % over what is live
// before a collection, not Go's 100 %. An idle agent's live heap is a few
// MB and most of its allocations are short-lived packet buffers, so this
// keeps 1-2 MB less heap resident at no measurable CPU cost (BENCHMARKS.md,
// "Idle agents on the lab").
const DefaultGCPercent = 50

// DefaultMaxProcs is how many threads at once run the agent's Go code
// (GOMAXPROCS) unless the environment sets GOMAXPROCS: one. An agent is
// idle almost always and then wakes for a packet or a timer a few hundred
// times a second; with one P each wake-up runs where it lands, where with
// one P per core the runtime also wakes a second thread to look for work
// (and a Pi Zero has one core anyway). Measured on the lab: about a fifth
// less CPU on every idle agent (BENCHMARKS.md, "Idle: one P").
// Work that needs a second core (a TLS handshake beside a placer pass) is
// rare and short.
const DefaultMaxProcs = 1

// tuneRuntime sets the Go runtime for a long-running agent: the GC target
// (DefaultGCPercent, unless getenv("GOGC") is set), GOMAXPROCS
// (DefaultMaxProcs, unless getenv("GOMAXPROCS") is set) and, unless
// cfg.Pprof, no heap profile sampling: linking runtime/pprof turns it on
// for the whole process (a stack walk every ~512 KB allocated and its
// bucket table), which only an agent that serves profiles needs.
func tuneRuntime(cfg Config, getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(DefaultMaxProcs)
	}
	if !cfg.Pprof {
		runtime.MemProfileRate = 0
	}
}

// applyFlags copies the flags the user set over cfg.
func applyFlags(flags *pflag.FlagSet, cfg, fc *Config) {
	set := func(name string, apply func()) {
		if flags.Changed(name) {
			apply()
		}
	}
	set("name", func() { cfg.Name = fc.Name })
	set("data-dir", func() { cfg.DataDir = fc.DataDir })
	set("raft-log-store", func() { cfg.RaftLogStore = fc.RaftLogStore })
	set("server", func() { cfg.Server = fc.Server })
	set("bootstrap-expect", func() { cfg.BootstrapExpect = fc.BootstrapExpect })
	set("join", func() { cfg.Join = fc.Join })
	set("gossip-key-file", func() { cfg.GossipKeyFile = fc.GossipKeyFile })
	set("server-key-file", func() { cfg.ServerKeyFile = fc.ServerKeyFile })
	set("cluster-key-file", func() { cfg.ClusterKeyFile = fc.ClusterKeyFile })
	set("labels", func() { cfg.Labels = fc.Labels })
	set("gossip-bind", func() { cfg.GossipBind = fc.GossipBind })
	set("gossip-advertise", func() { cfg.GossipAdvertise = fc.GossipAdvertise })
	set("raft-bind", func() { cfg.RaftBind = fc.RaftBind })
	set("raft-advertise", func() { cfg.RaftAdvertise = fc.RaftAdvertise })
	set("api-listen", func() { cfg.APIListen = fc.APIListen })
	set("api-token-file", func() { cfg.APITokenFile = fc.APITokenFile })
	set("api-hosts", func() { cfg.APIHosts = fc.APIHosts })
	set("metrics-listen", func() { cfg.MetricsListen = fc.MetricsListen })
	set("metrics-token-file", func() { cfg.MetricsTokenFile = fc.MetricsTokenFile })
	set("dns-listen", func() { cfg.DNSListen = fc.DNSListen })
	set("service-proxy", func() { cfg.ServiceProxy = fc.ServiceProxy })
	set("unit-reports", func() { cfg.UnitReports = fc.UnitReports })
	set("ssh-address", func() { cfg.SSHAddress = fc.SSHAddress })
	set("ssh-host-key-file", func() { cfg.SSHHostKeyFile = fc.SSHHostKeyFile })
	set("ssh-user", func() { cfg.SSHUser = fc.SSHUser })
	set("ssh-key-file", func() { cfg.SSHKeyFile = fc.SSHKeyFile })
	set("log-level", func() { cfg.LogLevel = fc.LogLevel })
	set("pprof", func() { cfg.Pprof = fc.Pprof })
}

const devTokenHint = "$XDG_CONFIG_HOME/herd/dev.token, where herdctl finds it"

// writeDevToken writes a new token for `herd agent -dev` to
// api.DevTokenPath (0600), where herdctl looks when it has no other
// token. remove deletes the file unless something else replaced it.
func writeDevToken(getenv func(string) string) (path string, remove func(), err error) {
	path, err = api.DevTokenPath(getenv)
	if err != nil {
		return "", nil, fmt.Errorf("agent: dev token: %w (or give --api-token-file)", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", nil, fmt.Errorf("agent: dev token: %w", err)
	}
	tok, err := httpapi.GenerateToken()
	if err != nil {
		return "", nil, err
	}
	if err := httpapi.WriteTokenFile(path, tok); err != nil {
		return "", nil, fmt.Errorf("agent: dev token: %w", err)
	}
	return path, func() {
		if toks, err := api.ReadTokenFile(path); err == nil && len(toks) == 1 && toks[0] == tok {
			os.Remove(path)
		}
	}, nil
}

func keygenCmd(stdout io.Writer) command {
	return command{
		name:  "keygen",
		short: "Print a new random key (base64, 32 bytes) for gossip_key_file or server_key_file",
		flags: func(*pflag.FlagSet) func() error {
			return func() error {
				key := make([]byte, 32)
				if _, err := rand.Read(key); err != nil {
					return err
				}
				_, err := fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
				return err
			}
		},
	}
}

func versionCmd(stdout io.Writer) command {
	return command{
		name:  "version",
		short: "Print the agent version (-o json: with its state format)",
		flags: func(f *pflag.FlagSet) func() error {
			var output string
			f.StringVarP(&output, "output", "o", "", "output format: json")
			return func() error {
				switch output {
				case "":
					_, err := fmt.Fprintln(stdout, "herd", Version)
					return err
				case "json":
					b, err := json.Marshal(api.VersionInfo{Version: Version, StateFormat: raftstore.StateFormat,
						GoVersion: runtime.Version(), Arch: runtime.GOARCH})
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(stdout, "%s\n", b)
					return err
				}
				return usageError{fmt.Errorf("herd version: -o %q: want json", output)}
			}
		},
	}
}
