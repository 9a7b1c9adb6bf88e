package bootstrap

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshgate"
)

// Remote is the SSH access bootstrap needs to boards. *sshexec.Executor
// implements it. Bootstrap uses one Remote per board and calls it from one
// goroutine at a time.
type Remote interface {
	Run(ctx context.Context, node string, argv []string) (sshexec.Result, error)
	PutFile(ctx context.Context, node, path string, content []byte, mode os.FileMode, opts ...sshexec.PutFileOptions) error
	ReadFile(ctx context.Context, node, path string) ([]byte, error)
}

var _ Remote = (*sshexec.Executor)(nil)

// MinSystemd is the oldest systemd herd.service works with (StateDirectory=
// and RuntimeDirectory= with modes, systemd 235).
const MinSystemd = 235

// Options configure Run. Start from DefaultOptions.
type Options struct {
	// Cluster names the cluster (a DNS label).
	Cluster string
	// StateDir holds the cluster's secrets and boards (see State).
	StateDir string
	// Boards are the board arguments: [user@]host[:port] or ssh_config
	// Host aliases.
	Boards []string
	// SSHConfig resolves the arguments; nil means no config files.
	SSHConfig *SSHConfig
	// Auth provides the user's keys. Required.
	Auth *Auth
	// KnownHostsFiles, when set (--known-hosts), verify every board.
	// Otherwise a board's ssh_config UserKnownHostsFile does, else
	// DefaultKnownHosts.
	KnownHostsFiles   []string
	DefaultKnownHosts []string
	// Servers is how many of the first boards are Raft servers. Default 3.
	Servers int
	// Add joins the boards to an existing cluster; AddServers makes the
	// new ones servers.
	Add, AddServers bool
	// NameFrom is NameFromHostname (default) or NameFromAlias.
	NameFrom string
	// Labels are given to every board.
	Labels map[string]string
	// Advertise maps board arguments to the IP they advertise
	// (--advertise, see ParseAdvertise); others advertise "auto".
	Advertise map[string]string
	// Binaries say where the herd binaries come from.
	Binaries Binaries
	// Parallel bounds how many boards are worked on at once. Default 4.
	Parallel int
	// DialTimeout bounds connecting to one board. Default 10s.
	DialTimeout time.Duration
	// Progress receives one line per step and board; it may be called
	// from several goroutines at once. Nil discards.
	Progress func(board, msg string)
	// Logger receives SSH connection events. Nil discards.
	Logger *slog.Logger

	// Root, for tests only, is prepended to every path bootstrap reads or
	// writes on the boards (the file contents still name the real paths),
	// followed by the board's name when RootPerBoard is set, so that
	// several "boards" served by one test machine do not share files.
	Root         string
	RootPerBoard bool

	// wrap, for tests, wraps each board's Remote.
	wrap func(board string, r Remote) Remote
}

// DefaultOptions returns Options with the defaults filled in.
func DefaultOptions() Options {
	return Options{Cluster: "herd", Servers: 3, Parallel: 4, DialTimeout: 10 * time.Second, NameFrom: NameFromHostname}
}

// Validate reports the first problem with o.
func (o Options) Validate() error {
	switch {
	case len(o.Boards) == 0:
		return errors.New("bootstrap: no boards given")
	case o.StateDir == "":
		return errors.New("bootstrap: no state folder given")
	case o.Auth == nil:
		return errors.New("bootstrap: Auth is nil")
	case o.Parallel < 1:
		return fmt.Errorf("bootstrap: parallel %d: must be >= 1", o.Parallel)
	case o.DialTimeout <= 0:
		return fmt.Errorf("bootstrap: dial timeout %v: must be > 0", o.DialTimeout)
	case o.NameFrom != "" && o.NameFrom != NameFromHostname && o.NameFrom != NameFromAlias:
		return fmt.Errorf("bootstrap: --name-from %q: want hostname or alias", o.NameFrom)
	case o.AddServers && !o.Add:
		return errors.New("bootstrap: --server only applies with --add")
	}
	if err := ValidClusterName(o.Cluster); err != nil {
		return err
	}
	return o.Binaries.Validate()
}

// BoardResult is what happened to one board.
type BoardResult struct {
	Target Target
	// Label names the board in progress lines and errors.
	Label string
	// Name, Server and Address are set once the board was planned.
	Name    string
	Server  bool
	Address string
	// KeyFile is the identity file that logged in ("" for ssh-agent).
	KeyFile string
	// Written lists the paths written on the board (authorized_keys
	// included); Steps the systemctl commands run.
	Written []string
	// Removed lists the paths removed from the board (secrets it must no
	// longer hold).
	Removed []string
	Steps   [][]string
	// CreatedAccount is set when the executor account (ExecUser) was
	// created.
	CreatedAccount bool
	// Err is why the board failed; nil on success.
	Err error
}

// Result is what Run did.
type Result struct {
	// Boards are in argument order.
	Boards []BoardResult
	// State is the cluster's state after the run (boards recorded).
	State *State
	// Created is true when this run generated the cluster's secrets.
	Created bool
}

// Failed returns the boards that failed.
func (r *Result) Failed() []BoardResult {
	var out []BoardResult
	for _, b := range r.Boards {
		if b.Err != nil {
			out = append(out, b)
		}
	}
	return out
}

// board is the working state of one board during Run.
type board struct {
	res    *BoardResult
	role   Role
	remote Remote
	close  func() error
	ip     atomic.Value // string: the address the SSH connection reached
	probe  *Probe
	plan   BoardPlan
	root   string // Options.Root for this board, "" outside tests
}

// Run bootstraps the boards of o. An error is returned for problems with
// the run as a whole (bad arguments, roles that contradict the state, a
// damaged state folder); a board that fails is reported in its
// BoardResult and the others go on. Boards that succeed are recorded in
// the state folder.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	targets, st, err := o.runTargets()
	if err != nil {
		return nil, err
	}
	roles, err := Roles(RolesInput{Targets: targets, State: st, Servers: o.Servers, Add: o.Add, AddServers: o.AddServers})
	if err != nil {
		return nil, err
	}
	boardsBefore := st.Boards
	st, created, err := LoadState(o.StateDir, o.Cluster, true)
	if err != nil {
		return nil, err
	}
	st.Boards = boardsBefore
	if _, err := st.Secrets.PublicKeys(); err != nil {
		return nil, fmt.Errorf("%w: cluster ssh key: %v", ErrState, err)
	}

	res := &Result{Boards: make([]BoardResult, len(targets)), State: st, Created: created}
	boards := make([]*board, len(targets))
	for i, t := range targets {
		res.Boards[i] = BoardResult{Target: t, Label: boardLabel(t)}
		boards[i] = &board{res: &res.Boards[i], role: roles[i]}
	}
	defer func() {
		for _, b := range boards {
			if b.close != nil {
				b.close()
			}
		}
	}()

	// Phase 1: connect and look at every board, and plan from what was found.
	plans := o.probeAndPlan(ctx, boards, targets, roles, st, progress)
	// Phase 2: install.
	o.installAll(ctx, boards, plans, st, progress)

	for i, b := range boards {
		if b.res.Err != nil {
			continue
		}
		st.Record(StateBoard{Name: plans[i].Name, Target: targets[i].Addr(), User: targets[i].User, Arg: targets[i].Arg,
			Address: b.probe.Address, Server: roles[i].Server, BootstrapExpect: roles[i].BootstrapExpect})
	}
	if err := st.Save(); err != nil {
		return res, err
	}
	return res, nil
}

// runTargets resolves the boards of o and reads the state folder (an
// empty state for a new cluster); when adding servers it adds every
// recorded board, whose from= list changes.
func (o Options) runTargets() ([]Target, *State, error) {
	targets := make([]Target, len(o.Boards))
	for i, arg := range o.Boards {
		t, err := o.SSHConfig.Resolve(arg)
		if err != nil {
			return nil, nil, err
		}
		targets[i] = t
	}
	st, _, err := LoadState(o.StateDir, o.Cluster, false)
	if errors.Is(err, ErrNoCluster) && !o.Add {
		st, err = &State{Dir: o.StateDir, Cluster: o.Cluster}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if o.Add && o.AddServers {
		// A new server changes every board's from= list: visit them all.
		for _, b := range st.Boards {
			if slices.ContainsFunc(targets, func(t Target) bool { return t.Addr() == b.Target }) {
				continue
			}
			t, err := o.SSHConfig.Resolve(b.BoardArg())
			if err != nil {
				return nil, nil, err
			}
			targets = append(targets, t)
		}
	}
	return targets, st, nil
}

// probeAndPlan connects to and looks at every board, then plans names,
// roles and configurations from what was found; a board that fails either
// step has its error set.
func (o Options) probeAndPlan(ctx context.Context, boards []*board, targets []Target, roles []Role, st *State, progress func(string, string)) []BoardPlan {
	forEach(ctx, o.Parallel, boards, func(b *board) {
		b.res.Err = o.probe(ctx, b, func(msg string) { progress(b.res.Label, msg) })
		if b.res.Err != nil {
			progress(b.res.Label, "failed: "+b.res.Err.Error())
		}
	})

	probes := make([]*Probe, len(boards))
	for i, b := range boards {
		if ip := o.Advertise[targets[i].Arg]; ip != "" && b.probe != nil {
			b.probe.Address, b.probe.Advertised = ip, true
		}
		probes[i] = b.probe
	}
	plans, perr := Plan(PlanInput{Targets: targets, Roles: roles, Probes: probes, State: st,
		NameFrom: o.NameFrom, Labels: o.Labels, SSHUser: ExecUser})
	for i, b := range boards {
		if b.res.Err == nil && perr[i] != nil {
			b.res.Err = perr[i]
			progress(b.res.Label, "failed: "+perr[i].Error())
		}
		if b.res.Err == nil {
			b.res.Name, b.res.Server, b.res.Address = plans[i].Name, plans[i].Role.Server, probes[i].Address
		}
	}
	return plans
}

// installAll installs the boards that have not failed, in parallel.
func (o Options) installAll(ctx context.Context, boards []*board, plans []BoardPlan, st *State, progress func(string, string)) {
	bins := &binaryCache{files: map[string]binaryEntry{}}
	var live []*board
	for i, b := range boards {
		if b.res.Err == nil {
			b.plan = plans[i]
			live = append(live, b)
		}
	}
	from := ServerAddresses(st, live)
	forEach(ctx, o.Parallel, live, func(b *board) {
		say := func(msg string) { progress(b.res.Label, msg) }
		b.res.Err = o.install(ctx, b, b.plan, st.Secrets, from, bins, say)
		if b.res.Err != nil {
			say("failed: " + b.res.Err.Error())
		}
	})
}

// ServerAddresses are the addresses the cluster SSH key may be used from
// (authorized_keys from=): the recorded servers' and this run's planned
// servers', sorted, without duplicates.
func ServerAddresses(st *State, live []*board) []string {
	var out []string
	for _, b := range st.Servers() {
		out = append(out, b.Address)
	}
	for _, b := range live {
		if b.plan.Role.Server && b.probe != nil {
			out = append(out, b.probe.Address)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// BoardRoot is the test-only prefix of every path on the board labelled
// label (see Options.Root): "" outside tests.
func (o Options) BoardRoot(label string) string {
	if o.Root == "" || !o.RootPerBoard {
		return o.Root
	}
	return path.Join(o.Root, strings.NewReplacer(":", "_", "[", "", "]", "").Replace(label))
}

// boardLabel names a board in progress lines: its argument without the
// user.
func boardLabel(t Target) string {
	if i := strings.LastIndexByte(t.Arg, '@'); i >= 0 {
		return t.Arg[i+1:]
	}
	return t.Arg
}

// forEach runs fn for every board, at most n at a time, and waits.
func forEach(ctx context.Context, n int, boards []*board, fn func(*board)) {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, b := range boards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				b.res.Err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			fn(b)
		}()
	}
	wg.Wait()
}

// connect makes b's Remote: an sshexec.Executor logging in with the
// user's keys and checking the host key against known_hosts. A non-empty
// sftpCommand (SudoSFTPCommand) runs SFTP through sudo and every command
// with SudoArgv.
func (o Options) connect(b *board, sftpCommand string) error {
	t := b.res.Target
	signers, keyFile, err := o.Auth.Signers(t)
	if err != nil {
		return err
	}
	b.res.KeyFile = keyFile
	files := o.KnownHostsFiles
	if len(files) == 0 {
		files = t.KnownHostsFiles
	}
	if len(files) == 0 {
		files = o.DefaultKnownHosts
	}
	exist := ExistingFiles(files)
	if len(exist) == 0 {
		return fmt.Errorf("bootstrap: no known_hosts file to verify %s with (looked for %s): log in once with ssh and check the host key, or give --known-hosts FILE", t.Addr(), strings.Join(files, ", "))
	}
	cfg := sshexec.DefaultConfig()
	cfg.User = t.User
	cfg.Signers = signers
	cfg.KnownHostsFiles = exist
	cfg.DialTimeout = o.DialTimeout
	cfg.Logger = o.Logger
	cfg.SFTPCommand = sftpCommand
	addr := t.Addr()
	cfg.HostKeys = sshexec.HostKeyLookupFunc(func(string) (string, ssh.PublicKey, error) { return addr, nil, nil })
	d := &net.Dialer{}
	cfg.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, a)
		if err == nil {
			if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				b.ip.Store(ta.IP.String())
			}
		}
		return c, err
	}
	e, err := sshexec.New(cfg)
	if err != nil {
		return err
	}
	b.close = e.Close
	b.remote = e
	if o.wrap != nil {
		b.remote = o.wrap(b.res.Label, e)
	}
	if sftpCommand != "" {
		b.remote = sudoRemote{b.remote}
	}
	return nil
}

// elevate checks that the login user of a board, who is not root, may use
// sudo without a password, and reconnects so that every command and file
// goes through sudo -n.
func (o Options) elevate(ctx context.Context, b *board) error {
	node, t := b.res.Label, b.res.Target
	res, err := b.remote.Run(ctx, node, []string{"sudo", "-n", "true"})
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return SudoProbeError(node, t.User, t.Alias, res.ExitStatus, string(res.Stderr))
	}
	found, err := runTolerant(ctx, b.remote, node, append([]string{"stat", "-c", "%n", "--"}, sshgate.SFTPServerPaths...))
	if err != nil {
		return err
	}
	var server string
	have := strings.Fields(string(found))
	for _, p := range sshgate.SFTPServerPaths {
		if slices.Contains(have, p) {
			server = p
			break
		}
	}
	if server == "" {
		return fmt.Errorf("bootstrap: %s: no sftp-server found (looked in %s): install openssh-sftp-server", node, strings.Join(sshgate.SFTPServerPaths, ", "))
	}
	cmd, err := SudoSFTPCommand(server)
	if err != nil {
		return err
	}
	b.close()
	if err := o.connect(b, cmd); err != nil {
		return err
	}
	res, err = b.remote.Run(ctx, node, []string{"id", "-u"})
	if err != nil {
		return err
	}
	if uid := strings.TrimSpace(string(res.Stdout)); res.ExitStatus != 0 || uid != "0" {
		return fmt.Errorf("bootstrap: %s: sudo -n id -u says uid %q (exit status %d), not 0: %s", node, uid, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// probe connects to the board and checks it: root, directly or through
// passwordless sudo; sudo itself (the executor account needs it); systemd,
// whether systemd-resolved runs, the architecture, its SSH host key and
// address.
func (o Options) probe(ctx context.Context, b *board, say func(string)) error {
	say("checking...")
	if err := o.connect(b, ""); err != nil {
		return err
	}
	node := b.res.Label
	res, err := b.remote.Run(ctx, node, []string{"id", "-u"})
	if err != nil {
		return err
	}
	uid := strings.TrimSpace(string(res.Stdout))
	if res.ExitStatus != 0 || uid == "" {
		return fmt.Errorf("bootstrap: %s: id -u: exit status %d: %s", node, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	if uid != "0" {
		if err := o.elevate(ctx, b); err != nil {
			return err
		}
		say(fmt.Sprintf("logged in as %s (uid %s), elevating with sudo -n", b.res.Target.User, uid))
	} else {
		// Root needs no sudo, but the executor account does.
		res, err := b.remote.Run(ctx, node, []string{"sudo", "-n", "true"})
		if err != nil {
			return err
		}
		if res.ExitStatus != 0 {
			return SudoProbeError(node, b.res.Target.User, b.res.Target.Alias, res.ExitStatus, string(res.Stderr))
		}
	}
	r := b.remote
	res, err = r.Run(ctx, node, []string{"uname", "-n", "-m"})
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return fmt.Errorf("bootstrap: %s: uname -n -m: exit status %d: %s", node, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	hostname, machine, err := ParseUname(res.Stdout)
	if err != nil {
		return fmt.Errorf("bootstrap: %s: %w", node, err)
	}
	arch, err := GoArch(machine)
	if err != nil {
		return fmt.Errorf("bootstrap: %s: %w", node, err)
	}
	res, err = r.Run(ctx, node, []string{"systemctl", "--version"})
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return fmt.Errorf("bootstrap: %s: systemd not found (systemctl --version: exit status %d): herd runs its agent and workloads as systemd units", node, res.ExitStatus)
	}
	sdv := api.ParseSystemdVersion(res.Stdout)
	if sdv == "" {
		line, _, _ := strings.Cut(string(res.Stdout), "\n")
		return fmt.Errorf("bootstrap: %s: systemctl --version printed %q, want \"systemd N ...\"", node, strings.TrimSpace(line))
	}
	if n, _ := api.SystemdMajor(sdv); n < MinSystemd {
		return fmt.Errorf("bootstrap: %s: systemd %s is too old: herd.service needs systemd %d or later (StateDirectory=)", node, sdv, MinSystemd)
	}
	res, err = r.Run(ctx, node, []string{"systemctl", "is-active", "--quiet", ResolvedUnit})
	if err != nil {
		return err
	}
	resolved := res.ExitStatus == 0
	b.root = o.BoardRoot(b.res.Label)
	var hostKeyFile string
	var hostKey []byte
	for _, f := range HostKeyFiles {
		data, err := r.ReadFile(ctx, node, b.root+f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey(data); err != nil {
			return fmt.Errorf("bootstrap: %s: %s: %v", node, f, err)
		}
		hostKeyFile, hostKey = f, data
		break
	}
	if hostKeyFile == "" {
		return fmt.Errorf("bootstrap: %s: no SSH host public key found (looked for %s)", node, strings.Join(HostKeyFiles, ", "))
	}
	ip, _ := b.ip.Load().(string)
	if ip == "" {
		return fmt.Errorf("bootstrap: %s: the address of the connection is unknown", node)
	}
	b.probe = &Probe{Hostname: hostname, Machine: machine, Arch: arch, Systemd: sdv, Address: ip,
		HostKeyFile: hostKeyFile, HostKey: hostKey, Resolved: resolved}
	say(fmt.Sprintf("systemd %s, arch %s → %s, address %s, host name %s", sdv, machine, arch, ip, hostname))
	return nil
}

// binaryCache reads each herd binary once.
type binaryCache struct {
	mu    sync.Mutex
	files map[string]binaryEntry
}

type binaryEntry struct {
	file File
	err  error
}

func (c *binaryCache) get(bins Binaries, arch string) (File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := "arch:" + arch
	if e, ok := c.files[key]; ok {
		return e.file, e.err
	}
	var e binaryEntry
	p, err := bins.PathFor(arch, BinaryArch)
	if err != nil {
		e.err = err
	} else if data, err := os.ReadFile(p); err != nil {
		e.err = fmt.Errorf("bootstrap: herd binary: %w", err)
	} else {
		e.file = File{Path: BinaryPath, Content: data, Mode: 0o755, Sum: sha256.Sum256(data)}
	}
	c.files[key] = e
	return e.file, e.err
}

// install brings one board up to date: files, stale secrets,
// authorized_keys, systemd, the resolver's drop-in.
func (o Options) install(ctx context.Context, b *board, p BoardPlan, sec Secrets, from []string, bins *binaryCache, say func(string)) error {
	bin, err := bins.get(o.Binaries, b.probe.Arch)
	if err != nil {
		return err
	}
	want, err := BoardFiles(p, sec, bin)
	if err != nil {
		return err
	}
	stale := StalePaths(p.Role)
	// The resolver drop-in is looked at with the others (one round trip).
	have, modeMap, err := b.observeFiles(ctx, append(slices.Clip(want), ResolvedDropIn()), stale)
	if err != nil {
		return err
	}
	unitChanged, filesChanged, err := b.writeFiles(ctx, FilesToWrite(want, have), say)
	if err != nil {
		return err
	}
	if err := b.removeStale(ctx, stale, modeMap, say); err != nil {
		return err
	}
	if err := o.authorizeClusterKey(ctx, b, sec, from, modeMap, say); err != nil {
		return err
	}
	steps, err := b.runServiceSteps(ctx, unitChanged, filesChanged, say)
	if err != nil {
		return err
	}
	// After the agent (which answers herd. names) is up to date.
	rsteps, err := b.wireResolver(ctx, have, say)
	if err != nil {
		return err
	}
	steps = append(steps, rsteps...)
	role := "worker"
	if p.Role.Server {
		role = "server"
	}
	if len(b.res.Written) == 0 && len(b.res.Removed) == 0 && len(steps) == 0 && !b.res.CreatedAccount {
		say(fmt.Sprintf("ok: %s %s, nothing changed", role, p.Name))
	} else {
		say(fmt.Sprintf("ok: %s %s, %d files written, %d systemctl steps", role, p.Name, len(b.res.Written), len(steps)))
	}
	return nil
}

// observeFiles reads what the board holds of the wanted files, the
// authorized_keys files and the stale secrets, in two round trips: the
// wanted files' sums and modes (have), and every path's mode (modes,
// keyed by path without the board's root).
func (b *board) observeFiles(ctx context.Context, want []File, stale []string) (have map[string]Observed, modes map[string]os.FileMode, err error) {
	node := b.res.Label
	paths := make([]string, 0, len(want)+len(stale)+1)
	for _, f := range want {
		paths = append(paths, b.root+f.Path)
	}
	paths = append(paths, b.root+ExecAuthKeysPath, b.root+RootAuthKeysPath)
	for _, s := range stale {
		paths = append(paths, b.root+s)
	}
	sums, err := runTolerant(ctx, b.remote, node, append([]string{"sha256sum"}, paths[:len(want)]...))
	if err != nil {
		return nil, nil, err
	}
	modeOut, err := runTolerant(ctx, b.remote, node, append([]string{"stat", "-c", "%a %n"}, paths...))
	if err != nil {
		return nil, nil, err
	}
	sumMap, modeMap := ParseSums(sums, b.root), ParseModes(modeOut, b.root)
	have = map[string]Observed{}
	for pth, s := range sumMap {
		have[pth] = Observed{Sum: s, Mode: modeMap[pth]}
	}
	return have, modeMap, nil
}

// writeFiles writes the changed files, the sudoers drop-in through
// putSudoers, and says whether the unit file or any file changed.
func (b *board) writeFiles(ctx context.Context, changes []Change, say func(string)) (unitChanged, filesChanged bool, err error) {
	node := b.res.Label
	for _, c := range changes {
		switch c.File.Path {
		case BinaryPath:
			say(fmt.Sprintf("uploading herd (%s, %s)", humanSize(len(c.File.Content)), c.Reason))
		default:
			say(fmt.Sprintf("writing %s (%s)", c.File.Path, c.Reason))
		}
		if c.File.Path == SudoersPath {
			err = putSudoers(ctx, b.remote, node, b.root, c.File)
		} else {
			err = b.remote.PutFile(ctx, node, b.root+c.File.Path, c.File.Content, c.File.Mode, sshexec.PutFileOptions{MkdirAll: true})
		}
		if err != nil {
			return false, false, err
		}
		b.res.Written = append(b.res.Written, c.File.Path)
		filesChanged = true
		if c.File.Path == UnitPath {
			unitChanged = true
		}
	}
	if len(changes) == 0 {
		say("herd binary and configuration up to date")
	}
	return unitChanged, filesChanged, nil
}

// removeStale removes the secrets this board must not hold (a worker never
// keeps a server's keys; nobody keeps the old single cluster key) among
// those present in modes.
func (b *board) removeStale(ctx context.Context, stale []string, modes map[string]os.FileMode, say func(string)) error {
	node := b.res.Label
	var remove []string
	for _, s := range stale {
		if _, ok := modes[s]; ok {
			remove = append(remove, b.root+s)
			b.res.Removed = append(b.res.Removed, s)
		}
	}
	if len(remove) == 0 {
		return nil
	}
	say("removing " + strings.Join(b.res.Removed, ", "))
	res, err := b.remote.Run(ctx, node, append([]string{"rm", "-f", "--"}, remove...))
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return fmt.Errorf("bootstrap: %s: rm: %s", node, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// authorizeClusterKey makes sure of the executor account, and of the
// cluster SSH keys authorised for it, restricted: from the servers only,
// through herd ssh-gate; and takes the cluster key out of root's
// authorized_keys, where older bootstraps put it.
func (o Options) authorizeClusterKey(ctx context.Context, b *board, sec Secrets, from []string, modes map[string]os.FileMode, say func(string)) error {
	node := b.res.Label
	r := b.remote
	created, err := ensureAccount(ctx, r, node)
	if err != nil {
		return err
	}
	if created {
		say("created the executor account " + ExecUser)
		b.res.CreatedAccount = true
	}
	managed, err := sec.PublicKeys()
	if err != nil {
		return fmt.Errorf("%w: cluster ssh key: %v", ErrState, err)
	}
	var lines []string
	if len(from) == 0 {
		say("warning: no server address known yet: the cluster SSH key is not authorised here (bootstrap the servers, then run again)")
	}
	for _, pl := range strings.Split(string(sec.SSHPublicKey), "\n") {
		if strings.TrimSpace(pl) == "" || len(from) == 0 {
			continue
		}
		l, err := AuthorizedKeyLine(pl, from)
		if err != nil {
			return err
		}
		lines = append(lines, l)
	}
	// The executor's file is root's, 0644 (sshd reads it as the account),
	// in root-owned folders: the account cannot change its own keys.
	wrote, err := setAuthorizedKeys(ctx, r, node, b.root, ExecAuthKeysPath, 0o644, modes, sshKeyComment(o.Cluster), managed, lines, true)
	if err != nil {
		return err
	}
	if wrote {
		say("authorizing the cluster SSH key for " + ExecUser + " (restricted to " + strings.Join(from, ",") + ") in " + ExecAuthKeysPath)
		b.res.Written = append(b.res.Written, ExecAuthKeysPath)
	}
	// Older bootstraps authorised the cluster key for root: no more.
	wrote, err = setAuthorizedKeys(ctx, r, node, b.root, RootAuthKeysPath, 0o600, modes, sshKeyComment(o.Cluster), managed, nil, false)
	if err != nil {
		return err
	}
	if wrote {
		say("removing the cluster SSH key from " + RootAuthKeysPath)
		b.res.Written = append(b.res.Written, RootAuthKeysPath)
	}
	return nil
}

// runServiceSteps asks systemd whether herd.service is enabled and active
// and runs only the systemctl steps needed, returning them.
func (b *board) runServiceSteps(ctx context.Context, unitChanged, filesChanged bool, say func(string)) ([][]string, error) {
	node := b.res.Label
	r := b.remote
	var state ServiceState
	for _, q := range []struct {
		verb string
		dst  *bool
	}{{"is-enabled", &state.Enabled}, {"is-active", &state.Active}} {
		res, err := r.Run(ctx, node, []string{"systemctl", q.verb, "--quiet", UnitName})
		if err != nil {
			return nil, err
		}
		*q.dst = res.ExitStatus == 0
	}
	steps := ServiceSteps(unitChanged, filesChanged, state)
	for _, s := range steps {
		say(strings.Join(s, " "))
		res, err := r.Run(ctx, node, s)
		if err != nil {
			return nil, err
		}
		if res.ExitStatus != 0 {
			return nil, fmt.Errorf("bootstrap: %s: %s: exit status %d: %s", node, strings.Join(s, " "), res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
		}
		b.res.Steps = append(b.res.Steps, s)
	}
	return steps, nil
}

// putSudoers writes the sudoers drop-in f: to SudoersStage first, checked
// with `visudo -cf`, then renamed over SudoersPath, so sudo never reads a
// drop-in that does not parse (a broken one disables sudo altogether).
func putSudoers(ctx context.Context, r Remote, node, root string, f File) error {
	stage := root + SudoersStage
	if err := r.PutFile(ctx, node, stage, f.Content, f.Mode, sshexec.PutFileOptions{MkdirAll: true}); err != nil {
		return err
	}
	for _, argv := range [][]string{{"visudo", "-c", "-q", "-f", stage}, {"mv", "-f", "--", stage, root + SudoersPath}} {
		res, err := r.Run(ctx, node, argv)
		if err != nil {
			return err
		}
		if res.ExitStatus != 0 {
			r.Run(ctx, node, []string{"rm", "-f", "--", stage})
			return fmt.Errorf("bootstrap: %s: %s: exit status %d: %s %s", node, strings.Join(argv, " "), res.ExitStatus,
				strings.TrimSpace(string(res.Stdout)), strings.TrimSpace(string(res.Stderr)))
		}
	}
	return nil
}

// ensureAccount creates the executor account unless it exists (and is
// herd's: CheckAccount); created says whether it did.
func ensureAccount(ctx context.Context, r Remote, node string) (created bool, err error) {
	res, err := r.Run(ctx, node, []string{"getent", "passwd", ExecUser})
	if err != nil {
		return false, err
	}
	switch res.ExitStatus {
	case 0:
		return false, CheckAccount(res.Stdout)
	case 2: // no such user
	default:
		return false, fmt.Errorf("bootstrap: %s: getent passwd %s: exit status %d: %s", node, ExecUser, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	res, err = r.Run(ctx, node, AccountArgv())
	if err != nil {
		return false, err
	}
	if res.ExitStatus != 0 {
		return false, fmt.Errorf("bootstrap: %s: useradd %s: exit status %d: %s", node, ExecUser, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	return true, nil
}

// setAuthorizedKeys makes the authorized_keys file p hold exactly lines
// among the cluster's keys (SetAuthorizedKeys), keeping its mode, or mode
// for a new file; a missing file is only created when create is set and
// there are lines (with its folder, 0755 for the executor's home). It
// reports whether it wrote.
func setAuthorizedKeys(ctx context.Context, r Remote, node, root, p string, mode os.FileMode, modes map[string]os.FileMode,
	comment string, managed []ssh.PublicKey, lines []string, create bool) (bool, error) {
	cur, err := r.ReadFile(ctx, node, root+p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	missing := err != nil
	if missing && (!create || len(lines) == 0) {
		return false, nil
	}
	out, changed := SetAuthorizedKeys(cur, comment, managed, lines)
	if !changed {
		return false, nil
	}
	if m, ok := modes[p]; ok && !missing {
		mode = m
	}
	if missing {
		dir := path.Dir(root + p)
		res, err := r.Run(ctx, node, []string{"mkdir", "-p", "-m", "755", "--", dir})
		if err != nil {
			return false, err
		}
		if res.ExitStatus != 0 {
			return false, fmt.Errorf("bootstrap: %s: mkdir %s: %s", node, dir, strings.TrimSpace(string(res.Stderr)))
		}
	}
	if err := r.PutFile(ctx, node, root+p, out, mode); err != nil {
		return false, err
	}
	return true, nil
}

// humanSize formats a byte count: "512 B", "64.0 kB", "15.9 MB".
func humanSize(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// runTolerant runs a command that reports missing files with exit status
// 1 (sha256sum, stat) and returns its stdout; other statuses are errors.
func runTolerant(ctx context.Context, r Remote, node string, argv []string) ([]byte, error) {
	res, err := r.Run(ctx, node, argv)
	if err != nil {
		return nil, err
	}
	switch res.ExitStatus {
	case 0, 1:
		return res.Stdout, nil
	case 127:
		return nil, fmt.Errorf("bootstrap: %s: %s is not installed on the board", node, argv[0])
	}
	return nil, fmt.Errorf("bootstrap: %s: %s: exit status %d: %s", node, argv[0], res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
}
