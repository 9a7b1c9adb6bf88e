//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
)

// ErrCommand: a command of the harness (herdctl, ssh, scripts/lab) failed.
var ErrCommand = errors.New("e2e: command failed")

// DefaultSSHConfig is the ssh_config scripts/lab writes for its boards.
const DefaultSSHConfig = "/var/lib/herd-lab/ssh_config"

// apiPort is where a board's agent API listens on its loopback.
const apiPort = 7948

// Fleet drives a lab fleet through the real binaries: scripts/lab for the
// boards' power and network, bin/herdctl for the cluster, ssh for what runs
// on a board.
//
// A Fleet is safe for concurrent use once configured; its exported fields
// must not change after the first call.
type Fleet struct {
	// Root is the repository root (bin/, scripts/, examples/).
	Root string
	// Dir holds the herdctl config (config.toml) and the cluster state
	// written by bootstrap (state/).
	Dir string
	// SSHConfig is the lab's ssh_config.
	SSHConfig string
	// Cluster is the cluster (and herdctl context) name.
	Cluster string
	// Boards are the lab's boards, b1..bN; the first Servers of them are
	// Raft servers, the rest workers.
	Boards  []string
	Servers int
	// LoginUser is who bootstrap logs in as (LoginUser@bN): "pi", the
	// boards' user with passwordless sudo, as on Raspberry Pi OS. Empty
	// means the ssh_config's (root).
	LoginUser string
	// Logf reports what the harness does; nil is silent.
	Logf func(format string, args ...any)
	// LabScript is scripts/lab; empty means Root/scripts/lab. See
	// SnapshotLab.
	LabScript string
	// BootstrapOutput is what Start's herdctl bootstrap printed.
	BootstrapOutput string

	mu       sync.Mutex
	forwards map[string]*forward
}

// NewFleet returns a Fleet of boards b1..bN, the first servers of them Raft
// servers, working in dir.
func NewFleet(root, dir string, boards, servers int, logf func(string, ...any)) *Fleet {
	f := &Fleet{Root: root, Dir: dir, SSHConfig: DefaultSSHConfig, Cluster: "e2e", Servers: servers, LoginUser: "pi", Logf: logf}
	for i := 1; i <= boards; i++ {
		f.Boards = append(f.Boards, fmt.Sprintf("b%d", i))
	}
	return f
}

// ServerBoards are the boards that run Raft servers.
func (f *Fleet) ServerBoards() []string { return f.Boards[:f.Servers] }

// IsServer reports whether board runs a Raft server.
func (f *Fleet) IsServer(board string) bool { return slices.Contains(f.ServerBoards(), board) }

// ConfigPath is the herdctl config the fleet's context is written to.
func (f *Fleet) ConfigPath() string { return filepath.Join(f.Dir, "config.toml") }

// BoardIP is a board's address in the lab (b1 = 10.77.0.11, …).
func BoardIP(board string) string {
	n, err := strconv.Atoi(strings.TrimPrefix(board, "b"))
	if err != nil || !strings.HasPrefix(board, "b") {
		return ""
	}
	return fmt.Sprintf("10.77.0.%d", 10+n)
}

func (f *Fleet) logf(format string, args ...any) {
	if f.Logf != nil {
		f.Logf(format, args...)
	}
}

// run runs name with args, stdin as its input, and returns its standard
// output; a failure carries the exit status and standard error.
func (f *Fleet) run(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = f.Root
	cmd.Env = cleanEnv()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("%w: %s %s: %v: %s", ErrCommand, filepath.Base(name),
			strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String(), 6)))
	}
	return stdout.Bytes(), nil
}

// cleanEnv is the environment without what would redirect herdctl.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERD_ADDR=") || strings.HasPrefix(kv, "HERD_TOKEN=") || strings.HasPrefix(kv, "HERDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Lab runs scripts/lab with args.
func (f *Fleet) Lab(ctx context.Context, args ...string) (string, error) {
	script := f.LabScript
	if script == "" {
		script = filepath.Join(f.Root, "scripts", "lab")
	}
	out, err := f.run(ctx, "", script, args...)
	return string(out), err
}

// SnapshotLab copies scripts/lab and scripts/lab.d from root into dir and
// returns the copy of scripts/lab: bash reads a script as it runs, so a run
// that lasts minutes uses a copy nobody edits meanwhile.
func SnapshotLab(root, dir string) (string, error) {
	src := filepath.Join(root, "scripts")
	dst := filepath.Join(dir, "lab-scripts")
	if err := os.MkdirAll(filepath.Join(dst, "lab.d"), 0o755); err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(src, "lab.d", "*"))
	if err != nil {
		return "", err
	}
	files = append(files, filepath.Join(src, "lab"))
	for _, file := range files {
		rel, err := filepath.Rel(src, file)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		fi, err := os.Stat(file)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm()); err != nil {
			return "", err
		}
	}
	return filepath.Join(dst, "lab"), nil
}

// Start brings up a fresh lab (whatever lab existed is taken down first),
// bootstraps herd onto every board and waits until every node is Ready.
func (f *Fleet) Start(ctx context.Context) error {
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	_, _ = f.Lab(ctx, "down")
	start := time.Now()
	if _, err := f.Lab(ctx, "up", strconv.Itoa(len(f.Boards))); err != nil {
		return err
	}
	f.logf("lab up: %d boards in %.1fs", len(f.Boards), time.Since(start).Seconds())
	start = time.Now()
	args := []string{"--config", f.ConfigPath(), "bootstrap", "-F", f.SSHConfig,
		"--state-dir", filepath.Join(f.Dir, "state"), "--cluster", f.Cluster,
		"--herd-binary", filepath.Join(f.Root, "bin", "herd"), "--servers", strconv.Itoa(f.Servers)}
	for _, b := range f.Boards {
		if f.LoginUser != "" {
			b = f.LoginUser + "@" + b
		}
		args = append(args, b)
	}
	out, err := f.run(ctx, "", f.herdctlPath(), args...)
	if err != nil {
		return fmt.Errorf("bootstrap: %w\n%s", err, out)
	}
	f.BootstrapOutput = string(out)
	f.logf("bootstrap: %.1fs", time.Since(start).Seconds())
	return Poll(ctx, 250*time.Millisecond, "every node Ready after bootstrap", func(ctx context.Context) (bool, string) {
		nodes, err := f.Nodes(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		return AllReady(nodes, f.Boards)
	})
}

// Stop closes the port forwards and takes the lab down (a fresh context:
// it runs when the caller's has ended).
func (f *Fleet) Stop() error {
	f.DropForwards()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := f.Lab(ctx, "down")
	return err
}

// Kill pulls the power on board.
func (f *Fleet) Kill(ctx context.Context, board string) error {
	f.DropForward(board)
	_, err := f.Lab(ctx, "kill", board)
	return err
}

// Boot powers board back on and waits for its sshd.
func (f *Fleet) Boot(ctx context.Context, board string) error {
	f.DropForward(board)
	_, err := f.Lab(ctx, "boot", board)
	return err
}

// Partition cuts board off alone (it keeps running).
func (f *Fleet) Partition(ctx context.Context, board string) error {
	f.DropForward(board)
	_, err := f.Lab(ctx, "partition", board)
	return err
}

// Heal puts every board back on the lab bridge.
func (f *Fleet) Heal(ctx context.Context) error {
	_, err := f.Lab(ctx, "heal")
	return err
}

// SSH runs a shell command line on board as root, stdin as its input.
func (f *Fleet) SSH(ctx context.Context, board, stdin, cmdline string) (string, error) {
	out, err := f.run(ctx, stdin, "ssh", "-F", f.SSHConfig, "-o", "ConnectTimeout=3", "-o", "BatchMode=yes", board, cmdline)
	return string(out), err
}

// SSHInside runs a command line on board from inside its own network
// namespace (ssh to its own address over the namespace's local route): the
// board's console, which works while the board is partitioned away.
func (f *Fleet) SSHInside(ctx context.Context, board, stdin, cmdline string) (string, error) {
	out, err := f.run(ctx, stdin, "ip", "netns", "exec", "herd-"+board,
		"ssh", "-F", f.SSHConfig, "-o", "ConnectTimeout=3", "-o", "BatchMode=yes", board, cmdline)
	return string(out), err
}

// TokenFile is the cluster's API token, as bootstrap wrote it into the
// state folder.
func (f *Fleet) TokenFile() string { return filepath.Join(f.Dir, "state", "api.token") }

func (f *Fleet) herdctlPath() string { return filepath.Join(f.Root, "bin", "herdctl") }

// Herdctl runs bin/herdctl with the fleet's config and args. With via ""
// it goes the way a user's does: through the context, an SSH tunnel to one
// of the servers in turn. With via a server board, it goes through a port
// forward to that board's API opened once (no SSH handshake per call).
func (f *Fleet) Herdctl(ctx context.Context, via, stdin string, args ...string) ([]byte, error) {
	full := []string{"--config", f.ConfigPath()}
	if via != "" {
		addr, err := f.forwardAddr(ctx, via)
		if err != nil {
			return nil, err
		}
		// A context's token is only sent to its own addresses: name the
		// cluster's token file for the forwarded address.
		full = append(full, "--addr", "http://"+addr, "--token-file", f.TokenFile())
	}
	full = append(full, args...)
	return f.run(ctx, stdin, f.herdctlPath(), full...)
}

// list runs `herdctl get KIND -o json` and decodes the items.
func list[T any](ctx context.Context, f *Fleet, via string, kind api.Kind) ([]T, error) {
	out, err := f.Herdctl(ctx, via, "", "--timeout", "5s", "get", string(kind), "-o", "json")
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []T `json:"items"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("e2e: get %s -o json: %w", kind, err)
	}
	return l.Items, nil
}

// Nodes lists the nodes.
func (f *Fleet) Nodes(ctx context.Context, via string) ([]api.Node, error) {
	return list[api.Node](ctx, f, via, api.KindNode)
}

// Pods lists the pods.
func (f *Fleet) Pods(ctx context.Context, via string) ([]api.Pod, error) {
	return list[api.Pod](ctx, f, via, api.KindPod)
}

// Services lists the services.
func (f *Fleet) Services(ctx context.Context, via string) ([]api.Service, error) {
	return list[api.Service](ctx, f, via, api.KindService)
}

// Service reads one service.
func (f *Fleet) Service(ctx context.Context, via, name string) (api.Service, error) {
	var s api.Service
	out, err := f.Herdctl(ctx, via, "", "--timeout", "5s", "get", "services", name, "-o", "json")
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("e2e: get services %s -o json: %w", name, err)
	}
	return s, nil
}

// Leader is the leader `herdctl status` names ("" when there is none).
func (f *Fleet) Leader(ctx context.Context, via string) (string, error) {
	out, err := f.Herdctl(ctx, via, "", "--timeout", "8s", "status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "Leader:"); ok {
			l := strings.TrimSpace(rest)
			if strings.HasPrefix(l, "<none>") {
				return "", nil
			}
			return l, nil
		}
	}
	return "", fmt.Errorf("e2e: herdctl status: no Leader line in %q", out)
}

// Snapshot is what the cluster reported at one moment.
type Snapshot struct {
	Nodes    []api.Node
	Pods     []api.Pod
	Services []api.Service
	// At is when the last of the three answers arrived.
	At time.Time
}

// Snapshot lists nodes, pods and services at once (three herdctl calls in
// parallel).
func (f *Fleet) Snapshot(ctx context.Context, via string) (Snapshot, error) {
	var s Snapshot
	var wg sync.WaitGroup
	var errN, errP, errS error
	wg.Add(3)
	go func() { defer wg.Done(); s.Nodes, errN = f.Nodes(ctx, via) }()
	go func() { defer wg.Done(); s.Pods, errP = f.Pods(ctx, via) }()
	go func() { defer wg.Done(); s.Services, errS = f.Services(ctx, via) }()
	wg.Wait()
	s.At = time.Now()
	return s, errors.Join(errN, errP, errS)
}

// Node is the named node, or nil.
func (s Snapshot) Node(name string) *api.Node {
	for i := range s.Nodes {
		if s.Nodes[i].Metadata.Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// Service is the named service, or nil.
func (s Snapshot) Service(name string) *api.Service {
	for i := range s.Services {
		if s.Services[i].Metadata.Name == name {
			return &s.Services[i]
		}
	}
	return nil
}

// OwnedPods are the pods of the deployment named owner.
func (s Snapshot) OwnedPods(owner string) []api.Pod {
	var out []api.Pod
	for _, p := range s.Pods {
		if p.Spec.Owner.Kind == api.KindDeployment && p.Spec.Owner.Name == owner {
			out = append(out, p)
		}
	}
	return out
}

// AllReady reports whether every one of boards is a Ready node.
func AllReady(nodes []api.Node, boards []string) (bool, string) {
	phase := map[string]api.NodePhase{}
	for _, n := range nodes {
		phase[n.Metadata.Name] = n.Status.Phase
	}
	var bad []string
	for _, b := range boards {
		if phase[b] != api.NodeReady {
			bad = append(bad, fmt.Sprintf("%s=%s", b, orNone(string(phase[b]))))
		}
	}
	if len(bad) > 0 {
		return false, "not Ready: " + strings.Join(bad, " ")
	}
	return true, ""
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// BoardUnits is what systemd on one board has of some herd units.
type BoardUnits struct {
	// Active are the units whose ActiveState is active.
	Active []string
	// Loaded are the units systemd knows (any state).
	Loaded []string
	// Files are the unit files in /etc/systemd/system.
	Files []string
}

var unitPattern = regexp.MustCompile(`^herd-[a-z0-9*-]+$`)

// Units lists the units matching pattern (e.g. "herd-web-*") on board; with
// inside, from the board's own namespace (see SSHInside).
func (f *Fleet) Units(ctx context.Context, board, pattern string, inside bool) (BoardUnits, error) {
	if !unitPattern.MatchString(pattern) {
		return BoardUnits{}, fmt.Errorf("e2e: unit pattern %q: want herd-[a-z0-9*-]+", pattern)
	}
	script := fmt.Sprintf("systemctl list-units --plain --no-legend --all '%[1]s.service'; echo @@files; "+
		"cd /etc/systemd/system && for u in %[1]s.service; do [ -e \"$u\" ] && echo \"$u\"; done; true", pattern)
	run := f.SSH
	if inside {
		run = f.SSHInside
	}
	out, err := run(ctx, board, "", script)
	if err != nil {
		return BoardUnits{}, err
	}
	var u BoardUnits
	units, files, _ := strings.Cut(out, "@@files\n")
	for _, line := range strings.Split(units, "\n") {
		fs := strings.Fields(line)
		if len(fs) < 4 || !strings.HasSuffix(fs[0], ".service") {
			continue
		}
		u.Loaded = append(u.Loaded, fs[0])
		if fs[2] == "active" {
			u.Active = append(u.Active, fs[0])
		}
	}
	for _, line := range strings.Split(files, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			u.Files = append(u.Files, line)
		}
	}
	return u, nil
}

// FleetUnits lists the units matching pattern on each of boards at once.
func (f *Fleet) FleetUnits(ctx context.Context, boards []string, pattern string) (map[string]BoardUnits, error) {
	out := make(map[string]BoardUnits, len(boards))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, b := range boards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := f.Units(ctx, b, pattern, false)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", b, err))
				return
			}
			out[b] = u
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// CountActive counts the active units over boards and reports any unit
// active on more than one board.
func CountActive(units map[string]BoardUnits) (int, []string) {
	where := map[string][]string{}
	n := 0
	for b, u := range units {
		n += len(u.Active)
		for _, a := range u.Active {
			where[a] = append(where[a], b)
		}
	}
	var dup []string
	for unit, bs := range where {
		if len(bs) > 1 {
			slices.Sort(bs)
			dup = append(dup, fmt.Sprintf("%s on %s", unit, strings.Join(bs, ",")))
		}
	}
	slices.Sort(dup)
	return n, dup
}

// forward is one `ssh -N -L` to a board's API.
type forward struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

func (fw *forward) alive() bool {
	select {
	case <-fw.done:
		return false
	default:
		return true
	}
}

func (fw *forward) close() {
	if fw.cmd.Process != nil && fw.alive() {
		_ = fw.cmd.Process.Kill()
	}
	<-fw.done
}

// DropForward closes the port forward to board, if any (before its power
// or network goes: a forward over a dead connection would stall callers).
func (f *Fleet) DropForward(board string) {
	f.mu.Lock()
	fw := f.forwards[board]
	delete(f.forwards, board)
	f.mu.Unlock()
	if fw != nil {
		fw.close()
	}
}

// DropForwards closes every port forward.
func (f *Fleet) DropForwards() {
	f.mu.Lock()
	fws := f.forwards
	f.forwards = nil
	f.mu.Unlock()
	for _, fw := range fws {
		fw.close()
	}
}

// forwardAddr is a local address forwarded to board's API, opening the
// forward if needed.
func (f *Fleet) forwardAddr(ctx context.Context, board string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forwards == nil {
		f.forwards = map[string]*forward{}
	}
	if fw := f.forwards[board]; fw != nil {
		if fw.alive() {
			return fw.addr, nil
		}
		delete(f.forwards, board)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("ssh", "-F", f.SSHConfig, "-N", "-o", "ExitOnForwardFailure=yes",
		"-o", "ConnectTimeout=3", "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=3",
		"-o", "BatchMode=yes", "-L", fmt.Sprintf("%s:127.0.0.1:%d", addr, apiPort), board)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	fw := &forward{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(fw.done) }()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = Poll(ctx, 20*time.Millisecond, "port forward to "+board, func(ctx context.Context) (bool, string) {
		if !fw.alive() {
			return true, ""
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	if err == nil && !fw.alive() {
		err = fmt.Errorf("%w: ssh -L to %s exited: %s", ErrCommand, board, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		fw.close()
		return "", err
	}
	f.forwards[board] = fw
	return addr, nil
}
