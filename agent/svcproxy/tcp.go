package svcproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// tcpListener is one TCP service port.
type tcpListener struct {
	*binding
	p      *Proxy
	ln     net.Listener
	ctx    context.Context // cancelled by close: ends dials in progress
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]bool // every open client and endpoint connection
	active int               // client connections open (dialling or forwarding)
	closed bool
}

func (p *Proxy) listenTCP(b *binding, hostport string) (*tcpListener, error) {
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &tcpListener{binding: b, p: p, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go l.acceptLoop()
	p.o.Log.Info("service port open", "service", b.key.Service, "port", b.key.Port,
		"protocol", "tcp", "addr", ln.Addr().String())
	return l, nil
}

func (l *tcpListener) base() *binding { return l.binding }
func (l *tcpListener) addr() net.Addr { return l.ln.Addr() }

func (l *tcpListener) close() {
	l.cancel()
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
}

// acceptLoop accepts client connections until the listener closes,
// refusing (accept then close) those beyond MaxConns or without a target.
func (l *tcpListener) acceptLoop() {
	defer l.p.wg.Done()
	var pause time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || l.ctx.Err() != nil {
				return
			}
			// Out of file descriptors or the like: back off like net/http.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.p.o.Log.Warn("service port accept", "service", l.key.Service, "port", l.key.Port, "err", err)
			select {
			case <-time.After(pause):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		pause = 0
		if !l.admit(c) {
			l.refused()
			c.Close()
			continue
		}
		l.p.wg.Add(1)
		go l.serve(c)
	}
}

// admit registers a new client connection if the limit allows.
func (l *tcpListener) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.active >= l.p.o.MaxConns {
		return false
	}
	l.active++
	l.conns[c] = true
	return true
}

// track registers an endpoint connection; false if the listener closed.
func (l *tcpListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = true
	return true
}

// done closes and forgets a client connection and its endpoint
// connection (nil if none).
func (l *tcpListener) done(client, up net.Conn) {
	client.Close()
	if up != nil {
		up.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
	delete(l.conns, client)
	delete(l.conns, up)
}

// serve forwards one client connection to a target.
func (l *tcpListener) serve(client net.Conn) {
	defer l.p.wg.Done()
	up, c := l.dial()
	defer func() { l.done(client, up) }()
	if up == nil {
		return
	}
	if !l.track(up) {
		return
	}
	c.row.conns.Add(1)
	c.row.active.Add(1)
	defer c.row.active.Add(-1)
	l.p.o.Log.Debug("service connection", "service", l.key.Service, "port", l.key.Port,
		"client", client.RemoteAddr().String(), "target", c.Addr, "pod", c.Pod)
	pipe(client, up, l.p.o.IdleTimeout, c.row, &l.p.wg)
}

// dial connects to the first target of the plan that answers, trying
// each at most once; nil if none does (or there are none).
func (l *tcpListener) dial() (net.Conn, choice) {
	plan := l.plan(time.Now())
	if len(plan) == 0 {
		l.refused()
		return nil, choice{}
	}
	d := net.Dialer{Timeout: l.p.o.DialTimeout}
	for _, c := range plan {
		up, err := d.DialContext(l.ctx, "tcp", c.Addr)
		if l.ctx.Err() != nil {
			if up != nil {
				up.Close()
			}
			return nil, choice{}
		}
		if l.result(c, err == nil, time.Now()) {
			l.p.o.Log.Info("service endpoint down", "service", l.key.Service, "port", l.key.Port,
				"target", c.Addr, "node", c.Node, "pod", c.Pod, "err", err)
		}
		if err == nil {
			return up, c
		}
		l.p.o.Log.Debug("service endpoint dial", "target", c.Addr, "err", err)
	}
	return nil, choice{}
}
