package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/bootstrap"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/units/sshexec"
)

// herdctl reaches an agent's API through SSH when its context has an ssh
// table: it logs in to one of the context's hosts with the user's own keys
// (checking the host key against known_hosts) and opens a
// direct-streamlocal@openssh.com channel to the API socket, or, when the
// board refuses that, a direct-tcpip channel to the loopback API. A host
// that cannot be reached within tunnelHostTimeout is skipped for the next.

const (
	// tunnelHostTimeout bounds connecting to one host (TCP, SSH handshake,
	// opening the channel).
	tunnelHostTimeout = 3 * time.Second
	// tunnelKeepalive is the keepalive period of tunnel connections; three
	// missed replies close the connection (and the streams on it).
	tunnelKeepalive = 5 * time.Second
)

// tunnelHost is one board the tunnel may go through.
type tunnelHost struct {
	target  bootstrap.Target
	signers []ssh.Signer
	known   *bootstrap.KnownHosts
	// socket, when set, replaces the tunnel's API socket path on this
	// host (tests: one machine plays several boards).
	socket string
}

// tunnel dials the agent API through SSH connections to its hosts, trying
// them in turn from the one that last worked. One SSH connection per host
// is kept and shared by every stream. Safe for concurrent use.
type tunnel struct {
	hosts       []tunnelHost
	socket      string // API unix socket on the board
	tcpAddr     string // API TCP address on the board
	hostTimeout time.Duration
	keepalive   time.Duration
	// warn reports host key problems of hosts that were skipped.
	warn   func(string)
	closer io.Closer // the ssh-agent connection, if any

	mu    sync.Mutex
	conns map[int]*ssh.Client
	cur   int
}

func newTunnel(hosts []tunnelHost, closer io.Closer, warn func(string)) *tunnel {
	if warn == nil {
		warn = func(string) {}
	}
	return &tunnel{hosts: hosts, socket: bootstrap.APISocket, tcpAddr: bootstrap.APIAddr,
		hostTimeout: tunnelHostTimeout, keepalive: tunnelKeepalive, warn: warn, closer: closer,
		conns: map[int]*ssh.Client{}}
}

// dialBudget bounds one dial through the tunnel: every host in turn.
func (t *tunnel) dialBudget() time.Duration {
	return time.Duration(len(t.hosts))*t.hostTimeout + time.Second
}

// Close closes the SSH connections.
func (t *tunnel) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, c := range t.conns {
		c.Close()
		delete(t.conns, i)
	}
	if t.closer != nil {
		t.closer.Close()
	}
	return nil
}

// tunnelStagger is how long DialContext waits on one host before it also
// tries the next: a board that is down costs this, not tunnelHostTimeout.
const tunnelStagger = 300 * time.Millisecond

// DialContext opens a stream to the agent API of the first host that
// answers, starting from the one that last worked and starting the next
// one whenever the hosts tried so far failed or have not answered within
// tunnelStagger; network and address are ignored. Failure is a *net.OpError
// with Op "dial", so the client knows the request was never sent.
func (t *tunnel) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	t.mu.Lock()
	start := t.cur
	t.mu.Unlock()
	type result struct {
		i    int
		conn net.Conn
		err  error
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(t.hosts)
	results := make(chan result, n)
	launched, pending := 0, 0
	launch := func() {
		i := (start + launched) % n
		launched++
		pending++
		go func() {
			conn, err := t.dialHost(dctx, i)
			results <- result{i, conn, err}
		}()
	}
	launch()
	stagger := time.NewTimer(tunnelStagger)
	defer stagger.Stop()
	var errs []error
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				t.mu.Lock()
				t.cur = r.i
				t.mu.Unlock()
				go func(left int) { // close streams that lost the race
					for ; left > 0; left-- {
						if l := <-results; l.conn != nil {
							l.conn.Close()
						}
					}
				}(pending)
				return r.conn, nil
			}
			errs = append(errs, r.err)
			if errors.Is(r.err, errHostKey) {
				t.warn(r.err.Error())
			}
			if launched < n {
				launch()
				stagger.Reset(tunnelStagger)
			}
		case <-stagger.C:
			if launched < n {
				launch()
				stagger.Reset(tunnelStagger)
			}
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: "ssh", Err: ctx.Err()}
		}
	}
	if ctx.Err() != nil {
		return nil, &net.OpError{Op: "dial", Net: "ssh", Err: ctx.Err()}
	}
	return nil, &net.OpError{Op: "dial", Net: "ssh", Err: errors.Join(errs...)}
}

var errHostKey = errors.New("host key not verified")

// dialHost opens an API stream through host i, reconnecting once when the
// kept connection turns out to be dead.
func (t *tunnel) dialHost(ctx context.Context, i int) (net.Conn, error) {
	h := t.hosts[i]
	for attempt := 0; attempt < 2; attempt++ {
		c, fresh, err := t.client(ctx, i)
		if err != nil {
			return nil, err
		}
		conn, err := t.openAPI(ctx, c, h.socket)
		if err == nil {
			return conn, nil
		}
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) || fresh {
			return nil, fmt.Errorf("ssh %s (%s): %w", h.target.Arg, h.target.Addr(), err)
		}
		t.drop(i, c) // a stale connection: try once more with a new one
	}
	return nil, fmt.Errorf("ssh %s (%s): connection lost", h.target.Arg, h.target.Addr())
}

// openAPI opens a stream to the API socket (socket, else the tunnel's),
// else to the TCP API.
func (t *tunnel) openAPI(ctx context.Context, c *ssh.Client, socket string) (net.Conn, error) {
	if socket == "" {
		socket = t.socket
	}
	ctx, cancel := context.WithTimeout(ctx, t.hostTimeout)
	defer cancel()
	conn, err := c.DialContext(ctx, "unix", socket)
	if err == nil {
		return conn, nil
	}
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) {
		return nil, err
	}
	conn, err2 := c.DialContext(ctx, "tcp", t.tcpAddr)
	if err2 == nil {
		return conn, nil
	}
	return nil, fmt.Errorf("agent API: %s: %v; %s: %w", socket, err, t.tcpAddr, err2)
}

// client returns the kept connection to host i, dialling one if needed;
// fresh says it was just made.
func (t *tunnel) client(ctx context.Context, i int) (c *ssh.Client, fresh bool, err error) {
	t.mu.Lock()
	c = t.conns[i]
	t.mu.Unlock()
	if c != nil {
		return c, false, nil
	}
	h := t.hosts[i]
	addr := h.target.Addr()
	cc := &ssh.ClientConfig{User: h.target.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(h.signers...)}, Timeout: t.hostTimeout}
	if err := h.known.ClientConfig(h.target.Arg, addr, cc); err != nil {
		return nil, false, fmt.Errorf("%w: %w", errHostKey, err)
	}
	dctx, cancel := context.WithTimeout(ctx, t.hostTimeout)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("ssh %s (%s): %w", h.target.Arg, addr, err)
	}
	c, err = sshexec.ClientConn(dctx, nc, addr, cc)
	var refused *sshexec.HostKeyRefusedError
	switch {
	case errors.As(err, &refused):
		return nil, false, fmt.Errorf("%w: %w", errHostKey, refused.Err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, false, fmt.Errorf("ssh %s (%s): handshake timed out", h.target.Arg, addr)
	case err != nil:
		return nil, false, fmt.Errorf("ssh %s (%s): %w", h.target.Arg, addr, err)
	}
	t.mu.Lock()
	if old := t.conns[i]; old != nil { // another dial won
		t.mu.Unlock()
		c.Close()
		return old, false, nil
	}
	t.conns[i] = c
	t.mu.Unlock()
	go t.keepAlive(i, c)
	return c, true, nil
}

// drop forgets host i's connection c and closes it.
func (t *tunnel) drop(i int, c *ssh.Client) {
	t.mu.Lock()
	if t.conns[i] == c {
		delete(t.conns, i)
	}
	t.mu.Unlock()
	c.Close()
}

// keepAlive watches c with sshexec.KeepAlive (three periods without a
// reply close it) and drops it once it is closed.
func (t *tunnel) keepAlive(i int, c *ssh.Client) {
	sshexec.KeepAlive(c, t.keepalive, 3, nil)
	t.drop(i, c)
}

// tunnelEnv is what resolving a context's ssh table needs from outside.
type tunnelEnv struct {
	getenv func(string) string
	// home is the user's home folder ("" to use $HOME).
	home string
}

// resolveTunnel turns a context's ssh table into tunnel hosts: each host
// ([user@]host[:port] or an ~/.ssh/config alias) is resolved like ssh
// does; the table's user, key and known_hosts win over ~/.ssh/config.
func resolveTunnel(sc sshConfig, env tunnelEnv) ([]tunnelHost, io.Closer, error) {
	if len(sc.Hosts) == 0 {
		return nil, nil, errors.New("config: the context's ssh table has no hosts")
	}
	home := env.home
	if home == "" {
		home = env.getenv("HOME")
	}
	local := env.getenv("USER")
	if local == "" {
		if u, err := user.Current(); err == nil {
			local = u.Username
		}
	}
	var optional []string
	if home != "" {
		optional = append(optional, filepath.Join(home, ".ssh", "config"))
	}
	optional = append(optional, "/etc/ssh/ssh_config")
	cfg, err := bootstrap.LoadSSHConfig(nil, optional, home, local)
	if err != nil {
		return nil, nil, err
	}
	var keys []string
	if sc.Key != "" {
		k, err := bootstrap.ExpandHome(sc.Key, home)
		if err != nil {
			return nil, nil, fmt.Errorf("config: ssh key: %w", err)
		}
		keys = []string{k}
	}
	var knownFiles []string
	if sc.KnownHosts != "" {
		k, err := bootstrap.ExpandHome(sc.KnownHosts, home)
		if err != nil {
			return nil, nil, fmt.Errorf("config: ssh known_hosts: %w", err)
		}
		knownFiles = []string{k}
	}
	auth := bootstrap.NewAuth(keys, home, env.getenv("SSH_AUTH_SOCK"))
	known := map[string]*bootstrap.KnownHosts{}
	var hosts []tunnelHost
	for _, h := range sc.Hosts {
		explicitUser, _, _, err := bootstrap.SplitTarget(h)
		if err != nil {
			auth.Close()
			return nil, nil, fmt.Errorf("config: ssh hosts: %w", err)
		}
		tg, err := cfg.Resolve(h)
		if err != nil {
			auth.Close()
			return nil, nil, fmt.Errorf("config: ssh hosts: %w", err)
		}
		if explicitUser == "" && sc.User != "" {
			tg.User = sc.User
		}
		signers, _, err := auth.Signers(tg)
		if err != nil {
			auth.Close()
			return nil, nil, err
		}
		files := knownFiles
		if len(files) == 0 {
			files = tg.KnownHostsFiles
		}
		if len(files) == 0 {
			files = defaultKnownHosts(home)
		}
		id := strings.Join(files, "\x00")
		kh, ok := known[id]
		if !ok {
			if kh, err = bootstrap.LoadKnownHosts(files); err != nil {
				auth.Close()
				return nil, nil, err
			}
			known[id] = kh
		}
		hosts = append(hosts, tunnelHost{target: tg, signers: signers, known: kh})
	}
	return hosts, auth, nil
}

// defaultKnownHosts are the known_hosts files ssh reads by default.
func defaultKnownHosts(home string) []string {
	var out []string
	if home != "" {
		out = append(out, filepath.Join(home, ".ssh", "known_hosts"))
	}
	return append(out, "/etc/ssh/ssh_known_hosts")
}

// newTunnelClient returns an API client that goes through the SSH tunnel
// described by t.SSH.
func newTunnelClient(t target, timeout time.Duration) (apiClient, error) {
	hosts, closer, err := resolveTunnel(*t.SSH, tunnelEnv{getenv: os.Getenv})
	if err != nil {
		return nil, err
	}
	tun := newTunnel(hosts, closer, func(msg string) { fmt.Fprintf(os.Stderr, "warning: %s\n", msg) })
	return tun.apiClient(t.Token, timeout)
}

// apiClient returns a client whose requests go through tun.
func (t *tunnel) apiClient(token string, timeout time.Duration) (*client.Client, error) {
	// The client's only address is the board's loopback API, so that the
	// Host header names what the agent listens on (the tunnel picks the
	// board; over the socket the Host is not checked).
	return client.New([]string{"http://" + t.tcpAddr}, client.Options{
		Token: token, Timeout: timeout, DialContext: t.DialContext, DialTimeout: t.dialBudget(),
	})
}

// useSSH drops t.SSH when the addresses were chosen by --addr or
// $HERD_ADDR rather than by the context: a context's ssh table applies to
// the context only. An explicitly chosen --context with an ssh table wins
// over $HERD_ADDR, as its addrs would.
func (a *app) useSSH(t *target) {
	if t.SSH == nil {
		return
	}
	if len(splitList(a.addrs...)) > 0 || (a.contextName == "" && len(splitList(a.getenv(envAddr))) > 0) {
		t.SSH = nil
	}
}
