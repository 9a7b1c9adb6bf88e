package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Executor runs commands and moves files on boards over SSH. It keeps one
// persistent connection per node, dialled on first use and shared by every
// operation (each command is a session multiplexed on it; file operations
// share one SFTP client per connection). A broken connection is replaced by
// the next operation; repeated dial failures back off exponentially.
//
// All methods are safe for concurrent use. Operations take ctx first;
// cancelling it abandons the operation (closing its session) and returns
// ctx.Err(). Whether a cancelled operation took effect on the board is
// unknown, as with any remote call.
type Executor struct {
	cfg    Config
	log    *slog.Logger
	jitter func() float64
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	known  ssh.HostKeyCallback // nil without KnownHostsFiles

	mu     sync.Mutex
	nodes  map[string]*node
	closed bool

	dials, dialFailures, keepaliveTimeouts atomic.Uint64
	sessions, peakSessions                 atomic.Int64
}

// Stats are counters of an Executor since New.
type Stats struct {
	// Dials counts successful connections (handshake done).
	Dials uint64
	// DialFailures counts failed dials, host key refusals included.
	DialFailures uint64
	// KeepaliveTimeouts counts connections closed because the peer stopped
	// answering keepalives.
	KeepaliveTimeouts uint64
	// OpenSessions is the number of exec session slots (see
	// MaxSessionsPerNode) held now, over all nodes; PeakSessions the most
	// ever held at once.
	OpenSessions, PeakSessions int64
}

// node is the per-board state. dialLock (a one-slot channel, so waiting on
// it can honour ctx) serialises dialling; mu guards the fields below it.
type node struct {
	// tcpSince is when the TCP connect in progress began (UnixNano), 0
	// when none is: see Silence.
	tcpSince atomic.Int64
	// unanswered is the last TCP connect if it ended without an answer
	// from the board (timed out, cancelled, unreachable); zero after one
	// that was answered. See Silence.
	unanswered atomic.Value // unansweredDial
	// lastUse is when an operation last asked for the connection
	// (UnixNano on Config.Clock): see CloseIdle.
	lastUse  atomic.Int64
	name     string
	dialLock chan struct{}
	sem      chan struct{}

	mu        sync.Mutex
	conn      *conn
	forgotten bool
	failures  int
	retryAt   time.Time
	lastErr   error
}

// conn is one SSH connection with its SFTP client.
type conn struct {
	node   string
	addr   string
	client *ssh.Client
	dead   chan struct{}
	once   sync.Once
	// kaSent is when the keepalive in flight was sent (UnixNano), 0 when
	// none is: see Silence. Unused when acks is set.
	kaSent atomic.Int64
	// acks, when set, times the board's silence from TCP's
	// acknowledgements (Config.KeepaliveReplies).
	acks *ackClock

	sftpMu sync.Mutex
	sftp   *sftp.Client
	// sftpCommand is Config.SFTPCommand.
	sftpCommand string

	// bs is the board session (Config.BoardSession), started on first
	// use; bsNone: the board has none, use the wrapper.
	bsMu   sync.Mutex
	bs     *boardsession.Client
	bsNone bool
}

// New validates cfg and returns an Executor. It dials nothing.
func New(cfg Config) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg, log: cfg.Logger, jitter: cfg.Jitter, dialer: cfg.DialContext, nodes: map[string]*node{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.cfg.Clock == nil {
		e.cfg.Clock = clock.RealClock()
	}
	if e.jitter == nil {
		e.jitter = rand.Float64
	}
	if e.dialer == nil {
		e.dialer = (&net.Dialer{}).DialContext
	}
	if len(cfg.KnownHostsFiles) > 0 {
		cb, err := knownhosts.New(cfg.KnownHostsFiles...)
		if err != nil {
			return nil, fmt.Errorf("%w: KnownHostsFiles: %v", ErrInvalidConfig, err)
		}
		e.known = cb
	}
	return e, nil
}

// Close closes every connection. Operations in flight fail; later ones
// return ErrClosed.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	nodes := e.nodes
	e.nodes = nil
	e.mu.Unlock()
	for _, n := range nodes {
		n.forget()
	}
	return nil
}

// Forget closes the connection to node, if any, and drops its state
// (including its reconnect backoff). Call it when a board is declared dead
// or leaves, or when its pinned host key changes; the next operation on it
// dials afresh. Operations in flight on the old connection fail
// (ErrConnectionLost or a transport error).
func (e *Executor) Forget(node string) {
	e.mu.Lock()
	n := e.nodes[node]
	delete(e.nodes, node)
	e.mu.Unlock()
	if n != nil {
		n.forget()
	}
}

// CloseIdle closes every connection that no operation has asked for in
// the last idle (on Config.Clock) and that has no command or board-session
// request in flight, and returns the nodes it closed them for, sorted. The
// nodes keep their state: the next operation on one dials afresh. A
// follower server calls it so that connections it warmed for a leadership
// it did not win (or kept from a term that ended) do not hold an sshd and
// keepalives on every board for good. Safe for concurrent use; an
// operation that starts while its connection is being closed fails like
// one on a lost connection (ErrConnectionLost or a transport error).
func (e *Executor) CloseIdle(idle time.Duration) []string {
	cutoff := e.cfg.Clock.Now().Add(-idle).UnixNano()
	e.mu.Lock()
	var idleNodes []*node
	for _, n := range e.nodes {
		if n.lastUse.Load() <= cutoff && len(n.sem) == 0 {
			idleNodes = append(idleNodes, n)
		}
	}
	e.mu.Unlock()
	var closed []string
	for _, n := range idleNodes {
		n.mu.Lock()
		c := n.conn
		if c != nil && c.alive() && n.lastUse.Load() <= cutoff && len(n.sem) == 0 {
			n.conn = nil
		} else {
			c = nil
		}
		n.mu.Unlock()
		if c != nil {
			c.close()
			closed = append(closed, n.name)
			e.log.Debug("ssh connection idle; closed", "node", n.name, "idle", idle)
		}
	}
	slices.Sort(closed)
	return closed
}

// Silence returns how long node has left the executor without an answer:
// on a live connection, how long the keepalive in flight has gone
// unanswered (or, timed by TCP's acknowledgements, how long data sent to
// the board has gone unacknowledged while the board acknowledged
// nothing); with none, how long the TCP connect in progress has waited
// (the SSH handshake after it does not count), or, for silenceAfterDial
// after a connect that got no answer was given up, how long ago that
// connect began. 0 when nothing is
// outstanding. A healthy peer answers within a round trip, so a silence
// well beyond that (keepalives go every KeepaliveInterval) says the peer
// stopped answering long before the connection is closed for it
// (KeepaliveMax intervals) or the dial times out. Cheap; safe for
// concurrent use.
func (e *Executor) Silence(node string) time.Duration {
	e.mu.Lock()
	n := e.nodes[node]
	e.mu.Unlock()
	if n == nil {
		return 0
	}
	c := n.live()
	if c == nil {
		if since := n.tcpSince.Load(); since != 0 {
			return max(0, time.Since(time.Unix(0, since)))
		}
		if u, _ := n.unanswered.Load().(unansweredDial); !u.began.IsZero() && time.Since(u.ended) < silenceAfterDial {
			return time.Since(u.began)
		}
		return 0
	}
	if c.acks != nil {
		return c.acks.silence(time.Now())
	}
	sent := c.kaSent.Load()
	if sent == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(0, sent)))
}

// Stats returns the executor's counters.
func (e *Executor) Stats() Stats {
	return Stats{
		Dials:             e.dials.Load(),
		DialFailures:      e.dialFailures.Load(),
		KeepaliveTimeouts: e.keepaliveTimeouts.Load(),
		OpenSessions:      e.sessions.Load(),
		PeakSessions:      e.peakSessions.Load(),
	}
}

func (n *node) forget() {
	n.mu.Lock()
	n.forgotten = true
	c := n.conn
	n.conn = nil
	n.mu.Unlock()
	if c != nil {
		c.close()
	}
}

func (e *Executor) node(name string) (*node, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty node name", ErrInvalidArgument)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	n := e.nodes[name]
	if n == nil {
		n = &node{name: name, dialLock: make(chan struct{}, 1), sem: make(chan struct{}, e.cfg.MaxSessionsPerNode)}
		e.nodes[name] = n
	}
	return n, nil
}

// connect returns n's live connection, dialling one if needed.
func (e *Executor) connect(ctx context.Context, n *node) (*conn, error) {
	n.lastUse.Store(e.cfg.Clock.Now().UnixNano())
	if c := n.live(); c != nil {
		return c, nil
	}
	select {
	case n.dialLock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-n.dialLock }()

	n.mu.Lock()
	if c := n.conn; c != nil && c.alive() {
		n.mu.Unlock()
		return c, nil
	}
	forgotten, failures, retryAt, lastErr := n.forgotten, n.failures, n.retryAt, n.lastErr
	n.mu.Unlock()
	if forgotten {
		return nil, fmt.Errorf("%w: %s", ErrForgotten, n.name)
	}
	if failures > 0 {
		if wait := retryAt.Sub(e.cfg.Clock.Now()); wait > 0 {
			// The context's deadline is in real time, the wait on the
			// executor's clock: compare what is left of each.
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, fmt.Errorf("%w: node %s: next attempt in %v: %w", ErrBackoff, n.name, wait.Round(time.Millisecond), lastErr)
			}
			t := e.cfg.Clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
	}

	c, err := e.dial(ctx, n)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil { // the caller giving up is not the node's fault
			e.dialFailures.Add(1)
			n.failures++
			n.retryAt = e.cfg.Clock.Now().Add(backoffDelay(n.failures, e.cfg.BackoffBase, e.cfg.BackoffMax, e.jitter()))
			n.lastErr = err
			level := slog.LevelDebug
			if n.failures == 1 || n.failures%20 == 0 {
				level = slog.LevelWarn // a board that stays down is not logged every few seconds
			}
			e.log.Log(ctx, level, "ssh dial failed", "node", n.name, "failures", n.failures, "err", err)
		}
		return nil, err
	}
	if n.forgotten {
		c.close()
		e.mu.Lock()
		closed := e.closed
		e.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w: %s", ErrForgotten, n.name)
	}
	e.dials.Add(1)
	if n.failures > 0 {
		e.log.Info("ssh reconnected", "node", n.name, "addr", c.addr, "failures", n.failures)
	} else {
		e.log.Debug("ssh connected", "node", n.name, "addr", c.addr)
	}
	n.failures, n.lastErr, n.conn = 0, nil, c
	go e.monitor(c)
	return c, nil
}

// live returns n's connection if it is up.
func (n *node) live() *conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.conn; c != nil && c.alive() {
		return c
	}
	return nil
}

// unansweredDial is a TCP connect that got no answer: when it began and
// when it was given up.
type unansweredDial struct{ began, ended time.Time }

// silenceAfterDial is how long a connect that got no answer keeps counting
// as silence after it was given up (Silence): a pass cut short while
// dialling a board that lost power, and the witness right after it, see
// the board silent at once instead of each waiting out a new connect.
// Short, so that a board that comes back is dialled again soon: passes
// cut short by the silence do not dial. A variable for tests.
var silenceAfterDial = time.Second

// answered reports whether a failed TCP connect still heard from the
// board's address: refused (the kernel answered with a reset). Timeouts,
// cancellations and unreachable hosts did not.
func answered(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// backoffDelay is the wait after the n-th consecutive failed dial:
// base·2^(n-1) capped at max, jittered into [d/2, d) by r in [0, 1).
func backoffDelay(n int, base, max time.Duration, r float64) time.Duration {
	d := backoff.Double(n, base, max)
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}

// dial connects to node and verifies its host key.
func (e *Executor) dial(ctx context.Context, n *node) (*conn, error) {
	name := n.name
	addr, pinned, err := e.cfg.HostKeys.LookupHost(name)
	if err != nil {
		return nil, fmt.Errorf("sshexec: node %s: look up address: %w", name, err)
	}
	if addr == "" {
		return nil, fmt.Errorf("sshexec: node %s: no SSH address known", name)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "22")
	}
	check, err := e.hostKeyCheck(name, addr, pinned)
	if err != nil {
		return nil, err
	}
	cc := &ssh.ClientConfig{
		User:    e.cfg.User,
		Auth:    []ssh.AuthMethod{ssh.PublicKeys(e.cfg.Signers...)},
		Timeout: e.cfg.DialTimeout,
	}
	check.Apply(cc)

	dctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	defer cancel()
	began := time.Now()
	n.tcpSince.Store(began.UnixNano())
	nc, err := e.dialer(dctx, "tcp", addr)
	n.tcpSince.Store(0)
	if err != nil && !answered(err) {
		n.unanswered.Store(unansweredDial{began: began, ended: time.Now()})
	} else {
		n.unanswered.Store(unansweredDial{})
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("sshexec: node %s: dial %s: %w", name, addr, err)
	}
	var acks *ackClock
	if !e.cfg.KeepaliveReplies {
		if acks = newAckClock(nc); acks != nil {
			nc = ackedConn{Conn: nc, clock: acks}
		}
	}
	client, err := ClientConn(dctx, nc, addr, cc)
	if err != nil {
		var refused *HostKeyRefusedError
		switch {
		case errors.As(err, &refused):
			return nil, refused.Err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("sshexec: node %s: ssh handshake with %s: handshake timed out", name, addr)
		}
		return nil, fmt.Errorf("sshexec: node %s: %w", name, err)
	}
	return &conn{node: name, addr: addr, client: client, dead: make(chan struct{}), sftpCommand: e.cfg.SFTPCommand, acks: acks}, nil
}

// monitor watches c until it dies: it sends keepalives and closes c when
// KeepaliveMax intervals pass without a reply (or, timed by TCP's
// acknowledgements, without one).
func (e *Executor) monitor(c *conn) {
	var err error
	if c.acks != nil {
		err = keepAliveAcked(c.client, c.acks, e.cfg.KeepaliveInterval, e.cfg.KeepaliveMax)
	} else {
		err = KeepAlive(c.client, e.cfg.KeepaliveInterval, e.cfg.KeepaliveMax, func(t time.Time) {
			if t.IsZero() {
				c.kaSent.Store(0)
			} else {
				c.kaSent.Store(t.UnixNano())
			}
		})
	}
	if errors.Is(err, ErrKeepaliveTimeout) {
		e.keepaliveTimeouts.Add(1)
		e.log.Warn("ssh peer stopped answering keepalives; closing connection", "node", c.node, "addr", c.addr,
			"missed", e.cfg.KeepaliveMax)
	} else {
		e.log.Debug("ssh connection closed", "node", c.node)
	}
	c.close()
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// close tears c down; safe to call many times.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.dead)
		c.sftpMu.Lock()
		if c.sftp != nil {
			c.sftp.Close()
			c.sftp = nil
		}
		c.sftpMu.Unlock()
		c.bsMu.Lock()
		if c.bs != nil {
			c.bs.Close()
		}
		c.bsMu.Unlock()
		c.client.Close()
	})
}

// brokenConn reports whether err from opening a channel means the
// connection itself is gone (as opposed to the server refusing the channel).
func brokenConn(c *conn, err error) bool {
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) {
		return false
	}
	return !c.alive() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// session opens an exec session on node, holding one of the node's
// MaxSessionsPerNode slots until release is called. A connection found
// broken when opening the session is replaced once.
func (e *Executor) session(ctx context.Context, name string) (s *ssh.Session, release func(), err error) {
	n, err := e.node(name)
	if err != nil {
		return nil, nil, err
	}
	select {
	case n.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release = func() {
		e.sessions.Add(-1)
		<-n.sem
	}
	open := e.sessions.Add(1)
	for {
		p := e.peakSessions.Load()
		if open <= p || e.peakSessions.CompareAndSwap(p, open) {
			break
		}
	}
	for attempt := 0; ; attempt++ {
		c, err := e.connect(ctx, n)
		if err != nil {
			release()
			return nil, nil, err
		}
		s, err := e.openSessionRetry(ctx, c)
		if err == nil {
			return s, release, nil
		}
		if ctx.Err() != nil {
			release()
			return nil, nil, ctx.Err()
		}
		if attempt == 0 && brokenConn(c, err) {
			e.log.Info("ssh connection broken; reconnecting", "node", name, "err", err)
			c.close()
			continue
		}
		release()
		return nil, nil, fmt.Errorf("sshexec: node %s: open session: %w", name, err)
	}
}

// openSessionRetry opens a session, retrying while sshd refuses the
// channel. sshd frees a closed session's slot only after it has processed
// the close, so right after a session ends its MaxSessions may briefly
// count it; a refused open has no effect on the board, so retrying is safe.
func (e *Executor) openSessionRetry(ctx context.Context, c *conn) (*ssh.Session, error) {
	delay := 5 * time.Millisecond
	for try := 1; ; try++ {
		s, err := openSession(ctx, c)
		var oce *ssh.OpenChannelError
		if err == nil || !errors.As(err, &oce) || try == openRetries {
			return s, err
		}
		e.log.Debug("ssh session refused; retrying", "node", c.node, "try", try, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// openRetries bounds openSessionRetry (about 3 s of waiting in all).
const openRetries = 20

// openSession is c.client.NewSession bounded by ctx.
func openSession(ctx context.Context, c *conn) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.client.NewSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
