package svcproxy

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// maxDatagram is the size of every UDP buffer: the largest datagram.
const maxDatagram = 65535

// udpListener is one UDP service port: per client address a session
// with its own connected socket to the chosen target.
type udpListener struct {
	*binding
	p  *Proxy
	pc *net.UDPConn

	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	closed   bool
}

// session is one client address's flow to one target.
type session struct {
	pipeState // last datagram either way; idle is UDPIdle
	client    netip.AddrPort
	conn      *net.UDPConn
	c         choice
}

func (p *Proxy) listenUDP(b *binding, hostport string) (*udpListener, error) {
	ua, err := net.ResolveUDPAddr("udp", hostport)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	l := &udpListener{binding: b, p: p, pc: pc, sessions: map[netip.AddrPort]*session{}}
	p.wg.Add(1)
	go l.readLoop()
	p.o.Log.Info("service port open", "service", b.key.Service, "port", b.key.Port,
		"protocol", "udp", "addr", pc.LocalAddr().String())
	return l, nil
}

func (l *udpListener) base() *binding { return l.binding }
func (l *udpListener) addr() net.Addr { return l.pc.LocalAddr() }

func (l *udpListener) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.pc.Close()
	for _, s := range l.sessions {
		s.conn.Close()
	}
}

// setTargets swaps the targets and ends the sessions of removed targets:
// UDP has no connection that would fail on its own, so a client that
// keeps sending would otherwise keep sending into a dead endpoint; its
// next datagram starts a session with a current target.
func (l *udpListener) setTargets(ts []Target) {
	l.binding.setTargets(ts)
	cur := map[string]bool{}
	for _, t := range ts {
		cur[t.Addr] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, s := range l.sessions {
		if !cur[s.c.Addr] {
			delete(l.sessions, a)
			s.conn.Close()
		}
	}
}

// readLoop forwards the listener's datagrams to their sessions.
func (l *udpListener) readLoop() {
	defer l.p.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := l.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.p.o.Log.Debug("service port read", "service", l.key.Service, "port", l.key.Port, "err", err)
			continue
		}
		s := l.session(from)
		if s == nil {
			continue
		}
		s.touch()
		if _, err := s.conn.Write(buf[:n]); err != nil {
			l.failed(s, err)
			l.forget(s)
			continue
		}
		s.c.row.bytesIn.Add(uint64(n))
	}
}

// session returns the session of a client address, starting one if
// there is none; nil (the datagram dropped and counted) when there is no
// target or the limit is reached.
func (l *udpListener) session(from netip.AddrPort) *session {
	l.mu.Lock()
	s, full := l.sessions[from], len(l.sessions) >= l.p.o.MaxUDPSessions
	l.mu.Unlock()
	if s != nil {
		return s
	}
	var plan []choice
	if !full {
		plan = l.plan(time.Now())
	}
	if len(plan) == 0 {
		l.refused()
		return nil
	}
	for _, c := range plan {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(parseAddrPort(c.Addr)))
		if err != nil {
			l.result(c, false, time.Now())
			continue
		}
		s = &session{pipeState: pipeState{idle: l.p.o.UDPIdle}, client: from, conn: conn, c: c}
		break
	}
	if s == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.conn.Close()
		return nil
	}
	l.sessions[from] = s
	s.c.row.conns.Add(1)
	s.c.row.active.Add(1)
	l.p.wg.Add(1)
	go l.replies(s)
	return s
}

// parseAddrPort parses a target address validated by Set (an ip:port);
// a host name there resolves here.
func parseAddrPort(a string) netip.AddrPort {
	if ap, err := netip.ParseAddrPort(a); err == nil {
		return ap
	}
	if ua, err := net.ResolveUDPAddr("udp", a); err == nil {
		return ua.AddrPort()
	}
	return netip.AddrPort{}
}

// replies relays a session's replies to its client from the listening
// socket until the session goes idle for UDPIdle, its socket is closed or
// the target refuses.
func (l *udpListener) replies(s *session) {
	defer l.p.wg.Done()
	defer l.end(s)
	buf := make([]byte, maxDatagram)
	s.conn.SetReadDeadline(time.Now().Add(s.idle))
	answered := false
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			if s.extend(err, s.conn.SetReadDeadline) {
				continue
			}
			l.failed(s, err)
			return
		}
		s.touch()
		if !answered {
			answered = true
			l.result(s.c, true, time.Now())
		}
		if _, err := l.pc.WriteToUDPAddrPort(buf[:n], s.client); err == nil {
			s.c.row.bytesOut.Add(uint64(n))
		}
	}
}

// failed marks the session's target down if err says it refused.
func (l *udpListener) failed(s *session, err error) {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	if l.result(s.c, false, time.Now()) {
		l.p.o.Log.Info("service endpoint down", "service", l.key.Service, "port", l.key.Port,
			"target", s.c.Addr, "node", s.c.Node, "pod", s.c.Pod, "err", err)
	}
}

// end ends a session (its replies goroutine calls it once).
func (l *udpListener) end(s *session) {
	l.forget(s)
	s.c.row.active.Add(-1)
}

// forget closes a session's socket and takes it out of the sessions, so
// that the client's next datagram starts a new one.
func (l *udpListener) forget(s *session) {
	s.conn.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[s.client] == s {
		delete(l.sessions, s.client)
	}
}
