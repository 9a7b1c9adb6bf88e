package svcproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
)

// wait is how long a test waits for something that happens at once on
// an idle machine (generous: the race detector on two shared cores).
const wait = 10 * time.Second

var (
	webTCP = Key{Service: "web", Port: "http", Protocol: "tcp"}
	dnsUDP = Key{Service: "dns", Port: "dns", Protocol: "udp"}
)

func newProxy(t testing.TB, o Options) *Proxy {
	t.Helper()
	o.Host = "127.0.0.1"
	o.Log = testutil.Logger(t)
	p := New(o)
	t.Cleanup(func() { p.Close() })
	return p
}

func set(t testing.TB, p *Proxy, bs ...Binding) {
	t.Helper()
	if err := p.Set(bs); err != nil {
		t.Fatal(err)
	}
}

func targets(addrs ...string) []Target {
	var ts []Target
	for i, a := range addrs {
		ts = append(ts, Target{Addr: a, Node: fmt.Sprintf("b%d", i+1), Pod: fmt.Sprintf("web-%d", i+1)})
	}
	return ts
}

// backend is a local TCP server standing in for an endpoint.
type backend struct {
	name  string
	ln    net.Listener
	conns atomic.Int64 // connections accepted
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  map[net.Conn]bool
}

func (b *backend) addr() string { return b.ln.Addr().String() }

// startBackend serves each connection with serve until the test ends.
func startBackend(t testing.TB, name string, serve func(name string, c net.Conn)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, ln: ln, open: map[net.Conn]bool{}}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.conns.Add(1)
			b.mu.Lock()
			b.open[c] = true
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer func() {
					c.Close()
					b.mu.Lock()
					delete(b.open, c)
					b.mu.Unlock()
				}()
				serve(name, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for c := range b.open {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

// lines answers each line with "NAME: line" and the client's FIN with
// "NAME bye" before closing: an interactive and a half-close server.
func lines(name string, c net.Conn) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				fmt.Fprintf(c, "%s bye\n", name)
			}
			return
		}
		fmt.Fprintf(c, "%s: %s", name, line)
	}
}

// echo copies the connection back to itself.
func echo(_ string, c net.Conn) { io.Copy(c, c) }

// sink reads and drops everything.
func sink(_ string, c net.Conn) { io.Copy(io.Discard, c) }

// client is a test's connection through the proxy.
type client struct {
	t testing.TB
	net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, p *Proxy, k Key) *client {
	t.Helper()
	a := p.Addr(k)
	if a == nil {
		t.Fatalf("no listener for %v", k)
	}
	c, err := net.Dial("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(wait))
	t.Cleanup(func() { c.Close() })
	return &client{t: t, Conn: c, br: bufio.NewReader(c)}
}

// ask sends a line and returns the answer line, "" on an error.
func (c *client) ask(line string) string {
	c.t.Helper()
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return ""
	}
	s, err := c.br.ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(s, "\n")
}

// rest half-closes the client and returns everything until the end.
func (c *client) rest() (string, error) {
	c.Conn.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c.br)
	return string(b), err
}

// once is one request on a new connection: a line, a FIN, the reply.
func once(t testing.TB, p *Proxy, k Key) string {
	t.Helper()
	c := dial(t, p, k)
	defer c.Close()
	if _, err := fmt.Fprintf(c, "hi\n"); err != nil {
		return ""
	}
	s, _ := c.rest()
	return s
}

// stat returns the row of a target ("" for refusals), zero if none.
func stat(p *Proxy, k Key, target string) Stat {
	for _, s := range p.Stats() {
		if s.Key == k && s.Target == target {
			return s
		}
	}
	return Stat{}
}

// activeZero waits until no connection or session of p is open.
func activeZero(t testing.TB, p *Proxy) {
	t.Helper()
	testutil.Eventually(t, wait, "no open connection", func() error {
		for _, s := range p.Stats() {
			if s.Active != 0 {
				return fmt.Errorf("%v target %q: %d active", s.Key, s.Target, s.Active)
			}
		}
		return nil
	})
}
