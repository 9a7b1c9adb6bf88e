package gossip

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
)

func newTestTransport(t *testing.T) *transport {
	t.Helper()
	tr, err := newTransport("127.0.0.1", 0, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

func addrOf(tr *transport) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.Port()))
}

func recvPacket(t *testing.T, tr *transport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no packet within 10s")
		return nil
	}
}

// TestTransportPackets: datagrams arrive whole, each in its own buffer of
// its own size (the read buffer is reused, what memberlist gets is not),
// from the sender's address, stamped.
func TestTransportPackets(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	if a.Port() == 0 || b.Port() == a.Port() {
		t.Fatalf("ports %d and %d: want two distinct bound ports", a.Port(), b.Port())
	}
	first := bytes.Repeat([]byte("ping "), 200)
	second := []byte("ack")
	before := time.Now()
	if _, err := a.WriteTo(first, addrOf(b)); err != nil {
		t.Fatal(err)
	}
	p1 := recvPacket(t, b)
	if _, err := a.WriteToAddress(second, memberlist.Address{Addr: addrOf(b), Name: "b"}); err != nil {
		t.Fatal(err)
	}
	p2 := recvPacket(t, b)
	if diff := cmp.Diff(first, p1.Buf); diff != "" {
		t.Errorf("first packet (-sent +got) after a second one arrived:\n%s", diff)
	}
	if diff := cmp.Diff(second, p2.Buf); diff != "" {
		t.Errorf("second packet (-sent +got):\n%s", diff)
	}
	if cap(p2.Buf) != len(second) {
		t.Errorf("second packet's buffer has cap %d, want its size %d", cap(p2.Buf), len(second))
	}
	if got := p1.From.String(); got != addrOf(a) {
		t.Errorf("From %s, want the sender %s", got, addrOf(a))
	}
	if p1.Timestamp.Before(before) {
		t.Errorf("Timestamp %v before the send at %v", p1.Timestamp, before)
	}
}

// TestTransportStreams: a dialed TCP connection is handed to StreamCh.
func TestTransportStreams(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	c, err := a.DialAddressTimeout(memberlist.Address{Addr: addrOf(b)}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("push-pull")); err != nil {
		t.Fatal(err)
	}
	var got net.Conn
	select {
	case got = <-b.StreamCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no stream within 10s")
	}
	defer got.Close()
	buf := make([]byte, len("push-pull"))
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "push-pull" {
		t.Errorf("stream read %q, %v; want \"push-pull\"", buf, err)
	}
}

func TestTransportFinalAdvertiseAddr(t *testing.T) {
	tr := newTestTransport(t)
	for _, c := range []struct {
		name     string
		ip       string
		port     int
		wantIP   string
		wantPort int
		wantErr  bool
	}{
		{"given", "10.0.0.7", 7946, "10.0.0.7", 7946, false},
		{"given, port from the bind", "10.0.0.7", 0, "10.0.0.7", tr.Port(), false},
		{"from the bind address", "", 0, "127.0.0.1", tr.Port(), false},
		{"not an IP", "pi1.lan", 7946, "", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip, port, err := tr.FinalAdvertiseAddr(c.ip, c.port)
			if c.wantErr {
				if err == nil {
					t.Errorf("FinalAdvertiseAddr(%q, %d) = %v, %d; want an error", c.ip, c.port, ip, port)
				}
				return
			}
			if err != nil || ip.String() != c.wantIP || port != c.wantPort {
				t.Errorf("FinalAdvertiseAddr(%q, %d) = %v, %d, %v; want %s, %d", c.ip, c.port, ip, port, err, c.wantIP, c.wantPort)
			}
			if c.ip != "" && len(ip) != net.IPv4len {
				t.Errorf("IPv4 %v has %d bytes, want 4", ip, len(ip))
			}
		})
	}
}

// TestTransportShutdown: Shutdown closes both sockets, ends the loops
// even when nobody reads the channels, and may be called again.
func TestTransportShutdown(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	if _, err := a.WriteTo([]byte("unread"), addrOf(b)); err != nil {
		t.Fatal(err)
	}
	c, err := a.DialTimeout(addrOf(b), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if c2, err := a.DialTimeout(addrOf(b), time.Second); err == nil {
		c2.Close()
		t.Error("dialed a transport after its Shutdown")
	}
}
