package svcproxy

import (
	"net"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
)

// udpBackend answers each datagram with "NAME:" and the datagram, until
// the test ends.
func udpBackend(t testing.TB, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, maxDatagram)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return pc.LocalAddr().String()
}

func udpClient(t testing.TB, p *Proxy) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, p.Addr(dnsUDP).(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends msg and returns the reply, "" if none within a second.
func roundTrip(t testing.TB, c *net.UDPConn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, maxDatagram)
	n, err := c.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// ask retries a round trip (UDP may drop) until a reply comes.
func udpAsk(t testing.TB, c *net.UDPConn, msg string) string {
	t.Helper()
	var got string
	testutil.Until(t, wait, "a reply to "+msg, func() bool {
		got = roundTrip(t, c, msg)
		return got != ""
	})
	return got
}

func TestUDPEcho(t *testing.T) {
	a := udpBackend(t, "a")
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: dnsUDP, Targets: targets(a)})
	c1, c2 := udpClient(t, p), udpClient(t, p)
	if got := udpAsk(t, c1, "one"); got != "a:one" {
		t.Errorf("client 1: %q", got)
	}
	if got := udpAsk(t, c2, "two"); got != "a:two" {
		t.Errorf("client 2: %q", got)
	}
	if got := udpAsk(t, c1, "three"); got != "a:three" {
		t.Errorf("client 1 again: %q", got)
	}
	big := string(make([]byte, 60000))
	if got := udpAsk(t, c2, big); got != "a:"+big {
		t.Errorf("a 60000-byte datagram: got %d bytes back", len(got))
	}
	// A reply is counted once written to the client, so the client may
	// read it first: wait for the counters.
	testutil.Until(t, wait, "2 sessions open and the bytes counted", func() bool {
		s := stat(p, dnsUDP, a)
		return s.Conns == 2 && s.Active == 2 && s.BytesIn >= 3+3+5+60000 && s.BytesOut >= s.BytesIn
	})
}

func TestUDPSpread(t *testing.T) {
	a, b := udpBackend(t, "a"), udpBackend(t, "b")
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: dnsUDP, Targets: targets(a, b)})
	got := map[string]int{}
	for range 4 {
		got[udpAsk(t, udpClient(t, p), "x")]++
	}
	if got["a:x"] != 2 || got["b:x"] != 2 {
		t.Errorf("replies of 4 clients: %v, want 2 each", got)
	}
}

// TestUDPExpiry: a session with no datagram for UDPIdle ends; the next
// datagram starts another.
func TestUDPExpiry(t *testing.T) {
	a := udpBackend(t, "a")
	p := newProxy(t, Options{UDPIdle: 200 * time.Millisecond})
	set(t, p, Binding{Key: dnsUDP, Targets: targets(a)})
	c := udpClient(t, p)
	udpAsk(t, c, "x")
	activeZero(t, p)
	if got := udpAsk(t, c, "y"); got != "a:y" {
		t.Errorf("after expiry: %q", got)
	}
	if s := stat(p, dnsUDP, a); s.Conns < 2 {
		t.Errorf("stats %+v: want a second session", s)
	}
}

// TestUDPSwap: Set moves a client whose target is gone to a current one
// at its next datagram.
func TestUDPSwap(t *testing.T) {
	a, b := udpBackend(t, "a"), udpBackend(t, "b")
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: dnsUDP, Targets: targets(a)})
	c := udpClient(t, p)
	if got := udpAsk(t, c, "x"); got != "a:x" {
		t.Fatalf("before: %q", got)
	}
	set(t, p, Binding{Key: dnsUDP, Targets: targets(b)})
	if got := udpAsk(t, c, "y"); got != "b:y" {
		t.Errorf("after the swap: %q, want b", got)
	}
	testutil.Until(t, wait, "a's session ended", func() bool { return stat(p, dnsUDP, a).Active == 0 })
}

// TestUDPLimits: without targets, and beyond MaxUDPSessions, datagrams
// are dropped and counted.
func TestUDPLimits(t *testing.T) {
	a := udpBackend(t, "a")
	p := newProxy(t, Options{MaxUDPSessions: 1})
	set(t, p, Binding{Key: dnsUDP})
	c1, c2 := udpClient(t, p), udpClient(t, p)
	c1.Write([]byte("x"))
	testutil.Until(t, wait, "dropped for no target", func() bool { return stat(p, dnsUDP, "").Failures == 1 })
	set(t, p, Binding{Key: dnsUDP, Targets: targets(a)})
	udpAsk(t, c1, "x")
	c2.Write([]byte("y"))
	testutil.Until(t, wait, "dropped beyond the limit", func() bool { return stat(p, dnsUDP, "").Failures == 2 })
	if s := stat(p, dnsUDP, a); s.Active != 1 {
		t.Errorf("stats %+v: want the one session", s)
	}
}

// TestUDPDeadTarget: a target that answers with ICMP port unreachable is
// marked down and the client's retry goes to the live one.
func TestUDPDeadTarget(t *testing.T) {
	a := udpBackend(t, "a")
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: dnsUDP, Targets: targets(dead, a)})
	c := udpClient(t, p)
	if got := udpAsk(t, c, "x"); got != "a:x" {
		t.Errorf("got %q, want a", got)
	}
	testutil.Until(t, wait, "refusal counted", func() bool { return stat(p, dnsUDP, dead).Failures == 1 })
	for range 3 {
		if got := udpAsk(t, udpClient(t, p), "y"); got != "a:y" {
			t.Errorf("new client while the dead target is down: %q", got)
		}
	}
}
