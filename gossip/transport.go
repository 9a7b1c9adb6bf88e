package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

// maxPacket is the largest UDP datagram the transport reads.
const maxPacket = 65536

// udpRecvBuffer is the socket receive buffer the transport asks for, so
// that a burst of gossip is not dropped by the kernel while memberlist is
// busy; smaller sizes are tried when the system caps it.
const udpRecvBuffer = 2 << 20

// transport is memberlist's network transport for herd: UDP packets and
// TCP streams on one address and port, as memberlist's own NetTransport,
// except that it reads every datagram into one reused buffer and hands
// memberlist a copy of exactly the datagram's size. NetTransport allocates
// a fresh 64 KB buffer per datagram: on an idle lab board that was 64-87 %
// of everything the agent allocated, and so of its garbage collections
// (BENCHMARKS.md, "Idle agents on the lab").
//
// Its methods are safe for concurrent use, as memberlist requires.
type transport struct {
	ip   net.IP
	port int // bound, never 0
	tcp  *net.TCPListener
	udp  *net.UDPConn
	log  *slog.Logger

	packetCh chan *memberlist.Packet
	streamCh chan net.Conn

	shutdown atomic.Bool
	done     chan struct{} // closed by Shutdown
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// newTransport listens on bindAddr (an IP address) and port, TCP and UDP;
// port 0 picks one free for both.
func newTransport(bindAddr string, port int, log *slog.Logger) (*transport, error) {
	ip := net.ParseIP(bindAddr)
	if ip == nil {
		return nil, fmt.Errorf("bind address %q is not an IP address", bindAddr)
	}
	t := &transport{
		ip:       ip,
		log:      log,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	// With port 0 the TCP port the kernel picks may be taken for UDP:
	// try a few.
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		if err = t.listen(port); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	t.wg.Add(2)
	go t.acceptLoop()
	go t.readLoop()
	return t, nil
}

// listen opens the TCP listener, then the UDP socket on the same port.
func (t *transport) listen(port int) error {
	tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: t.ip, Port: port})
	if err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	port = tl.Addr().(*net.TCPAddr).Port
	ul, err := net.ListenUDP("udp", &net.UDPAddr{IP: t.ip, Port: port})
	if err != nil {
		tl.Close()
		return fmt.Errorf("udp: %w", err)
	}
	for size := udpRecvBuffer; size >= 64<<10; size /= 2 {
		if ul.SetReadBuffer(size) == nil {
			break
		}
	}
	t.tcp, t.udp, t.port = tl, ul, port
	return nil
}

// Port returns the bound port.
func (t *transport) Port() int { return t.port }

// FinalAdvertiseAddr implements memberlist.Transport: ip and port when ip
// is set, else the bind address (for an unspecified one, the first private
// IPv4 address) and the bound port.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		a := net.ParseIP(ip)
		if a == nil {
			return nil, 0, fmt.Errorf("advertise address %q is not an IP address", ip)
		}
		if a4 := a.To4(); a4 != nil {
			a = a4
		}
		if port == 0 {
			port = t.port
		}
		return a, port, nil
	}
	if !t.ip.IsUnspecified() {
		return t.ip, t.port, nil
	}
	priv, err := sockaddr.GetPrivateIP()
	if err != nil {
		return nil, 0, fmt.Errorf("finding a private address to advertise: %w", err)
	}
	if priv == "" {
		return nil, 0, errors.New("no private IP address to advertise: set the advertise address")
	}
	a := net.ParseIP(priv)
	if a == nil {
		return nil, 0, fmt.Errorf("private address %q is not an IP address", priv)
	}
	return a, t.port, nil
}

// WriteTo implements memberlist.Transport: b as one UDP datagram to addr
// (host:port).
func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, ua)
	return time.Now(), err
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh implements memberlist.Transport.
func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout implements memberlist.Transport: a TCP connection to addr.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", addr)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh implements memberlist.Transport.
func (t *transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown implements memberlist.Transport: it closes both sockets and
// waits for the loops to end.
func (t *transport) Shutdown() error {
	if t.shutdown.Swap(true) {
		return nil
	}
	close(t.done)
	t.tcp.Close()
	t.udp.Close()
	t.wg.Wait()
	return nil
}

// acceptLoop hands accepted TCP connections to memberlist, backing off on
// errors (too many open files) up to a second.
func (t *transport) acceptLoop() {
	defer t.wg.Done()
	const maxDelay = time.Second
	var delay time.Duration
	for {
		c, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), maxDelay)
			t.log.Warn("gossip: accepting a TCP connection failed", "err", err, "retryIn", delay)
			time.Sleep(delay) // backoff before the next Accept
			continue
		}
		delay = 0
		select {
		case t.streamCh <- c:
		case <-t.done:
			c.Close()
			return
		}
	}
}

// readLoop reads datagrams into one buffer and hands memberlist a copy of
// each, stamped with its arrival.
func (t *transport) readLoop() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			t.log.Warn("gossip: reading a UDP packet failed", "err", err)
			continue
		}
		if n < 1 {
			t.log.Debug("gossip: empty UDP packet", "from", from.String())
			continue
		}
		p := make([]byte, n)
		copy(p, buf[:n])
		select {
		case t.packetCh <- &memberlist.Packet{Buf: p, From: from, Timestamp: now}:
		case <-t.done:
			return
		}
	}
}
