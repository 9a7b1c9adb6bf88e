package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herd-dev/herd/bootstrap"
)

const (
	// defaultBootstrapWait bounds waiting for the cluster to form when
	// --timeout is not given.
	defaultBootstrapWait = 60 * time.Second
	// envBootstrapTestRoot, for tests only, moves every path bootstrap
	// touches on the boards under DIR/<board> (see bootstrap.Options.Root).
	envBootstrapTestRoot = "HERD_BOOTSTRAP_TEST_ROOT"
)

// bootstrapFlags are the flags of herdctl bootstrap.
type bootstrapFlags struct {
	sshConfig  string
	identities []string
	knownHosts []string
	cluster    string
	stateDir   string
	servers    int
	add        bool
	server     bool
	labels     []string
	advertise  []string
	nameFrom   string
	herdBinary string
	dist       string
	parallel   int
	noWait     bool
	rotate     string
	// remove and force: --remove BOARD... (bootstrap/remove.go).
	remove, force bool
	// upgrade, dryRun, gateTimeout: herdctl upgrade (cli/upgrade.go).
	upgrade     bool
	dryRun      bool
	gateTimeout time.Duration
}

func (a *app) bootstrapCmd() *cobra.Command {
	f := bootstrapFlags{}
	def := bootstrap.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "bootstrap [flags] [user@]host[:port]...",
		Short: "Install herd on boards over SSH and form a cluster",
		Long: `Install the herd agent on boards over SSH and form a cluster, then make a
herdctl context that reaches it through SSH.

Each board is reached with your own SSH setup: Host aliases, User, Port and
IdentityFile from ~/.ssh/config (or -F FILE), keys from -i or ssh-agent, and
host keys checked against your known_hosts (a board missing from it, or with
another key, is refused: log in once with ssh first). bootstrap logs in as
the given user: root, or a user with passwordless sudo (pi@ on Raspberry Pi
OS), whose every command then runs as "sudo -n -- argv" (a sudo that wants a
password stops bootstrap with the fix); every board needs the sudo package.
On every board it checks systemd and the CPU architecture, installs
the matching herd binary as /usr/local/bin/herd, writes /etc/herd/agent.toml
and herd.service, and starts the agent. The first --servers boards are the
Raft servers; the others are workers.

Keys, one purpose each: every board gets /etc/herd/gossip.key (gossip
encryption); servers also get /etc/herd/server.key (Raft and forwarding
identity), /etc/herd/cluster_ssh_key (the leader's SSH key) and
/etc/herd/api.token; workers get none of those, and bootstrap removes them
(and an old /etc/herd/cluster.key) where a board should not hold them.
The leader logs in as the account herd-exec that bootstrap creates on every
board (no password; /var/lib/herd-exec/.ssh/authorized_keys holds only the
cluster SSH key, usable only from the servers' addresses and only through
"herd ssh-gate", herd's fixed command wrapper and sftp; the sudoers drop-in
/etc/sudoers.d/herd lets it run only that gate as root). A cluster key that
older versions authorised for root is removed there. Your own logins are
left as they are.

The keys are made once and kept with the list of boards in the state folder
(default ~/.config/herd/clusters/NAME, mode 0700, files 0600): keep it safe,
it is what lets you add boards later (--add). A folder of an older herdctl
with one cluster.key is migrated: that key becomes both gossip.key and
server.key until you rotate them. Running bootstrap again with the same
arguments changes nothing on the boards.

--rotate gossip|server|ssh|token|metrics replaces one key on every recorded
board (no board arguments): the new key is added beside the old, then used,
then the old one dropped, each phase on every board before the next (the API
and metrics tokens are switched in one phase). A rotation stopped by an unreachable board goes
on where it stopped when run again.

--remove BOARD... takes herd off recorded boards (by node name or the
argument they were bootstrapped with), one at a time: the cluster SSH key's
authorized_keys line, herd.service (the agent leaves the cluster: a server
leaves Raft, a worker's pods are replaced elsewhere), every herd-*.service
unit, and herd's files, keys and state (/usr/local/bin/herd, /etc/herd,
/var/lib/herd, herd.service); the board is dropped from the state folder.
Removing the last server, or a server whose leaving breaks the quorum, is
refused without --force.

Boards are worked on in parallel; a board that fails is reported and the
others go on (exit status 1). bootstrap then writes a context (--context,
default the cluster name) that reaches the servers through SSH, makes it
current, and waits (--timeout, default 60s) for a leader and for every board
to join, through that SSH tunnel.`,
		Example: `  herdctl bootstrap root@10.0.0.2 root@10.0.0.3 root@10.0.0.4 root@10.0.0.5
  herdctl bootstrap --cluster attic --dist ./dist pi1 pi2 pi3      # ~/.ssh/config aliases
  herdctl bootstrap --cluster attic --add --label room=attic pi4
  herdctl bootstrap --cluster attic --rotate server
  herdctl bootstrap --cluster attic --remove pi4`,
		Args:              argsBetween(0, -1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runBootstrap(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	boardFlags(fl, &f, def)
	fl.IntVar(&f.servers, "servers", def.Servers, "how many of the first boards are Raft servers (3 or 5 are usual)")
	fl.BoolVar(&f.add, "add", false, "add the boards to the existing cluster (as workers unless --server)")
	fl.BoolVar(&f.server, "server", false, "with --add: make the new boards Raft servers")
	fl.StringArrayVar(&f.labels, "label", nil, "node label KEY=VALUE for every board (repeatable)")
	fl.StringArrayVar(&f.advertise, "advertise", nil, "BOARD=IP: the address BOARD's agent advertises to the others, for a board they reach at another address than herdctl does (repeatable; default: each agent's address on the route to its peers)")
	fl.StringVar(&f.nameFrom, "name-from", bootstrap.NameFromHostname, "node names from the board's host name or from the alias given (hostname|alias)")
	fl.IntVar(&f.parallel, "parallel", def.Parallel, "boards worked on at once")
	fl.BoolVar(&f.noWait, "no-wait", false, "do not wait for the cluster to form")
	fl.StringVar(&f.rotate, "rotate", "", "replace one key on every recorded board: "+strings.Join(bootstrap.RotateKeys, ", "))
	fl.BoolVar(&f.remove, "remove", false, "take herd off the given recorded boards (units, agent, files, keys) and out of the cluster")
	fl.BoolVar(&f.force, "force", false, "with --remove: remove the last server, or a server whose leaving breaks the quorum")
	cmd.RegisterFlagCompletionFunc("name-from", cobra.FixedCompletions([]string{bootstrap.NameFromHostname, bootstrap.NameFromAlias}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) runBootstrap(cmd *cobra.Command, f bootstrapFlags, args []string) error {
	home := a.getenv("HOME")
	local := a.getenv("USER")
	if local == "" {
		if u, err := user.Current(); err == nil {
			local = u.Username
		}
	}
	expand := homeExpander(home)
	sshCfg, err := loadBootstrapSSHConfig(f, home, local, expand)
	if err != nil {
		return err
	}
	o := bootstrap.DefaultOptions()
	o.Cluster = f.cluster
	if err := checkBootstrapModes(f, args); err != nil {
		return err
	}
	o.Boards = args
	o.SSHConfig = sshCfg
	var identities []string
	for _, p := range f.identities {
		e, err := expand("-i", p)
		if err != nil {
			return err
		}
		identities = append(identities, e)
	}
	auth := bootstrap.NewAuth(identities, home, a.getenv("SSH_AUTH_SOCK"))
	defer auth.Close()
	o.Auth = auth
	if err := a.bootstrapOptions(&o, f, args, home, expand); err != nil {
		return err
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(a.stdout, format+"\n", args...)
	}
	o.Progress = func(board, msg string) { say("%s: %s", board, msg) }

	ctx := cmd.Context()
	switch {
	case f.rotate != "":
		return a.rotateKey(ctx, f, o, sshCfg, auth, say)
	case f.remove:
		return a.removeBoards(ctx, f, o, sshCfg, auth, say)
	case f.upgrade:
		return a.upgradeFleet(ctx, f, o, sshCfg, auth, say)
	}
	res, err := bootstrap.Run(ctx, o)
	if err != nil {
		if errors.Is(err, bootstrap.ErrBadTarget) {
			return usageError{err}
		}
		return err
	}
	return a.finishBootstrap(ctx, f, o, res, sshCfg, auth, say)
}

// homeExpander returns a function that expands a leading ~ in a flag's
// path against home, reporting a bad path as a usage error naming flag.
func homeExpander(home string) func(flag, p string) (string, error) {
	return func(flag, p string) (string, error) {
		e, err := bootstrap.ExpandHome(p, home)
		if err != nil {
			return "", usagef("%s: %v", flag, err)
		}
		return e, nil
	}
}

// loadBootstrapSSHConfig reads the ssh client configuration: the -F file,
// which must exist, or else ~/.ssh/config and /etc/ssh/ssh_config if they do.
func loadBootstrapSSHConfig(f bootstrapFlags, home, local string, expand func(flag, p string) (string, error)) (*bootstrap.SSHConfig, error) {
	var required, optional []string
	if f.sshConfig != "" {
		p, err := expand("-F", f.sshConfig)
		if err != nil {
			return nil, err
		}
		required = []string{p}
	} else {
		if home != "" {
			optional = append(optional, filepath.Join(home, ".ssh", "config"))
		}
		optional = append(optional, "/etc/ssh/ssh_config")
	}
	return bootstrap.LoadSSHConfig(required, optional, home, local)
}

// checkBootstrapModes checks the cluster name and that the mode flags
// (--rotate, --remove, --add, --server, --force) and the boards given fit
// together.
func checkBootstrapModes(f bootstrapFlags, args []string) error {
	if err := bootstrap.ValidClusterName(f.cluster); err != nil {
		return usagef("--cluster: %v", err)
	}
	switch {
	case f.rotate != "" && len(args) > 0:
		return usagef("--rotate works on every recorded board: give no boards")
	case f.rotate != "" && (f.add || f.server):
		return usagef("--rotate cannot be combined with --add or --server")
	case f.remove && (f.rotate != "" || f.add || f.server):
		return usagef("--remove cannot be combined with --rotate, --add or --server")
	case f.remove && len(args) == 0:
		return usagef("herdctl bootstrap --remove: missing arguments: want the boards to remove")
	case f.force && !f.remove:
		return usagef("--force only applies with --remove")
	case f.rotate == "" && len(args) == 0 && !f.upgrade:
		return usagef("herdctl bootstrap: missing arguments: want [user@]host[:port]... (or --rotate KEY)")
	case f.rotate != "" && !slices.Contains(bootstrap.RotateKeys, f.rotate):
		return usagef("--rotate %q: want one of %s", f.rotate, strings.Join(bootstrap.RotateKeys, ", "))
	}
	return nil
}

// bootstrapOptions fills o from the remaining flags: known_hosts files,
// state folder, servers and labels, advertised addresses, node names,
// binaries and parallelism.
func (a *app) bootstrapOptions(o *bootstrap.Options, f bootstrapFlags, args []string, home string, expand func(flag, p string) (string, error)) error {
	var err error
	for _, p := range f.knownHosts {
		e, err := expand("--known-hosts", p)
		if err != nil {
			return err
		}
		o.KnownHostsFiles = append(o.KnownHostsFiles, e)
	}
	o.DefaultKnownHosts = defaultKnownHosts(home)
	if f.stateDir != "" {
		if o.StateDir, err = expand("--state-dir", f.stateDir); err != nil {
			return err
		}
	} else if o.StateDir, err = bootstrap.DefaultStateDir(a.getenv, f.cluster); err != nil {
		return err
	}
	if f.server && !f.add {
		return usagef("--server only applies with --add (the first --servers boards are servers)")
	}
	o.Servers, o.Add, o.AddServers = f.servers, f.add, f.server
	if o.Labels, err = bootstrap.ParseLabels(f.labels); err != nil {
		return usageError{err}
	}
	if o.Advertise, err = bootstrap.ParseAdvertise(f.advertise, args); err != nil {
		return usageError{err}
	}
	if f.nameFrom != bootstrap.NameFromHostname && f.nameFrom != bootstrap.NameFromAlias {
		return usagef("--name-from %q: want hostname or alias", f.nameFrom)
	}
	o.NameFrom = f.nameFrom
	if f.herdBinary != "" && f.dist != "" {
		return usagef("give either --herd-binary or --dist, not both")
	}
	if f.herdBinary != "" {
		if o.Binaries.Single, err = expand("--herd-binary", f.herdBinary); err != nil {
			return err
		}
	}
	if f.dist != "" {
		if o.Binaries.Dist, err = expand("--dist", f.dist); err != nil {
			return err
		}
	}
	if f.herdBinary == "" && f.dist == "" {
		o.Binaries.Default = herdNextToHerdctl()
	}
	if f.parallel < 1 {
		return usagef("--parallel %d: must be 1 or more", f.parallel)
	}
	o.Parallel = f.parallel
	if root := a.getenv(envBootstrapTestRoot); root != "" {
		o.Root, o.RootPerBoard = root, true
	}
	return nil
}

// finishBootstrap reports what bootstrap.Run did, writes and selects the
// SSH context that reaches the servers, and (unless --no-wait) waits for
// the bootstrapped boards to join; every failed board is in the error.
func (a *app) finishBootstrap(ctx context.Context, f bootstrapFlags, o bootstrap.Options, res *bootstrap.Result, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, say func(string, ...any)) error {
	if res.Created {
		say("cluster %q: new gossip key, server key, cluster SSH key and API token in %s (keep this folder: --add needs it)", o.Cluster, o.StateDir)
	}
	if res.State.Migrated {
		say("cluster %q: %s had one cluster.key; it is now both gossip.key and server.key, so workers still know the server key: run `herdctl bootstrap --cluster %s --rotate server` (and --rotate gossip) to split them", o.Cluster, o.StateDir, o.Cluster)
	}
	var failed multiError
	var names []string
	for _, b := range res.Boards {
		if b.Err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", b.Label, b.Err))
		} else {
			names = append(names, b.Name)
		}
	}
	servers := res.State.Servers()
	if len(servers) == 0 {
		if len(failed) > 0 {
			return failed
		}
		return errors.New("bootstrap: the cluster has no servers")
	}

	// The herdctl context: reach the servers through SSH.
	ctxName := a.contextName
	if ctxName == "" {
		ctxName = o.Cluster
	}
	sc := bootstrapContext(res, o)
	if err := a.writeSSHContext(ctxName, sc, res.State.TokenFile()); err != nil {
		return err
	}
	path, _ := a.configFile()
	say("context %q (ssh %s@%s) written to %s and made current", ctxName, sc.User, strings.Join(sc.Hosts, ","), path)

	if !f.noWait && len(names) > 0 {
		if err := a.waitBootstrapped(ctx, res, o, sshCfg, auth, names, say); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// rotateKey runs bootstrap.Rotate for --rotate, waiting for the cluster
// to be whole after every phase.
func (a *app) rotateKey(ctx context.Context, f bootstrapFlags, o bootstrap.Options, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, say func(string, ...any)) error {
	ro := bootstrap.RotateOptions{Key: f.rotate}
	if !f.noWait {
		ro.AfterPhase = func(ctx context.Context, phase string, res *bootstrap.Result) error {
			var names []string
			for _, b := range res.Boards {
				names = append(names, b.Name)
			}
			return a.waitBootstrapped(ctx, res, o, sshCfg, auth, names, say)
		}
	}
	res, err := bootstrap.Rotate(ctx, o, ro)
	if err != nil {
		return err
	}
	say("cluster %q: %s key rotated on %d boards; the old one is no longer accepted", o.Cluster, f.rotate, len(res.Boards))
	return nil
}

// herdNextToHerdctl returns the herd binary next to the running herdctl
// (bin/herd beside bin/herdctl), or "".
func herdNextToHerdctl() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	p := filepath.Join(filepath.Dir(exe), "herd")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// bootstrapContext is the ssh table of the cluster's context: the servers
// (HostName[:port], so ~/.ssh/config is not needed), the login user, the
// key and known_hosts file that worked.
func bootstrapContext(res *bootstrap.Result, o bootstrap.Options) sshConfig {
	var sc sshConfig
	byAddr := map[string]bootstrap.BoardResult{}
	for _, b := range res.Boards {
		if b.Err == nil {
			byAddr[b.Target.Addr()] = b
			if sc.Key == "" {
				sc.Key = b.KeyFile
			}
			if sc.KnownHosts == "" {
				switch {
				case len(o.KnownHostsFiles) > 0:
					sc.KnownHosts = bootstrap.ExistingFiles(o.KnownHostsFiles)[0]
				case len(b.Target.KnownHostsFiles) > 0:
					sc.KnownHosts = b.Target.KnownHostsFiles[0]
				}
			}
		}
	}
	for _, s := range res.State.Servers() {
		if sc.User == "" {
			sc.User = s.User
		}
		host := s.Target
		if b, ok := byAddr[s.Target]; ok {
			host = b.Target.HostPort()
		} else if _, h, p, err := bootstrap.SplitTarget(s.Target); err == nil {
			host = bootstrap.Target{Host: h, Port: p}.HostPort()
		}
		if s.User != sc.User {
			host = s.User + "@" + host
		}
		sc.Hosts = append(sc.Hosts, host)
	}
	return sc
}

// writeSSHContext creates or updates context name with sc and the token
// file (dropping its addrs, which an ssh table overrides, and a literal
// token) and makes it current.
func (a *app) writeSSHContext(name string, sc sshConfig, tokenFile string) error {
	cfg, path, err := a.loadConfig()
	if err != nil {
		return err
	}
	c, ok := cfg.context(name)
	if !ok {
		cfg.Contexts = append(cfg.Contexts, configContext{Name: name})
		c = &cfg.Contexts[len(cfg.Contexts)-1]
	}
	c.Addrs = nil
	c.SSH = &sc
	c.Token, c.TokenFile = "", tokenFile
	cfg.CurrentContext = name
	return saveConfig(path, cfg)
}

// waitBootstrapped waits for the cluster to form, asking the servers'
// API through the SSH tunnel, and prints its status.
func (a *app) waitBootstrapped(ctx context.Context, res *bootstrap.Result, o bootstrap.Options, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, names []string, say func(string, ...any)) error {
	byAddr := map[string]bootstrap.BoardResult{}
	for _, b := range res.Boards {
		byAddr[b.Target.Addr()] = b
	}
	var hosts []tunnelHost
	var problems []string
	for _, s := range res.State.Servers() {
		b, ok := byAddr[s.Target]
		tg := b.Target
		if !ok || b.Err != nil {
			var err error
			if tg, err = sshCfg.Resolve(s.BoardArg()); err != nil {
				problems = append(problems, err.Error())
				continue
			}
		}
		signers, _, err := auth.Signers(tg)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		files := o.KnownHostsFiles
		if len(files) == 0 {
			files = tg.KnownHostsFiles
		}
		if len(files) == 0 {
			files = o.DefaultKnownHosts
		}
		kh, err := bootstrap.LoadKnownHosts(files)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		h := tunnelHost{target: tg, signers: signers, known: kh}
		if o.Root != "" {
			label := b.Label
			if label == "" {
				label = s.Target
			}
			h.socket = o.BoardRoot(label) + bootstrap.APISocket
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return fmt.Errorf("bootstrap: cannot reach any server to wait for the cluster: %s", strings.Join(problems, "; "))
	}
	tun := newTunnel(hosts, nil, func(msg string) { say("warning: %s", msg) })
	defer tun.Close()
	tok, err := os.ReadFile(res.State.TokenFile())
	if err != nil {
		return fmt.Errorf("bootstrap: api token: %w", err)
	}
	c, err := tun.apiClient(strings.TrimSpace(string(tok)), 10*time.Second)
	if err != nil {
		return err
	}
	wait := a.effectiveTimeout(defaultBootstrapWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	say("waiting up to %v for the cluster to form...", wait)
	st, err := bootstrap.WaitForCluster(wctx, c.Status, names, time.Second, func(s string) { say("waiting: %s", s) })
	if err != nil {
		return err
	}
	var servers []string
	for _, s := range st.Servers {
		servers = append(servers, s.ID)
	}
	say("cluster %q formed: leader %s, servers %s", o.Cluster, st.Leader, strings.Join(servers, ", "))
	t := &table{Header: []string{"NAME", "ADDRESS", "STATE", "ROLE"}}
	for _, m := range st.Members {
		role := "worker"
		if m.Server {
			role = "server"
		}
		t.Rows = append(t.Rows, []string{m.Name, m.Addr, string(m.State), role})
	}
	say("%s", strings.TrimRight(t.String(), "\n"))
	return nil
}

// boardFlags are the flags of every command that reaches boards as
// bootstrap does (bootstrap, upgrade): the user's SSH setup, the cluster's
// state folder and the herd binaries to install.
func boardFlags(fl *pflag.FlagSet, f *bootstrapFlags, def bootstrap.Options) {
	fl.StringVarP(&f.sshConfig, "ssh-config", "F", "", "ssh client configuration file (default ~/.ssh/config and /etc/ssh/ssh_config)")
	fl.StringArrayVarP(&f.identities, "identity", "i", nil, "private key to log in with (repeatable; default: IdentityFile, ~/.ssh/id_*, ssh-agent)")
	fl.StringArrayVar(&f.knownHosts, "known-hosts", nil, "known_hosts file to verify boards with (repeatable; default ~/.ssh/known_hosts)")
	fl.StringVar(&f.cluster, "cluster", def.Cluster, "cluster name")
	fl.StringVar(&f.stateDir, "state-dir", "", "folder for the cluster's keys and boards (default ~/.config/herd/clusters/CLUSTER)")
	fl.StringVar(&f.herdBinary, "herd-binary", "", "herd binary to install on every board (one architecture)")
	fl.StringVar(&f.dist, "dist", "", "release folder with herd-linux-amd64, -arm64, -armv7, -armv6")
}
