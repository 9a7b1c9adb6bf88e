package svcproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
)

// The benchmarks compare a connection to a local endpoint made directly
// with the same through the proxy, on loopback.

// benchAddr returns the address a benchmark connects to: the backend's
// own, or a proxy's listener forwarding to it.
func benchAddr(b *testing.B, proxied bool, backend, protocol string) string {
	b.Helper()
	if !proxied {
		return backend
	}
	p := New(Options{Host: "127.0.0.1"}) // no logging: it would be measured
	b.Cleanup(func() { p.Close() })
	k := Key{Service: "bench", Port: "p", Protocol: protocol}
	if err := p.Set([]Binding{{Key: k, Targets: []Target{{Addr: backend}}}}); err != nil {
		b.Fatal(err)
	}
	return p.Addr(k).String()
}

func benchDial(b *testing.B, addr string) net.Conn {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// bulk: MB/s of a one-way copy of b.N 64 KiB chunks, ended by the
// endpoint's count of what it read.
func bulk(b *testing.B, proxied bool) {
	be := startBackend(b, "sink", func(_ string, c net.Conn) {
		io.Copy(io.Discard, c)
		c.Write([]byte{1})
	})
	c := benchDial(b, benchAddr(b, proxied, be.addr(), "tcp"))
	chunk := make([]byte, 64<<10)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkTCPDirect(b *testing.B) { bulk(b, false) }
func BenchmarkTCPProxy(b *testing.B)  { bulk(b, true) }

// rtt: one 64-byte request and its echo on an open connection.
func rtt(b *testing.B, proxied bool) {
	be := startBackend(b, "echo", echo)
	c := benchDial(b, benchAddr(b, proxied, be.addr(), "tcp"))
	msg, reply := make([]byte, 64), make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, reply); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRTTDirect(b *testing.B) { rtt(b, false) }
func BenchmarkRTTProxy(b *testing.B)  { rtt(b, true) }

// connect: a new connection, one line and its answer, close.
func connect(b *testing.B, proxied bool) {
	be := startBackend(b, "a", lines)
	addr := benchAddr(b, proxied, be.addr(), "tcp")
	b.ResetTimer()
	for range b.N {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write([]byte("hi\n")); err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkConnectDirect(b *testing.B) { connect(b, false) }
func BenchmarkConnectProxy(b *testing.B)  { connect(b, true) }

// udpRTT: one 64-byte datagram and its answer.
func udpRTT(b *testing.B, proxied bool) {
	addr := benchAddr(b, proxied, udpBackend(b, "a"), "udp")
	c, err := net.Dial("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, reply := make([]byte, 64), make([]byte, 128)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(reply); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUDPRTTDirect(b *testing.B) { udpRTT(b, false) }
func BenchmarkUDPRTTProxy(b *testing.B)  { udpRTT(b, true) }
