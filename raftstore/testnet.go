package raftstore

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// testNet is a loopback network on which a TestCluster can cut servers
// off. Traffic to and from a cut server is dropped without an error, as
// when its board loses power or its process is frozen: dials to or from it
// hang until their deadline, and its open connections swallow writes and
// never deliver another byte. Healing resets the connections that went
// dead (their streams lost bytes); new ones work again.
//
// Safe for concurrent use.
type testNet struct {
	mu    sync.Mutex
	cut   map[string]bool   // node IDs cut off
	nodes map[string]string // listen address → node ID
	conns map[*testConn]struct{}
}

func newTestNet() *testNet {
	return &testNet{cut: map[string]bool{}, nodes: map[string]string{}, conns: map[*testConn]struct{}{}}
}

// node returns the network as server id sees it.
func (n *testNet) node(id string) network { return &testNode{n: n, id: id} }

// setCut cuts id off or heals it. Healing resets every dead connection.
func (n *testNet) setCut(id string, cut bool) {
	n.mu.Lock()
	n.cut[id] = cut
	var reset []*testConn
	for c := range n.conns {
		switch {
		case cut && (c.id == id || c.peer == id):
			c.dead.Store(true)
		case !cut && c.dead.Load():
			reset = append(reset, c)
		}
	}
	n.mu.Unlock()
	for _, c := range reset {
		c.Close()
	}
}

// isCut reports whether any of the node IDs is cut off.
func (n *testNet) isCut(ids ...string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, id := range ids {
		if n.cut[id] {
			return true
		}
	}
	return false
}

func (n *testNet) nodeAt(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[addr]
}

// testNode is one server's view of a testNet.
type testNode struct {
	n  *testNet
	id string
}

var _ network = (*testNode)(nil)

func (t *testNode) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.n.mu.Lock()
	t.n.nodes[ln.Addr().String()] = t.id
	t.n.mu.Unlock()
	return &testListener{Listener: ln, node: t}, nil
}

func (t *testNode) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	peer := t.n.nodeAt(addr)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.n.isCut(t.id, peer) { // the SYN goes unanswered
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newTestConn(c, t.n, t.id, peer), nil
}

type testListener struct {
	net.Listener
	node *testNode
}

func (l *testListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newTestConn(c, l.node.n, l.node.id, ""), nil
}

// testConn is a connection of server id (to peer, "" if unknown) that
// goes dead once either is cut off.
type testConn struct {
	net.Conn
	n        *testNet
	id, peer string
	dead     atomic.Bool
	closed   chan struct{}
	once     sync.Once

	mu           sync.Mutex
	readDeadline time.Time
}

func newTestConn(c net.Conn, n *testNet, id, peer string) *testConn {
	tc := &testConn{Conn: c, n: n, id: id, peer: peer, closed: make(chan struct{})}
	n.mu.Lock()
	n.conns[tc] = struct{}{}
	n.mu.Unlock()
	tc.isDead()
	return tc
}

func (c *testConn) isDead() bool {
	if c.dead.Load() {
		return true
	}
	if c.n.isCut(c.id, c.peer) {
		c.dead.Store(true)
		return true
	}
	return false
}

func (c *testConn) Read(p []byte) (int, error) {
	for !c.isDead() {
		n, err := c.Conn.Read(p)
		if !c.isDead() {
			return n, err
		}
		if err != nil {
			break // a timeout, a close or EOF: from now on, silence
		}
	}
	// Nothing arrives any more: wait for the deadline or Close.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		dl := c.readDeadline
		c.mu.Unlock()
		if !dl.IsZero() && !time.Now().Before(dl) {
			return 0, os.ErrDeadlineExceeded
		}
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		case <-tick.C:
		}
	}
}

func (c *testConn) Write(p []byte) (int, error) {
	if c.isDead() {
		return len(p), nil // lost on the way
	}
	return c.Conn.Write(p)
}

func (c *testConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.n.mu.Lock()
		delete(c.n.conns, c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *testConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *testConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}
