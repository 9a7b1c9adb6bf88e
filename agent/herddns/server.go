package herddns

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"
)

// Source is where the server reads the state for each query: the agent's
// local copy of the replicated store.
type Source interface {
	DNSState() State
}

// Limits bound what one source address may ask.
type Limits struct {
	// QPS and Burst are each source IP's token bucket.
	QPS   float64
	Burst int
	// Sources is how many source IPs are tracked; the least recently seen
	// is forgotten beyond it.
	Sources int
}

// DefaultLimits are generous for a LAN's resolvers and tight for a flood.
var DefaultLimits = Limits{QPS: 200, Burst: 400, Sources: 4096}

// Server answers DNS over UDP and TCP on one address.
type Server struct {
	src     Source
	limiter *sourceLimiter
	servers []*dns.Server
}

// NewServer returns a server answering from src within lim.
func NewServer(src Source, lim Limits) *Server {
	return &Server{src: src, limiter: newSourceLimiter(lim)}
}

// ServeDNS implements dns.Handler: over the limit a query is answered
// REFUSED (an empty, small reply: no amplification).
func (s *Server) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	var m *dns.Msg
	if ip, ok := remoteIP(w.RemoteAddr()); ok && !s.limiter.allow(ip) {
		m = new(dns.Msg)
		m.SetRcode(q, dns.RcodeRefused)
		m.Question = nil
	} else {
		m = Answer(q, s.src.DNSState())
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			size := dns.MinMsgSize
			if o := q.IsEdns0(); o != nil {
				size = max(size, int(o.UDPSize()))
			}
			m.Truncate(size)
		}
	}
	_ = w.WriteMsg(m)
}

// Serve answers on the UDP socket pc and the TCP listener ln (either may
// be nil) until ctx ends.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	errc := make(chan error, 2)
	n := 0
	var started []chan struct{}
	notify := func() func() {
		c := make(chan struct{})
		started = append(started, c)
		return func() { close(c) }
	}
	if pc != nil {
		// miekg/dns's UDP loop wakes every ReadTimeout (2 s by default)
		// just to read again; an idle agent need not. A UDP read holds
		// nothing per client, and Shutdown unblocks it.
		srv := &dns.Server{PacketConn: pc, Handler: s, UDPSize: dns.DefaultMsgSize, ReadTimeout: time.Hour, NotifyStartedFunc: notify()}
		s.servers = append(s.servers, srv)
		n++
		go func() { errc <- srv.ActivateAndServe() }()
	}
	if ln != nil {
		srv := &dns.Server{Listener: ln, Handler: s, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			IdleTimeout: func() time.Duration { return 5 * time.Second }, MaxTCPQueries: 64, NotifyStartedFunc: notify()}
		s.servers = append(s.servers, srv)
		n++
		go func() { errc <- srv.ActivateAndServe() }()
	}
	if n == 0 {
		return errors.New("herddns: nothing to serve on")
	}
	// Shutdown of a server not yet started fails and leaves it serving:
	// wait until each has started (or failed) first.
	var err error
	for _, st := range started {
		select {
		case <-st:
		case err = <-errc:
			n--
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		for _, srv := range s.servers {
			_ = srv.Shutdown()
		}
		for ; n > 0; n-- {
			<-errc
		}
		return err
	}
	select {
	case <-ctx.Done():
		err = ctx.Err()
	case err = <-errc:
		n--
	}
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
	for ; n > 0; n-- {
		<-errc
	}
	return err
}

func remoteIP(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}

// sourceLimiter is a token bucket per source IP, at most lim.Sources of
// them, the least recently seen forgotten first.
type sourceLimiter struct {
	lim   Limits
	mu    sync.Mutex
	order *list.List // of netip.Addr, most recent first
	byIP  map[netip.Addr]*limiterEntry
}

type limiterEntry struct {
	l    *rate.Limiter
	elem *list.Element
}

func newSourceLimiter(lim Limits) *sourceLimiter {
	return &sourceLimiter{lim: lim, order: list.New(), byIP: map[netip.Addr]*limiterEntry{}}
}

func (s *sourceLimiter) allow(ip netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byIP[ip]
	if e == nil {
		if s.order.Len() >= max(1, s.lim.Sources) {
			oldest := s.order.Back()
			delete(s.byIP, oldest.Value.(netip.Addr))
			s.order.Remove(oldest)
		}
		e = &limiterEntry{l: rate.NewLimiter(rate.Limit(s.lim.QPS), s.lim.Burst), elem: s.order.PushFront(ip)}
		s.byIP[ip] = e
	} else {
		s.order.MoveToFront(e.elem)
	}
	return e.l.Allow()
}
