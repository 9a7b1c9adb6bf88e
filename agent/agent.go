package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/agent/metrics"
	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/agent/svcproxy"
	"github.com/herd-dev/herd/agent/svcview"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/secretbox"
	"github.com/herd-dev/herd/raftstore"
)

// Version is the agent version, stamped at build time with
// -ldflags "-X github.com/herd-dev/herd/agent.Version=...".
var Version = "dev"

// Agent is one running herd agent.
type Agent struct {
	// restarting is set by RestartSignal: Run then stops without leaving
	// gossip.
	restarting atomic.Bool

	cfg    Config
	log    *slog.Logger
	keys   keys
	tokens *httpapi.TokenFile
	facts  api.BoardFacts
	adv    Advertised
	store  *raftstore.Store // nil for a gossip-only agent
	exec   placerExecutor   // nil when the cluster SSH key is missing
	gossip *gossip.Gossip
	// pinger is gossip once it runs, for the Raft store's second opinions
	// (leaderAnswers), which may come before.
	pinger atomic.Pointer[gossip.Gossip]
	api    *httpapi.Server

	metrics         *metrics.Registry
	metricsTokens   *httpapi.TokenFile // nil without metrics_token_file
	metricsListener net.Listener       // nil without metrics_listen
	dns             []dnsListener      // dns_listen's listeners
	view            *svcview.Feed      // the services as this board sees them
	proxy           *svcproxy.Proxy    // nil with service_proxy = "off"
	viewFile        string             // where a worker reads the view
	reports         *placer.Reports    // boards' unit reports (servers only)
	ring            *secretbox.Ring    // seals and opens secrets (servers only)

	mu        sync.Mutex
	listeners []net.Listener
	bootDone  bool
}

// Options carry what a caller (tests, herd agent -dev) hands the agent
// instead of reading it from files.
type Options struct {
	// GossipKeys and ServerKeys, when set, are used instead of the key
	// files (the first key of each is the primary).
	GossipKeys, ServerKeys [][]byte
	// ClusterKey, when set, is the one key of both purposes (herd agent
	// -dev, tests) where GossipKeys or ServerKeys is not set.
	ClusterKey []byte
	// Logger, when set, receives the agent's logs.
	Logger *slog.Logger
	// GossipTiming overrides the memberlist timings (tests use the local
	// preset).
	GossipTiming *gossip.Timing
	// Facts, when set, replace what ReadFacts finds.
	Facts *api.BoardFacts
	// Executor, when set, is how the leader acts on boards instead of SSH
	// (in-process tests use a fake fleet).
	Executor placerExecutor
	// ServiceViewFile, when set, is where a worker reads the service view
	// instead of svcview.Path (in-process tests).
	ServiceViewFile string
}

// New builds an agent: it opens the raftstore (servers) and starts gossip
// and the API listeners. Run drives it until its context ends.
func New(cfg Config, opts Options) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: opts.Logger}
	if cfg.Server {
		a.reports = placer.NewReports(clock.RealClock())
	}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: parseLevel(cfg.LogLevel)}))
	}
	base := a.log // raftstore adds the node itself
	a.log = a.log.With("node", cfg.Name)
	ks, err := loadKeys(cfg, opts, a.log)
	if err != nil {
		return nil, err
	}
	a.keys = ks
	if cfg.Server {
		if a.ring, err = secretbox.NewRing(ks.server); err != nil {
			return nil, fmt.Errorf("agent: server key: %w", err)
		}
	}
	if opts.Facts != nil {
		a.facts = *opts.Facts
	} else {
		a.facts = ReadFacts()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: data dir: %w", err)
	}
	tf, err := openAPITokens(cfg, a.log)
	if err != nil {
		return nil, err
	}
	a.tokens = tf
	if err := a.startMetrics(); err != nil {
		return nil, err
	}

	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()

	adv, err := advertise(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.adv = adv
	a.log.Info("advertising", "gossip", adv.Gossip, "raft", adv.Raft, "ssh", adv.SSH, "from", adv.How)
	hasState, err := a.openStore(base)
	if err != nil {
		return nil, err
	}
	if err := a.startGossip(opts, adv.Gossip, hasState); err != nil {
		return nil, err
	}
	if opts.Executor != nil {
		a.exec = opts.Executor
	} else if cfg.Server {
		if ex, err := newBoardExecutor(cfg, a.gossip); err != nil {
			a.log.Warn("this server cannot reach boards over SSH; as leader it will not place pods", "err", err)
		} else {
			a.exec = ex
		}
	}

	if err := a.startAPI(); err != nil {
		return nil, err
	}
	if err := a.listenMetrics(); err != nil {
		return nil, err
	}
	if err := a.listenDNS(); err != nil {
		return nil, err
	}
	a.startServices()
	a.viewFile = cmp.Or(opts.ServiceViewFile, svcview.Path)
	ok = true
	return a, nil
}

// openStore opens the Raft store on a server (nothing on a worker) and
// reports whether it holds earlier state.
func (a *Agent) openStore(base *slog.Logger) (hasState bool, err error) {
	cfg := a.cfg
	if !cfg.Server {
		return false, nil
	}
	rc := raftstore.DefaultConfig()
	rc.NodeID = cfg.Name
	rc.DataDir = filepath.Join(cfg.DataDir)
	rc.LogStore = cfg.RaftLogStore
	rc.BindAddr = cfg.RaftBind
	rc.AdvertiseAddr = a.adv.Raft
	rc.ServerKey = a.keys.server[0]
	rc.AcceptServerKeys = a.keys.server[1:]
	rc.Logger = base
	rc.ObserveTxn = a.metrics.ObserveTxn
	rc.LeaderAnswers = a.leaderAnswers
	st, err := raftstore.Open(rc)
	if err != nil {
		return false, err
	}
	a.store = st
	return st.HasExistingState()
}

// startGossip joins the gossip pool, announcing this agent's meta.
func (a *Agent) startGossip(opts Options, gossipAdv string, hasState bool) error {
	cfg := a.cfg
	meta, err := a.meta(hasState)
	if err != nil {
		return err
	}
	gc := gossip.DefaultLANConfig()
	if opts.GossipTiming != nil {
		gc.Timing = *opts.GossipTiming
	}
	gc.Name = cfg.Name
	host, port, _ := net.SplitHostPort(cfg.GossipBind)
	gc.BindAddr = host
	gc.BindPort, _ = strconv.Atoi(port)
	ahost, aport, _ := net.SplitHostPort(gossipAdv)
	gc.AdvertiseAddr = ahost
	gc.AdvertisePort, _ = strconv.Atoi(aport)
	if gc.AdvertisePort == 0 {
		gc.AdvertisePort = gc.BindPort
	}
	gc.Key = a.keys.gossip[0]
	gc.AcceptKeys = a.keys.gossip[1:]
	gc.Join = cfg.Join
	gc.Meta = meta
	gc.Logger = a.log.With("component", "gossip")
	if a.reports != nil {
		gc.OnMessage = a.onGossipMessage
	}
	g, err := gossip.New(gc)
	if err != nil {
		return err
	}
	a.gossip = g
	a.pinger.Store(g)
	return nil
}

// leaderAnswers is the Raft store's second opinion on a leader gone
// silent on Raft (raftstore.Config.LeaderAnswers): two gossip pings of its
// member at once, either answer enough (at 10 % loss each way both go
// unanswered 4 % of the time), each given up after gossip's probe
// timeout. Before gossip runs there is no opinion.
func (a *Agent) leaderAnswers(id string) bool {
	g := a.pinger.Load()
	if g == nil {
		return false
	}
	answered := make(chan bool, 2)
	for range 2 {
		go func() {
			_, err := g.Ping(id)
			answered <- err == nil
		}()
	}
	return <-answered || <-answered
}

// startAPI makes the HTTP API and its listeners (served by Run).
func (a *Agent) startAPI() error {
	cfg := a.cfg
	hc := httpapi.DefaultConfig()
	if a.store != nil {
		hc.Store = a.store
	} else {
		hc.Store = notServerStore{}
	}
	hc.Status = a.Status
	if be, ok := a.exec.(*boardExecutor); ok {
		hc.Logs = be.Logs
	}
	hc.Tokens = a.tokens
	hc.Secrets = a.ring
	hc.Metrics = a.metrics.Handler()
	if a.metricsTokens != nil {
		hc.MetricsTokens = a.metricsTokens
	}
	hc.Hosts = cfg.APIHosts
	hc.Pprof = cfg.Pprof
	hc.Logger = a.log.With("component", "api")
	srv, err := httpapi.New(hc)
	if err != nil {
		return err
	}
	a.api = srv
	for _, l := range cfg.APIListen {
		ln, err := listenAPI(l)
		if err != nil {
			return err
		}
		a.listeners = append(a.listeners, ln)
	}
	return nil
}

// meta is what this agent announces in gossip.
func (a *Agent) meta(hasState bool) (gossip.Meta, error) {
	m := gossip.Meta{
		BoardFacts: a.facts,
		Labels:     a.cfg.Labels,
		Version:    Version,
		Server:     a.cfg.Server,
	}
	if a.store != nil {
		m.RaftAddr = a.store.Addr()
		// A server that already belongs to a cluster never bootstraps
		// again: it announces 0 so that no one counts it as a candidate.
		if !hasState {
			m.BootstrapExpect = a.cfg.BootstrapExpect
		}
	}
	m.SSHAddr = a.adv.SSH
	if a.cfg.SSHHostKeyFile != "" {
		b, err := os.ReadFile(a.cfg.SSHHostKeyFile)
		if err != nil {
			a.log.Warn("cannot read ssh host key; the leader will not be able to reach this board", "file", a.cfg.SSHHostKeyFile, "err", err)
		} else {
			// Keep "type base64", drop the comment: it costs meta bytes.
			f := strings.Fields(string(b))
			if len(f) >= 2 {
				m.HostKey = f[0] + " " + f[1]
			}
		}
	}
	// Fail soft: a board with more devices than fit beside its other
	// facts and labels advertises the first ones and still starts.
	if kept, dropped := gossip.TrimDevices(m); len(dropped) > 0 {
		a.log.Warn("no room in the gossip metadata for every device: these are not advertised, and pods that need them are not placed here; use fewer or shorter labels",
			"advertised", len(kept.Devices), "dropped", strings.Join(dropped, ","))
		m = kept
	}
	return m, nil
}

// RestartSignal makes `herd agent` stop for a restart (systemd's
// Restart=always starts it again, herdctl upgrade sends it): it hands over
// Raft leadership and closes the store as on SIGTERM, but does not leave
// gossip, so the cluster sees an agent that is briefly away (its board
// Ready, its pods kept) rather than a board that left (its pods replaced,
// a server taken out of Raft). bootstrap.RestartSignal names it for
// systemctl kill.
const RestartSignal = syscall.SIGUSR1

// Run runs the agent until ctx ends, then stops it gracefully: it leaves
// gossip (unless RestartSignal stopped it), hands over Raft leadership
// when it holds it, and closes the store.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("agent starting", "version", Version, "server", a.cfg.Server, "gossip", a.gossip.LocalMember().Address())
	var wg sync.WaitGroup
	apiCtx, stopAPI := context.WithCancel(context.Background())
	defer stopAPI()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.api.Serve(apiCtx, a.listeners...); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error("api stopped", "err", err)
		}
	}()
	if a.metricsListener != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.api.ServeMetrics(apiCtx, a.metricsListener); err != nil && !errors.Is(err, context.Canceled) {
				a.log.Error("metrics listener stopped", "err", err)
			}
		}()
	}

	a.serveDNS(apiCtx, &wg, a.view)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(a.cfg.Join) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := a.gossip.Join(runCtx, a.cfg.Join)
			if err != nil && runCtx.Err() == nil {
				a.log.Warn("gossip join failed", "err", err)
				return
			}
			a.log.Info("joined gossip", "contacted", n)
		}()
	}
	a.runServices(runCtx, &wg)
	a.startUnitWatch(runCtx, &wg)
	a.startOnDisconnect(runCtx, &wg)
	n := newNotifier()
	wg.Add(2)
	go func() { defer wg.Done(); a.pumpGossip(runCtx, n) }()
	go func() { defer wg.Done(); a.gossip.Reconnect(runCtx) }() // heals partitions
	if a.store != nil {
		changes, unsub := n.subscribe()
		defer unsub()
		wg.Add(2)
		go func() { defer wg.Done(); a.bootstrapLoop(runCtx, changes) }()
		go func() { defer wg.Done(); a.leaderLoop(runCtx, n) }()
	}

	<-ctx.Done()
	cancel()
	if a.restarting.Load() {
		a.log.Info("agent stopping for a restart: staying a gossip member")
	} else {
		a.log.Info("agent stopping")
		if err := a.gossip.Leave(2 * time.Second); err != nil {
			a.log.Warn("gossip leave", "err", err)
		}
	}
	if a.store != nil && a.store.IsLeader() && a.otherVoters() {
		if err := a.store.LeadershipTransfer(); err != nil {
			a.log.Warn("leadership transfer", "err", err)
		}
	}
	stopAPI()
	wg.Wait()
	a.close()
	a.log.Info("agent stopped")
	return nil
}

// otherVoters reports whether a voter other than this agent exists, to
// hand leadership to.
func (a *Agent) otherVoters() bool {
	servers, err := a.store.Configuration()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if s.Voter && s.ID != a.cfg.Name {
			return true
		}
	}
	return false
}

func (a *Agent) close() {
	for _, ln := range a.listeners {
		ln.Close()
	}
	if a.metricsListener != nil {
		a.metricsListener.Close()
	}
	a.closeDNS()
	if a.proxy != nil {
		a.proxy.Close()
	}
	if a.gossip != nil {
		a.gossip.Shutdown()
	}
	if c, ok := a.exec.(io.Closer); ok {
		c.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
}

// placerExecutor is how the leader acts on boards.
type placerExecutor = placer.Executor

// Store returns the agent's raftstore (nil on a gossip-only agent).
func (a *Agent) Store() *raftstore.Store { return a.store }

// Gossip returns the agent's gossip member.
func (a *Agent) Gossip() *gossip.Gossip { return a.gossip }

// APIToken returns the token clients should use: the first line of the
// API token file.
func (a *Agent) APIToken() string {
	toks, _ := a.tokens.Accepted()
	return toks[0]
}

// APITokenFile returns the path of the API token file in use.
func (a *Agent) APITokenFile() string { return a.tokens.Path() }

// APIAddrs returns the addresses the API listens on, in client form.
func (a *Agent) APIAddrs() []string {
	var out []string
	for _, ln := range a.listeners {
		switch ln.Addr().Network() {
		case "unix":
			out = append(out, "unix://"+ln.Addr().String())
		default:
			out = append(out, "http://"+ln.Addr().String())
		}
	}
	return out
}

// statusLeaderTimeout bounds how long Status waits for a leader to confirm
// itself: about an election.
const statusLeaderTimeout = 2 * time.Second

// Status is the agent's view of the cluster (GET /v1/status). It names as
// leader only a server that confirmed its leadership with a quorum within
// ctx (a frozen or cut-off leader that was deposed is not named, even by
// itself); Leader is empty when none did.
func (a *Agent) Status(ctx context.Context) api.ClusterStatus {
	st := api.ClusterStatus{Node: a.cfg.Name, Version: Version, StateFormat: raftstore.StateFormat}
	for _, m := range a.gossip.Members() {
		st.Members = append(st.Members, api.GossipMember{Name: m.Name, Addr: m.Address(), State: m.State, Server: m.Meta.Server})
	}
	if a.store != nil {
		// Bounded so that a cut-off agent still answers promptly.
		vctx, cancel := context.WithTimeout(ctx, statusLeaderTimeout)
		leaderID, _, err := a.store.VerifiedLeader(vctx)
		cancel()
		if err != nil {
			a.log.Debug("status: no leader confirmed itself", "err", err)
		}
		st.Leader = leaderID
		rs := a.store.Stats()
		st.CommitIndex, st.AppliedIndex = rs.CommitIndex, rs.AppliedIndex
		if servers, err := a.store.Configuration(); err == nil {
			for _, s := range servers {
				suf := "nonvoter"
				if s.Voter {
					suf = "voter"
				}
				st.Servers = append(st.Servers, api.RaftServer{ID: s.ID, Address: s.Address, Suffrage: suf, Leader: s.ID == leaderID})
			}
		}
	}
	return st
}

func parseLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func listenAPI(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("agent: api socket: %w", err)
		}
		return httpapi.ListenUnix(p)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: api listen: %w", err)
	}
	return ln, nil
}

// APITokenFileName is the token file an agent without api_token_file
// makes in its data directory.
const APITokenFileName = "api.token"

// openAPITokens opens the API token file: api_token_file, else
// <data_dir>/api.token, created with a new random token (0600) when
// missing, so that no listener is ever open without one. The file is
// re-read as it changes (see httpapi.TokenFile).
func openAPITokens(cfg Config, log *slog.Logger) (*httpapi.TokenFile, error) {
	path := cfg.APITokenFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, APITokenFileName)
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			tok, err := httpapi.GenerateToken()
			if err != nil {
				return nil, err
			}
			if err := httpapi.WriteTokenFile(path, tok); err != nil {
				return nil, fmt.Errorf("agent: api token: %w", err)
			}
			log.Info("generated an API token (api_token_file is not set)", "file", path)
		}
	}
	tf, err := httpapi.OpenTokenFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent: api_token_file: %w", err)
	}
	tf.OnError = func(err error) { log.Warn("api token file not reloaded", "err", err) }
	log.Info("api token file", "file", path)
	return tf, nil
}
