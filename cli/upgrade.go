package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/bootstrap"
	"github.com/herd-dev/herd/client"
)

// upgradeRequestTimeout bounds one status request while upgrading or
// removing: the gate asks again soon anyway.
const upgradeRequestTimeout = 3 * time.Second

func (a *app) upgradeCmd() *cobra.Command {
	def := bootstrap.DefaultOptions()
	// The bootstrap flags upgrade does not offer keep their defaults.
	f := bootstrapFlags{upgrade: true, servers: def.Servers, parallel: 1, nameFrom: bootstrap.NameFromHostname}
	cmd := &cobra.Command{
		Use:   "upgrade [--dist DIR | --herd-binary FILE]",
		Short: "Roll a new herd binary onto every board, one at a time",
		Long: `Roll a new herd agent onto every board recorded for the cluster, one board at
a time: workers first, then the servers, the leader last (its agent hands
leadership to another server as it stops).

On each board the new binary (--dist DIR: herd-linux-<arch> as make release
writes them; --herd-binary FILE: one binary for one architecture; default:
the herd next to herdctl) is uploaded beside the running one as
/usr/local/bin/herd.new and run there ("herd version -o json") for its
version and state format. A board already running that version is skipped;
a binary of an older state format than the cluster runs is refused (it
could not read the cluster's state). Otherwise it is renamed over
/usr/local/bin/herd and herd.service restarted. Workloads keep running:
restarting the agent does not touch the herd-*.service units.

The next board waits until the restarted agent answers with the new version,
is alive in gossip, the cluster has a leader, and (for a server) it has
applied everything the leader had committed when it was restarted
(--gate-timeout per board, default 2m). The first board that fails stops
the roll; running upgrade again goes on (boards done are skipped).

Boards are reached as bootstrap reaches them (your SSH setup, known_hosts);
the cluster's API through SSH to its servers.`,
		Example: `  herdctl upgrade --cluster attic --dist ./dist --dry-run
  herdctl upgrade --cluster attic --dist ./dist
  herdctl upgrade --cluster lab -F /var/lib/herd-lab/ssh_config --herd-binary bin/herd`,
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runBootstrap(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	boardFlags(fl, &f, def)
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the order the boards would be upgraded in, change nothing")
	fl.DurationVar(&f.gateTimeout, "gate-timeout", 2*time.Minute, "how long to wait for each board to come back")
	return cmd
}

// fleetAPI reaches the cluster's API and each board's own agent through
// SSH, as bootstrap reaches the boards.
type fleetAPI struct {
	a      *app
	o      bootstrap.Options
	sshCfg *bootstrap.SSHConfig
	auth   *bootstrap.Auth
	token  string
	warn   func(string, ...any)

	mu      sync.Mutex
	cluster *client.Client
	tunnels []*tunnel
	boards  map[string]*client.Client
}

func (a *app) newFleetAPI(o bootstrap.Options, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, say func(string, ...any)) (*fleetAPI, *bootstrap.State, error) {
	st, _, err := bootstrap.LoadState(o.StateDir, o.Cluster, false)
	if err != nil {
		return nil, nil, err
	}
	tok, err := os.ReadFile(st.TokenFile())
	if err != nil {
		return nil, nil, fmt.Errorf("api token: %w", err)
	}
	fa := &fleetAPI{a: a, o: o, sshCfg: sshCfg, auth: auth, token: strings.TrimSpace(string(tok)), warn: say, boards: map[string]*client.Client{}}
	var hosts []tunnelHost
	var problems []string
	for _, s := range st.Servers() {
		h, err := fa.host(s)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("cannot reach any server of cluster %q: %s", o.Cluster, strings.Join(problems, "; "))
	}
	if fa.cluster, err = fa.client(hosts); err != nil {
		return nil, nil, err
	}
	return fa, st, nil
}

// host is how the tunnel reaches board s.
func (fa *fleetAPI) host(s bootstrap.StateBoard) (tunnelHost, error) {
	tg, err := fa.sshCfg.Resolve(s.BoardArg())
	if err != nil {
		return tunnelHost{}, err
	}
	signers, _, err := fa.auth.Signers(tg)
	if err != nil {
		return tunnelHost{}, err
	}
	files := fa.o.KnownHostsFiles
	if len(files) == 0 {
		files = tg.KnownHostsFiles
	}
	if len(files) == 0 {
		files = fa.o.DefaultKnownHosts
	}
	kh, err := bootstrap.LoadKnownHosts(files)
	if err != nil {
		return tunnelHost{}, err
	}
	h := tunnelHost{target: tg, signers: signers, known: kh}
	if fa.o.Root != "" {
		label := tg.Arg[strings.LastIndexByte(tg.Arg, '@')+1:]
		h.socket = fa.o.BoardRoot(label) + bootstrap.APISocket
	}
	return h, nil
}

func (fa *fleetAPI) client(hosts []tunnelHost) (*client.Client, error) {
	tun := newTunnel(hosts, nil, func(msg string) { fa.warn("warning: %s", msg) })
	fa.tunnels = append(fa.tunnels, tun)
	return tun.apiClient(fa.token, upgradeRequestTimeout)
}

// Close closes every tunnel.
func (fa *fleetAPI) Close() {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	for _, t := range fa.tunnels {
		t.Close()
	}
}

// Status is the cluster's status through any server.
func (fa *fleetAPI) Status(ctx context.Context) (api.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, upgradeRequestTimeout)
	defer cancel()
	return fa.cluster.Status(ctx)
}

// BoardStatus is board b's own agent's status: a server's from its own
// API; a worker (whose API token only the board knows) as the cluster
// sees it: the version its agent announces in gossip (its Node), and its
// gossip state.
func (fa *fleetAPI) BoardStatus(ctx context.Context, b bootstrap.StateBoard) (api.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, upgradeRequestTimeout)
	defer cancel()
	if !b.Server {
		raw, err := fa.cluster.Get(ctx, api.KindNode, b.Name)
		if err != nil {
			return api.ClusterStatus{}, err
		}
		var ns api.NodeStatus
		if len(raw.Status) > 0 {
			if err := json.Unmarshal(raw.Status, &ns); err != nil {
				return api.ClusterStatus{}, fmt.Errorf("node %s: status: %w", b.Name, err)
			}
		}
		if ns.Phase != api.NodeReady {
			return api.ClusterStatus{}, fmt.Errorf("node %s is %s", b.Name, orDash(string(ns.Phase)))
		}
		return api.ClusterStatus{Node: b.Name, Version: ns.Version}, nil
	}
	fa.mu.Lock()
	c, ok := fa.boards[b.Name]
	if !ok {
		h, err := fa.host(b)
		if err != nil {
			fa.mu.Unlock()
			return api.ClusterStatus{}, err
		}
		if c, err = fa.client([]tunnelHost{h}); err != nil {
			fa.mu.Unlock()
			return api.ClusterStatus{}, err
		}
		fa.boards[b.Name] = c
	}
	fa.mu.Unlock()
	st, err := c.Status(ctx)
	if err == nil && st.Node != b.Name {
		return st, fmt.Errorf("the agent on %s answers as %q", b.Name, st.Node)
	}
	return st, err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// upgradeFleet runs bootstrap.Upgrade for herdctl upgrade.
func (a *app) upgradeFleet(ctx context.Context, f bootstrapFlags, o bootstrap.Options, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, say func(string, ...any)) error {
	if f.gateTimeout <= 0 {
		return usagef("--gate-timeout %v: must be > 0", f.gateTimeout)
	}
	fa, _, err := a.newFleetAPI(o, sshCfg, auth, say)
	if err != nil {
		return err
	}
	defer fa.Close()
	uo := bootstrap.UpgradeOptions{Status: fa.Status, BoardStatus: fa.BoardStatus, DryRun: f.dryRun, GateTimeout: f.gateTimeout}
	start := time.Now()
	if f.dryRun {
		say("dry run: boards would be upgraded in this order (nothing changed):")
	}
	res, err := bootstrap.Upgrade(ctx, o, uo)
	if err != nil {
		return err
	}
	if f.dryRun {
		return nil
	}
	n, skipped := 0, 0
	for _, b := range res.Boards {
		if b.Action == bootstrap.UpgradeSkip {
			skipped++
		} else {
			n++
		}
	}
	say("cluster %q: %d boards upgraded, %d already up to date, in %.1fs", o.Cluster, n, skipped, time.Since(start).Seconds())
	return nil
}

// removeBoards runs bootstrap.Remove for herdctl bootstrap --remove.
func (a *app) removeBoards(ctx context.Context, f bootstrapFlags, o bootstrap.Options, sshCfg *bootstrap.SSHConfig, auth *bootstrap.Auth, say func(string, ...any)) error {
	status := func(context.Context) (api.ClusterStatus, error) {
		return api.ClusterStatus{}, fmt.Errorf("no server of cluster %q reachable", o.Cluster)
	}
	fa, _, err := a.newFleetAPI(o, sshCfg, auth, say)
	switch {
	case err == nil:
		defer fa.Close()
		status = fa.Status
	case !f.force:
		return err
	default:
		say("warning: %v (--force: removing without the cluster)", err)
	}
	removed, err := bootstrap.Remove(ctx, o, bootstrap.RemoveOptions{Status: status, Force: f.force})
	var servers []string
	for _, r := range removed {
		say("%s: herd removed (%d workload units stopped); dropped from %s", r.Board.Name, len(r.Units), o.StateDir)
		if r.Board.Server {
			servers = append(servers, r.Board.Target)
		}
	}
	if len(servers) > 0 {
		name := a.contextName
		if name == "" {
			name = o.Cluster
		}
		if cerr := a.dropContextHosts(name, servers); cerr != nil {
			say("warning: context %q: %v", name, cerr)
		}
	}
	return err
}

// dropContextHosts removes the hosts whose SSH target (host:port) is one
// of targets from context name's ssh table: a removed server no longer
// serves the API. A context without an ssh table is left alone.
func (a *app) dropContextHosts(name string, targets []string) error {
	cfg, path, err := a.loadConfig()
	if err != nil {
		return err
	}
	c, ok := cfg.context(name)
	if !ok || c.SSH == nil {
		return nil
	}
	before := len(c.SSH.Hosts)
	c.SSH.Hosts = slices.DeleteFunc(c.SSH.Hosts, func(h string) bool {
		_, host, port, err := bootstrap.SplitTarget(h)
		if port == 0 {
			port = 22
		}
		return err == nil && slices.Contains(targets, bootstrap.Target{Host: host, Port: port}.Addr())
	})
	if len(c.SSH.Hosts) == before {
		return nil
	}
	return saveConfig(path, cfg)
}
