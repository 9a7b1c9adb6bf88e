package svcproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/herd-dev/herd/internal/testutil"
)

func TestTCPSpread(t *testing.T) {
	a, b, c := startBackend(t, "a", lines), startBackend(t, "b", lines), startBackend(t, "c", lines)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr(), b.addr(), c.addr())})
	got := map[string]int{}
	for range 30 {
		got[once(t, p, webTCP)]++
	}
	want := map[string]int{"a: hi\na bye\n": 10, "b: hi\nb bye\n": 10, "c: hi\nc bye\n": 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	activeZero(t, p)
	wantStats := []Stat{{Key: webTCP}}
	for _, x := range []*backend{a, b, c} {
		wantStats = append(wantStats, Stat{Key: webTCP, Target: x.addr(), Conns: 10, BytesIn: 30, BytesOut: 10 * uint64(len("a: hi\na bye\n"))})
	}
	if diff := cmp.Diff(wantStats, p.Stats(), cmpopts.SortSlices(func(x, y Stat) bool { return x.Target < y.Target })); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// TestTCPDeadTarget: a target that refuses is skipped, every client
// still gets an answer, and the refusal is counted once (then the target
// is skipped for its backoff).
func TestTCPDeadTarget(t *testing.T) {
	a := startBackend(t, "a", lines)
	dead := testutil.FreeAddr(t)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(dead, a.addr())})
	for i := range 6 {
		if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
			t.Fatalf("connection %d: got %q, want a's answer", i, got)
		}
	}
	if s := stat(p, webTCP, dead); s.Failures == 0 || s.Conns != 0 {
		t.Errorf("dead target stats %+v: want failures, no connection", s)
	}
	if s := stat(p, webTCP, a.addr()); s.Conns != 6 || s.Failures != 0 {
		t.Errorf("live target stats %+v: want 6 connections", s)
	}
}

// TestTCPAllDead: with every target refusing the client is closed.
func TestTCPAllDead(t *testing.T) {
	d1, d2 := testutil.FreeAddr(t), testutil.FreeAddr(t)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(d1, d2)})
	if got := once(t, p, webTCP); got != "" {
		t.Errorf("got %q, want the connection closed", got)
	}
	testutil.Until(t, wait, "both dials counted", func() bool {
		return stat(p, webTCP, d1).Failures == 1 && stat(p, webTCP, d2).Failures == 1
	})
}

// TestTCPDrain: Set swaps the targets under an open connection, which
// keeps working with the old target; new connections go to the new one.
func TestTCPDrain(t *testing.T) {
	a, b := startBackend(t, "a", lines), startBackend(t, "b", lines)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())})
	old := dial(t, p, webTCP)
	if got := old.ask("one"); got != "a: one" {
		t.Fatalf("before the swap: %q", got)
	}
	set(t, p, Binding{Key: webTCP, Targets: targets(b.addr())})
	if got := old.ask("two"); got != "a: two" {
		t.Errorf("open connection after the swap: %q, want a: two", got)
	}
	for range 3 {
		if got := once(t, p, webTCP); got != "b: hi\nb bye\n" {
			t.Errorf("new connection after the swap: %q, want b", got)
		}
	}
	if s := stat(p, webTCP, a.addr()); s.Active != 1 || s.Conns != 1 {
		t.Errorf("drained target row %+v: want 1 active", s)
	}
	if got, err := old.rest(); got != "a bye\n" || err != nil {
		t.Errorf("half-close of the drained connection: %q %v", got, err)
	}
	activeZero(t, p)
}

// TestTCPHalfClose: the client's FIN reaches the endpoint, which still
// answers, and its close ends the client's read.
func TestTCPHalfClose(t *testing.T) {
	a := startBackend(t, "a", lines)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())})
	c := dial(t, p, webTCP)
	if got := c.ask("x"); got != "a: x" {
		t.Fatalf("ask: %q", got)
	}
	got, err := c.rest()
	if got != "a bye\n" || err != nil {
		t.Errorf("after CloseWrite: %q %v, want the server's last words then EOF", got, err)
	}
	activeZero(t, p)
}

// TestTCPIdle: a connection with no bytes either way for IdleTimeout is
// closed; bytes in one direction only keep it open.
func TestTCPIdle(t *testing.T) {
	a, s := startBackend(t, "a", lines), startBackend(t, "sink", sink)
	p := newProxy(t, Options{IdleTimeout: 300 * time.Millisecond})
	sinkKey := Key{Service: "sink", Port: "p", Protocol: "tcp"}
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())}, Binding{Key: sinkKey, Targets: targets(s.addr())})

	c := dial(t, p, webTCP)
	start := time.Now()
	if got := c.ask("x"); got != "a: x" {
		t.Fatalf("ask: %q", got)
	}
	if _, err := c.br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("idle connection: read %v, want closed", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", d)
	}

	// Client to endpoint only: the endpoint never answers, and the
	// connection lives on for 3 idle timeouts.
	w := dial(t, p, sinkKey)
	tick := time.NewTicker(50 * time.Millisecond) // pacing, not synchronisation
	defer tick.Stop()
	for end := time.Now().Add(900 * time.Millisecond); time.Now().Before(end); <-tick.C {
		if _, err := w.Write([]byte("data")); err != nil {
			t.Fatalf("one-way connection closed while busy: %v", err)
		}
	}
	if got := stat(p, sinkKey, s.addr()).Active; got != 1 {
		t.Errorf("one-way connection: %d active, want 1", got)
	}
	activeZero(t, p) // and it goes idle once the writes stop
}

// TestTCPMaxConns: beyond MaxConns a client is accepted and closed at
// once and counted; a freed slot takes the next one.
func TestTCPMaxConns(t *testing.T) {
	a := startBackend(t, "a", lines)
	p := newProxy(t, Options{MaxConns: 2})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())})
	c1, c2 := dial(t, p, webTCP), dial(t, p, webTCP)
	for _, c := range []*client{c1, c2} {
		if got := c.ask("x"); got != "a: x" {
			t.Fatalf("within the limit: %q", got)
		}
	}
	if got := once(t, p, webTCP); got != "" {
		t.Errorf("beyond the limit: %q, want closed", got)
	}
	if got := stat(p, webTCP, "").Failures; got != 1 {
		t.Errorf("refusals: %d, want 1", got)
	}
	c1.Close()
	testutil.Until(t, wait, "slot freed", func() bool { return stat(p, webTCP, a.addr()).Active == 1 })
	if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
		t.Errorf("after a slot freed: %q", got)
	}
}

// TestTCPNoEndpoints: without targets a client is closed at once.
func TestTCPNoEndpoints(t *testing.T) {
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP})
	if got := once(t, p, webTCP); got != "" {
		t.Errorf("got %q, want closed", got)
	}
	testutil.Until(t, wait, "refusal counted", func() bool { return stat(p, webTCP, "").Failures == 1 })
}

// TestTCPRemoved: a listener Set removes closes, with its connections.
func TestTCPRemoved(t *testing.T) {
	a := startBackend(t, "a", lines)
	p := newProxy(t, Options{})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())})
	addr := p.Addr(webTCP).String()
	c := dial(t, p, webTCP)
	if got := c.ask("x"); got != "a: x" {
		t.Fatalf("ask: %q", got)
	}
	set(t, p)
	if _, err := c.br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("connection of a removed listener: %v, want closed", err)
	}
	if p.Addr(webTCP) != nil || len(p.Stats()) != 0 {
		t.Errorf("removed listener still there: %v %v", p.Addr(webTCP), p.Stats())
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("removed listener still accepts")
	}
}

// TestTCPNoLeak: many connections, normal and hostile (one that sends
// nothing, one that stops reading while the endpoint floods it, one
// that closes at once), leave no goroutine and nothing open behind once
// they end or IdleTimeout passes.
func TestTCPNoLeak(t *testing.T) {
	a := startBackend(t, "a", lines)
	flood := startBackend(t, "flood", func(_ string, c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	floodKey := Key{Service: "flood", Port: "p", Protocol: "tcp"}
	p := newProxy(t, Options{IdleTimeout: 300 * time.Millisecond})
	set(t, p, Binding{Key: webTCP, Targets: targets(a.addr())}, Binding{Key: floodKey, Targets: targets(flood.addr())})
	base := runtime.NumGoroutine()

	for range 20 {
		if got := once(t, p, webTCP); got != "a: hi\na bye\n" {
			t.Fatalf("got %q", got)
		}
	}
	silent := dial(t, p, webTCP)
	quiet := dial(t, p, floodKey)          // never reads while flooded,
	quiet.Conn.(*net.TCPConn).CloseWrite() // nor sends: only the write stalls
	half := dial(t, p, webTCP)
	half.Conn.(*net.TCPConn).CloseWrite() // FIN, then never reads
	gone := dial(t, p, webTCP)
	gone.Close()
	testutil.Until(t, wait, "connections forwarded", func() bool {
		return stat(p, floodKey, flood.addr()).BytesOut > 0 && stat(p, webTCP, a.addr()).Conns >= 22
	})
	activeZero(t, p)
	for _, c := range []*client{silent, quiet} {
		c.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.Copy(io.Discard, c); err == nil {
			t.Errorf("idle hostile client: want a reset, got a clean end")
		}
	}
	testutil.Eventually(t, wait, "goroutines back to the baseline", func() error {
		if n := runtime.NumGoroutine(); n > base {
			return errors.New(strings.Repeat("+", n-base))
		}
		return nil
	})
}

// TestCloseStuck: Close returns with a stuck client connected and ends
// every goroutine.
func TestCloseStuck(t *testing.T) {
	s := startBackend(t, "sink", sink)
	base := runtime.NumGoroutine()
	p := New(Options{Host: "127.0.0.1", Log: testutil.Logger(t)})
	set(t, p, Binding{Key: webTCP, Targets: targets(s.addr())})
	c := dial(t, p, webTCP)
	c.Write([]byte("x"))
	testutil.Until(t, wait, "forwarding", func() bool { return stat(p, webTCP, s.addr()).BytesIn == 1 })
	p.Close()
	// The backend's own goroutine for the connection ends once it sees
	// the close, after Close returned: wait for it.
	testutil.Until(t, wait, "goroutines back to the baseline after Close", func() bool { return runtime.NumGoroutine() <= base })
	if err := p.Set(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: %v, want ErrClosed", err)
	}
}
