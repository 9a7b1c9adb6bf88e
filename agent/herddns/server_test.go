package herddns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

type fixedSource State

func (f fixedSource) DNSState() State { return State(f) }

// startServer serves testState on 127.0.0.1 (UDP and TCP, one port each)
// until the test ends.
func startServer(t *testing.T, lim Limits) (udp, tcp string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(fixedSource(testState()), lim)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
	})
	return pc.LocalAddr().String(), ln.Addr().String()
}

func TestServerUDPAndTCP(t *testing.T) {
	udp, tcp := startServer(t, DefaultLimits)
	for _, c := range []struct{ net, addr string }{{"udp", udp}, {"tcp", tcp}} {
		q := new(dns.Msg)
		q.SetQuestion("web.svc.herd.", dns.TypeA)
		m, _, err := (&dns.Client{Net: c.net}).Exchange(q, c.addr)
		if err != nil {
			t.Fatalf("%s: %v", c.net, err)
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 || m.RecursionAvailable {
			t.Errorf("%s: %s with %d answers (RA %v), want NOERROR with 2, no recursion", c.net, dns.RcodeToString[m.Rcode], len(m.Answer), m.RecursionAvailable)
		}
	}
}

// TestServerRateLimit: a source over its burst is answered REFUSED, with
// no question echoed back (the reply is smaller than the query).
func TestServerRateLimit(t *testing.T) {
	udp, _ := startServer(t, Limits{QPS: 0.001, Burst: 2, Sources: 8})
	c := &dns.Client{Net: "udp"}
	var codes []string
	for range 3 {
		q := new(dns.Msg)
		q.SetQuestion("web.svc.herd.", dns.TypeA)
		m, _, err := c.Exchange(q, udp)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, dns.RcodeToString[m.Rcode])
		if m.Rcode == dns.RcodeRefused && len(m.Question)+len(m.Answer) != 0 {
			t.Errorf("refused reply carries %d questions, %d answers; want none", len(m.Question), len(m.Answer))
		}
	}
	if codes[0] != "NOERROR" || codes[1] != "NOERROR" || codes[2] != "REFUSED" {
		t.Errorf("codes %v, want NOERROR NOERROR REFUSED", codes)
	}
}

// TestSourceLimiterBounded: the limiter forgets the least recently seen
// source beyond its size, so a spoofed flood costs bounded memory.
func TestSourceLimiterBounded(t *testing.T) {
	l := newSourceLimiter(Limits{QPS: 1, Burst: 1, Sources: 4})
	for i := range 100 {
		l.allow(netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}))
	}
	if n := len(l.byIP); n != 4 || l.order.Len() != 4 {
		t.Errorf("%d sources tracked (%d in order), want 4", n, l.order.Len())
	}
}

func BenchmarkServeUDP(b *testing.B) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := NewServer(fixedSource(testState()), Limits{QPS: 1e9, Burst: 1e9, Sources: 8})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx, pc, nil) }()
	conn, err := dns.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion("_http._tcp.web.svc.herd.", dns.TypeSRV)
	b.ResetTimer()
	for range b.N {
		if err := conn.WriteMsg(q); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.ReadMsg(); err != nil {
			b.Fatal(err)
		}
	}
}
