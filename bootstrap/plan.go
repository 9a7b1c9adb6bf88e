package bootstrap

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
	"golang.org/x/crypto/ssh"
)

// ErrPlan: the boards given cannot form (or join) the cluster as asked.
var ErrPlan = errors.New("bootstrap: plan")

// Name sources for --name-from.
const (
	NameFromHostname = "hostname"
	NameFromAlias    = "alias"
)

// Probe is what bootstrap learned about a board by looking at it.
type Probe struct {
	// Hostname is `uname -n`.
	Hostname string
	// Machine is `uname -m`; Arch its release architecture.
	Machine, Arch string
	// Systemd is systemd's version ("252").
	Systemd string
	// Address is the IP address the board was reached at (an IP even when
	// the board was given by host name, mDNS name or ssh_config alias),
	// or the one --advertise gave: what the other boards join and what
	// the cluster SSH key is allowed from.
	Address string
	// Advertised is true when Address came from --advertise: the board's
	// agent then advertises it. Otherwise the agent picks its address on
	// the route to its join peers ("auto"), which is Address when the
	// boards reach each other the way herdctl reached them.
	Advertised bool
	// HostKeyFile is the board's sshd public host key file, HostKey its
	// content.
	HostKeyFile string
	HostKey     []byte
	// Resolved is true when systemd-resolved runs on the board
	// (`systemctl is-active systemd-resolved.service`): bootstrap then
	// wires herd. names into it (PlanResolver).
	Resolved bool
}

// Role is a board's part in the cluster.
type Role struct {
	// Server makes the board a Raft server.
	Server bool
	// BootstrapExpect is set on the founding servers.
	BootstrapExpect int
}

// RolesInput is what Roles decides from.
type RolesInput struct {
	// Targets are the boards in argument order.
	Targets []Target
	// State is what earlier runs recorded (never nil).
	State *State
	// Servers is how many of the first boards are servers (--servers).
	Servers int
	// Add joins the boards to the existing cluster (--add); AddServers
	// makes new ones servers (--server).
	Add, AddServers bool
}

// Roles decides each target's role before anything is contacted. Without
// Add the first Servers targets are the founding servers, which must agree
// with what earlier runs recorded; with Add, boards already recorded keep
// their role and new ones become workers (servers with AddServers).
func Roles(in RolesInput) ([]Role, error) {
	if len(in.Targets) == 0 {
		return nil, fmt.Errorf("%w: no boards given", ErrPlan)
	}
	seen := map[string]string{}
	for _, t := range in.Targets {
		if prev, ok := seen[t.Addr()]; ok {
			return nil, fmt.Errorf("%w: %s and %s are the same board (%s)", ErrPlan, prev, t.Arg, t.Addr())
		}
		seen[t.Addr()] = t.Arg
	}
	roles := make([]Role, len(in.Targets))
	if in.Add {
		if len(in.State.Servers()) == 0 {
			return nil, fmt.Errorf("%w: --add: cluster %q has no servers recorded in %s (bootstrap it first, without --add)", ErrPlan, in.State.Cluster, in.State.Dir)
		}
		for i, t := range in.Targets {
			if b, ok := in.State.Board(t.Addr()); ok {
				roles[i] = Role{Server: b.Server, BootstrapExpect: b.BootstrapExpect}
			} else {
				roles[i] = Role{Server: in.AddServers}
			}
		}
		return roles, nil
	}
	if in.Servers < 1 || in.Servers > 7 {
		return nil, fmt.Errorf("%w: --servers %d: want 1-7 (3 or 5 are usual)", ErrPlan, in.Servers)
	}
	n := min(in.Servers, len(in.Targets))
	for i := range roles {
		if i < n {
			roles[i] = Role{Server: true, BootstrapExpect: n}
		}
	}
	var recorded []string
	for _, b := range in.State.Boards {
		if b.BootstrapExpect > 0 {
			recorded = append(recorded, b.Target)
		}
	}
	for i, t := range in.Targets {
		b, ok := in.State.Board(t.Addr())
		if ok && (b.Server != roles[i].Server || b.BootstrapExpect != roles[i].BootstrapExpect) {
			return nil, fmt.Errorf("%w: %s was bootstrapped as %s, this run would make it %s: give the boards in the same order as before, or use --add to add boards",
				ErrPlan, t.Arg, roleWord(Role{b.Server, b.BootstrapExpect}), roleWord(roles[i]))
		}
	}
	for _, r := range recorded {
		if !slices.ContainsFunc(in.Targets[:n], func(t Target) bool { return t.Addr() == r }) {
			return nil, fmt.Errorf("%w: cluster %q was founded with server %s, which is not among the first %d boards of this run: give the same servers first, or use --add to add boards",
				ErrPlan, in.State.Cluster, r, n)
		}
	}
	return roles, nil
}

func roleWord(r Role) string {
	switch {
	case r.BootstrapExpect > 0:
		return fmt.Sprintf("a founding server (bootstrap_expect %d)", r.BootstrapExpect)
	case r.Server:
		return "a server"
	}
	return "a worker"
}

// PlanInput is what Plan decides from.
type PlanInput struct {
	Targets []Target
	Roles   []Role
	// Probes has one entry per target; nil where probing failed.
	Probes []*Probe
	State  *State
	// NameFrom is NameFromHostname (default) or NameFromAlias.
	NameFrom string
	// Labels are given to every board.
	Labels map[string]string
	// SSHUser is the user the leader logs in as (ExecUser).
	SSHUser string
}

// BoardPlan is what one board gets.
type BoardPlan struct {
	Target Target
	Role   Role
	Name   string
	Agent  AgentConfig
}

// Plan computes each probed board's agent configuration. It returns one
// entry per target (zero where the probe failed) and one error per target
// for boards that cannot be configured (a bad or duplicate name). The join
// list of every board is the founding servers' gossip addresses, without
// the board itself: from this run's probes (the IP each was reached at, or
// its --advertise IP), else from the state; always IP addresses, so a
// board needs no name resolution to join. Each agent advertises "auto" (its
// address on the route to those peers) unless its probe was Advertised,
// and its SSH address follows its advertised IP with the SSH port
// herdctl used ("auto:PORT"), so the leader's executor reaches sshd on the
// address the boards see.
func Plan(in PlanInput) ([]BoardPlan, []error) {
	plans := make([]BoardPlan, len(in.Targets))
	names, errs := planNames(in)
	seeds := foundingSeeds(in, names)
	for i, t := range in.Targets {
		if in.Probes[i] == nil || names[i] == "" {
			continue
		}
		join := []string{}
		for _, s := range seeds {
			if s.name != names[i] {
				join = append(join, net.JoinHostPort(s.addr, strconv.Itoa(GossipPort)))
			}
		}
		plans[i] = BoardPlan{Target: t, Role: in.Roles[i], Name: names[i], Agent: planAgent(in, i, names[i], join)}
	}
	return plans, errs
}

// planNames names each probed board, with an error where the name is bad,
// changes a recorded board's name, or is another board's (this run's or a
// recorded one); such a board's name is empty.
func planNames(in PlanInput) ([]string, []error) {
	errs := make([]error, len(in.Targets))
	names := make([]string, len(in.Targets))
	for i, t := range in.Targets {
		p := in.Probes[i]
		if p == nil {
			continue
		}
		name, err := BoardName(in.NameFrom, t, p.Hostname)
		if err != nil {
			errs[i] = err
			continue
		}
		if b, ok := in.State.Board(t.Addr()); ok && b.Name != name {
			errs[i] = fmt.Errorf("%w: %s was bootstrapped as %q and would now be named %q (--name-from %s): a board keeps its name", ErrPlan, t.Arg, b.Name, name, orDefault(in.NameFrom, NameFromHostname))
			continue
		}
		names[i] = name
	}
	// Names must be unique among this run's boards and the recorded ones.
	for i, n := range names {
		if n == "" {
			continue
		}
		for j := range i {
			if names[j] == n {
				errs[i] = fmt.Errorf("%w: %s and %s would both be named %q (use --name-from alias, or set distinct host names)", ErrPlan, in.Targets[j].Arg, in.Targets[i].Arg, n)
				names[i] = ""
			}
		}
		if names[i] == "" {
			continue
		}
		for _, b := range in.State.Boards {
			if b.Name == n && b.Target != in.Targets[i].Addr() {
				errs[i] = fmt.Errorf("%w: %s would be named %q, the name of the already bootstrapped %s", ErrPlan, in.Targets[i].Arg, n, b.Target)
				names[i] = ""
			}
		}
	}
	return names, errs
}

// seed is a founding server's name and gossip address.
type seed struct{ name, addr string }

// foundingSeeds are the founding servers (BootstrapExpect set): this run's,
// at their probed address, then the recorded others.
func foundingSeeds(in PlanInput, names []string) []seed {
	var seeds []seed
	seedSeen := map[string]bool{}
	for i, r := range in.Roles {
		if r.BootstrapExpect > 0 && in.Probes[i] != nil && names[i] != "" {
			seeds = append(seeds, seed{names[i], in.Probes[i].Address})
			seedSeen[in.Targets[i].Addr()] = true
		}
	}
	for _, b := range in.State.Boards {
		if b.BootstrapExpect > 0 && !seedSeen[b.Target] {
			seeds = append(seeds, seed{b.Name, b.Address})
		}
	}
	return seeds
}

// planAgent is the agent configuration of target i, named name, joining
// join.
func planAgent(in PlanInput, i int, name string, join []string) AgentConfig {
	t, p := in.Targets[i], in.Probes[i]
	r := in.Roles[i]
	gossipAdv, raftAdv, sshAddr := AdvertiseAuto, AdvertiseAuto, AdvertiseAuto+":"+strconv.Itoa(t.Port)
	if p.Advertised {
		gossipAdv = net.JoinHostPort(p.Address, strconv.Itoa(GossipPort))
		raftAdv = net.JoinHostPort(p.Address, strconv.Itoa(RaftPort))
		sshAddr = net.JoinHostPort(p.Address, strconv.Itoa(t.Port))
	}
	ac := AgentConfig{
		Name:            name,
		DataDir:         DataDir,
		Server:          r.Server,
		BootstrapExpect: r.BootstrapExpect,
		Join:            join,
		GossipKeyFile:   GossipKeyPath,
		GossipBind:      net.JoinHostPort("0.0.0.0", strconv.Itoa(GossipPort)),
		GossipAdvertise: gossipAdv,
		RaftBind:        net.JoinHostPort("0.0.0.0", strconv.Itoa(RaftPort)),
		RaftAdvertise:   raftAdv,
		APIListen:       []string{APIAddr, "unix://" + APISocket},
		SSHAddress:      sshAddr,
		SSHHostKeyFile:  p.HostKeyFile,
		SSHUser:         orDefault(in.SSHUser, "root"),
		Labels:          in.Labels,
		// Every board serves GET /metrics on its advertised address to
		// the metrics token (workers have no user API).
		MetricsListen:    MetricsListen,
		MetricsTokenFile: MetricsTokenPath,
	}
	if r.Server {
		ac.ServerKeyFile = ServerKeyPath
		ac.APITokenFile = APITokenPath
		ac.SSHKeyFile = ClusterSSHKey
	}
	return ac
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// BoardName derives a board's agent name: from its host name (`uname -n`,
// first label, lower case) or from the alias it was given as (an IP
// address becomes its digits joined by '-'). The result must be a DNS label.
func BoardName(from string, t Target, hostname string) (string, error) {
	var name, raw, src string
	switch from {
	case "", NameFromHostname:
		raw, src = hostname, "host name"
		name = api.NameFromHost(raw)
	case NameFromAlias:
		raw, src = t.Alias, "alias"
		if ip := net.ParseIP(raw); ip != nil {
			// "::1" becomes "1", not "--1".
			name = strings.Trim(strings.NewReplacer(".", "-", ":", "-").Replace(ip.String()), "-")
		} else {
			name = api.NameFromHost(raw)
		}
	default:
		return "", fmt.Errorf("%w: --name-from %q: want hostname or alias", ErrPlan, from)
	}
	if api.ValidateName(name) != nil {
		return "", fmt.Errorf("%w: %s: %s %q does not make a valid node name (1-63 of a-z, 0-9, '-'); set the board's host name or use --name-from", ErrPlan, t.Arg, src, raw)
	}
	return name, nil
}

// ParseLabels parses "k=v" pairs (--label) and checks them as the agent
// does.
func ParseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("bootstrap: --label %q: want key=value", p)
		}
		if err := api.ValidateLabelKey(k); err != nil {
			return nil, fmt.Errorf("bootstrap: --label %q: %w", p, err)
		}
		if err := api.ValidateLabelValue(v); err != nil {
			return nil, fmt.Errorf("bootstrap: --label %q: %w", p, err)
		}
		if old, dup := out[k]; dup && old != v {
			return nil, fmt.Errorf("bootstrap: --label %s given twice (%q and %q)", k, old, v)
		}
		out[k] = v
	}
	return out, nil
}

// AdvertiseAuto is the agent configuration value that lets an agent pick
// its advertised address (agent.AdvertiseAuto).
const AdvertiseAuto = "auto"

// ParseAdvertise parses --advertise BOARD=IP values: BOARD is a board
// argument exactly as given in boards, IP an IPv4 or IPv6 address (not
// unspecified, multicast or with a zone). The result maps BOARD to IP in
// canonical form; nil for no values.
func ParseAdvertise(pairs, boards []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, p := range pairs {
		b, v, ok := strings.Cut(p, "=")
		if !ok || b == "" || v == "" {
			return nil, fmt.Errorf("bootstrap: --advertise %q: want BOARD=IP", p)
		}
		if !slices.Contains(boards, b) {
			return nil, fmt.Errorf("bootstrap: --advertise %q: %q is not one of the boards given (%s)", p, b, strings.Join(boards, " "))
		}
		ip := net.ParseIP(v)
		switch {
		case ip == nil:
			return nil, fmt.Errorf("bootstrap: --advertise %q: %q is not an IP address (names are not advertised: give the address the other boards reach it at)", p, v)
		case ip.IsUnspecified(), ip.IsMulticast():
			return nil, fmt.Errorf("bootstrap: --advertise %q: %s cannot be a board's address", p, v)
		}
		if old, dup := out[b]; dup && old != ip.String() {
			return nil, fmt.Errorf("bootstrap: --advertise %s given twice (%s and %s)", b, old, ip)
		}
		out[b] = ip.String()
	}
	return out, nil
}

// File is a file bootstrap places on a board.
type File struct {
	// Path is where the file lives on the board.
	Path    string
	Content []byte
	Mode    os.FileMode
	// Sum is the sha256 of Content.
	Sum [32]byte
}

// NewFile returns a File with its Sum.
func NewFile(path string, content []byte, mode os.FileMode) File {
	return File{Path: path, Content: content, Mode: mode, Sum: sha256.Sum256(content)}
}

// BoardFiles lists what a board gets, in the order to write them: the
// binary first, the unit last (so a unit never starts without its files).
// Every board gets the gossip key and the executor account's sudoers
// drop-in (SudoersPath, checked with visudo before it is moved into
// place) and the metrics token (MetricsTokenPath); only servers get the server key, the cluster SSH private key and
// the API token. Besides these files a board gets the executor account
// (ExecUser, AccountArgv) and its authorized_keys (ExecAuthKeysPath,
// SetAuthorizedKeys).
func BoardFiles(p BoardPlan, sec Secrets, binary File) ([]File, error) {
	conf, err := RenderAgentConfig(p.Agent)
	if err != nil {
		return nil, err
	}
	files := []File{binary, NewFile(GossipKeyPath, sec.GossipKey, 0o600)}
	if len(sec.MetricsToken) > 0 {
		files = append(files, NewFile(MetricsTokenPath, sec.MetricsToken, 0o600))
	}
	if p.Role.Server {
		files = append(files,
			NewFile(ServerKeyPath, sec.ServerKey, 0o600),
			NewFile(ClusterSSHKey, sec.SSHPrivateKey, 0o600),
			NewFile(APITokenPath, sec.APIToken, 0o600))
	}
	return append(files,
		NewFile(SudoersPath, RenderSudoers(), 0o440),
		NewFile(AgentConfigPath, conf, 0o644),
		NewFile(UnitPath, RenderUnit(), 0o644)), nil
}

// StalePaths are the files a board of role r must not keep: the secrets
// of servers on a worker, and files of older bootstraps (the one
// cluster.key of both purposes, the cluster SSH public key) everywhere.
func StalePaths(r Role) []string {
	out := []string{ClusterKeyPath, ClusterSSHPub}
	if !r.Server {
		out = append(out, ServerKeyPath, ClusterSSHKey, APITokenPath)
	}
	return out
}

// Observed is what a board has at a path.
type Observed struct {
	Sum  [32]byte
	Mode os.FileMode
}

// Change is a file to (re)write and why.
type Change struct {
	File   File
	Reason string
}

// FilesToWrite compares the wanted files with what the board has (by path;
// a missing path is a missing file) and returns those to write.
func FilesToWrite(want []File, have map[string]Observed) []Change {
	var out []Change
	for _, f := range want {
		o, ok := have[f.Path]
		switch {
		case !ok:
			out = append(out, Change{f, "missing"})
		case o.Sum != f.Sum:
			out = append(out, Change{f, "content differs"})
		case o.Mode != f.Mode:
			out = append(out, Change{f, fmt.Sprintf("mode %04o, want %04o", o.Mode, f.Mode)})
		}
	}
	return out
}

// AuthorizedKeyLine is the authorized_keys entry of a cluster SSH public
// key: restricted (no forwarding, pty or ~/.ssh/rc), usable only from the
// servers' addresses, and forced through herd ssh-gate, which admits only
// the executor's wrapper and sftp. pubLine is the key in authorized_keys
// format ("ssh-ed25519 AAAA... comment"); from is not empty.
func AuthorizedKeyLine(pubLine string, from []string) (string, error) {
	k, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine))
	if err != nil {
		return "", fmt.Errorf("bootstrap: cluster ssh public key: %w", err)
	}
	if len(from) == 0 {
		return "", fmt.Errorf("%w: no server addresses for the cluster SSH key's from=", ErrPlan)
	}
	for _, a := range from {
		if net.ParseIP(a) == nil {
			return "", fmt.Errorf("%w: server address %q is not an IP address", ErrPlan, a)
		}
	}
	line := fmt.Sprintf(`restrict,from="%s",command="%s" %s`, strings.Join(from, ","), GateCommand,
		strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	if comment != "" {
		line += " " + comment
	}
	return line, nil
}

// GateCommand is the forced command of the cluster SSH key (see
// units/sshgate).
const GateCommand = BinaryPath + " ssh-gate"

// SetAuthorizedKeys returns authorized_keys content in which the cluster
// SSH keys are authorised exactly by lines: every existing line that
// authorises one of managed (whatever its options) or carries the cluster
// key comment is dropped, and lines are appended. Every other line (the
// user's own keys, comments, lines that do not parse) is kept as it is.
// changed is false when the result equals existing.
func SetAuthorizedKeys(existing []byte, comment string, managed []ssh.PublicKey, lines []string) ([]byte, bool) {
	var out []byte
	for _, raw := range bytes.SplitAfter(existing, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		l := bytes.TrimSpace(raw)
		if len(l) > 0 && l[0] != '#' {
			if k, c, _, _, err := ssh.ParseAuthorizedKey(l); err == nil {
				if c == comment || slices.ContainsFunc(managed, func(m ssh.PublicKey) bool { return bytes.Equal(m.Marshal(), k.Marshal()) }) {
					continue
				}
			}
		}
		out = append(out, raw...)
		if out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
	}
	for _, l := range lines {
		out = append(out, strings.TrimRight(l, "\n")...)
		out = append(out, '\n')
	}
	return out, !bytes.Equal(out, existing)
}

// ServiceState is what systemd says about herd.service.
type ServiceState struct {
	Enabled, Active bool
}

// ServiceSteps returns the systemctl commands that bring herd.service up
// to date: daemon-reload when the unit file changed, enable when it is not
// enabled, restart when a file changed and it runs, start when it does not
// run. Nothing when all is in place.
func ServiceSteps(unitChanged, filesChanged bool, st ServiceState) [][]string {
	var steps [][]string
	if unitChanged {
		steps = append(steps, []string{"systemctl", "daemon-reload"})
	}
	if !st.Enabled {
		steps = append(steps, []string{"systemctl", "enable", UnitName})
	}
	switch {
	case !st.Active:
		steps = append(steps, []string{"systemctl", "start", UnitName})
	case filesChanged:
		steps = append(steps, []string{"systemctl", "restart", UnitName})
	}
	return steps
}

// ParseUname parses `uname -n -m` ("b1 x86_64").
func ParseUname(out []byte) (hostname, machine string, err error) {
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", "", fmt.Errorf("uname -n -m printed %q, want \"HOSTNAME MACHINE\"", strings.TrimSpace(string(out)))
	}
	return f[0], f[1], nil
}

// ParseSums parses `sha256sum FILE...` output into sums by file name,
// with prefix removed from the names. Escaped names (with a leading '\')
// are skipped: bootstrap's paths never need escaping.
func ParseSums(out []byte, prefix string) map[string][32]byte {
	m := map[string][32]byte{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || line[0] == '\\' {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			sum, name, ok = strings.Cut(line, " *")
		}
		b, err := hex.DecodeString(sum)
		if !ok || err != nil || len(b) != 32 {
			continue
		}
		name, ok = strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		m[name] = [32]byte(b)
	}
	return m
}

// ParseModes parses `stat -c '%a %n' FILE...` output into permission bits
// by file name, with prefix removed from the names.
func ParseModes(out []byte, prefix string) map[string]os.FileMode {
	m := map[string]os.FileMode{}
	for _, line := range strings.Split(string(out), "\n") {
		mode, name, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(mode, 8, 32)
		if err != nil {
			continue
		}
		name, ok = strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		m[name] = os.FileMode(n) & os.ModePerm
	}
	return m
}
