package svcproxy

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Key names one forwarded service port.
type Key struct {
	Service  string // service name
	Port     string // service port name
	Protocol string // "tcp" or "udp"
}

// String names the key as errors and logs do: service "web" port "http" (tcp).
func (k Key) String() string {
	return fmt.Sprintf("service %q port %q (%s)", k.Service, k.Port, k.Protocol)
}

// Binding is one listening port and the ready endpoints it forwards to.
type Binding struct {
	Key
	Listen  int      // port on the board (1-65535; 0 allowed in tests = pick one)
	Targets []Target // ready endpoints, any order; empty = refuse connections (TCP: accept then close at once; UDP: drop)
}

// Target is one ready endpoint.
type Target struct {
	Addr string // ip:port
	Node string
	Pod  string
}

// Options configures a Proxy; zero fields take the defaults named.
type Options struct {
	Host           string        // listen host; "" = all addresses
	Log            *slog.Logger  // nil = discard
	DialTimeout    time.Duration // default 1s: a powered-off board never answers a SYN
	IdleTimeout    time.Duration // TCP, no bytes either way for this long closes both sides; default 5m
	UDPIdle        time.Duration // UDP session expiry; default 60s
	MaxConns       int           // open TCP connections per binding, default 1024; beyond it accept+close and count a failure
	MaxUDPSessions int           // per binding, default 1024
}

// Defaults of Options.
const (
	DefaultDialTimeout    = time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultUDPIdle        = 60 * time.Second
	DefaultMaxConns       = 1024
	DefaultMaxUDPSessions = 1024
)

// ErrClosed is returned by Set after Close.
var ErrClosed = errors.New("svcproxy: proxy closed")

// Stat is a snapshot row for metrics: one per (binding, target) seen,
// counters monotonic while the binding exists.
type Stat struct {
	Key
	Target   string // endpoint address, "" for failures before a target was chosen (no endpoints, limit)
	Conns    uint64 // TCP connections / UDP sessions forwarded
	Active   int
	BytesIn  uint64 // client -> endpoint
	BytesOut uint64 // endpoint -> client
	Failures uint64 // dials that failed, refused for no endpoint / limit
}

// Proxy is the set of service port listeners of one agent. Its methods
// are safe for concurrent use.
type Proxy struct {
	o  Options
	wg sync.WaitGroup // every goroutine of every listener

	mu     sync.Mutex
	ls     map[Key]listener
	closed bool
}

// listener is one open TCP or UDP service port.
type listener interface {
	base() *binding
	addr() net.Addr
	close() // closes the socket and every connection or session; does not wait
	setTargets(ts []Target)
}

// New returns a Proxy with no listeners.
func New(o Options) *Proxy {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.DialTimeout = cmp.Or(o.DialTimeout, DefaultDialTimeout)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	o.UDPIdle = cmp.Or(o.UDPIdle, DefaultUDPIdle)
	o.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	o.MaxUDPSessions = cmp.Or(o.MaxUDPSessions, DefaultMaxUDPSessions)
	return &Proxy{o: o, ls: map[Key]listener{}}
}

// Set makes the proxy's listeners those of bs: it opens listeners for new
// keys or ports, closes the listeners no longer present (and their
// connections), and swaps the targets of the rest without disturbing open
// TCP connections (draining: a removed target gets no new connection; its
// open ones run on until they close or go idle). A listener that cannot
// open, or a binding that is invalid, is reported in the returned error
// (naming service, port name, protocol and listen port) and the rest still
// apply; a later Set retries it. Set does not wait for connections to end.
func (p *Proxy) Set(bs []Binding) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	want, errs := validate(bs)
	for k, l := range p.ls { // close first: a port may move between keys
		if b, ok := want[k]; !ok || b.Listen != l.base().listen {
			l.close()
			delete(p.ls, k)
		}
	}
	done := map[Key]bool{}
	for _, b := range bs {
		w, ok := want[b.Key]
		if !ok || done[b.Key] { // invalid, or a duplicate reported
			continue
		}
		done[b.Key] = true
		if l, ok := p.ls[b.Key]; ok {
			l.setTargets(w.Targets)
			continue
		}
		l, err := p.open(w)
		if err != nil {
			errs = append(errs, fmt.Errorf("svcproxy: %v listen %d: %w", b.Key, b.Listen, err))
			continue
		}
		p.ls[b.Key] = l
	}
	return errors.Join(errs...)
}

// validate returns the valid bindings of bs by key (targets with a bad
// address dropped) and an error for each problem.
func validate(bs []Binding) (map[Key]Binding, []error) {
	want := map[Key]Binding{}
	ports := map[string]Key{}
	var errs []error
	bad := func(b Binding, f string, a ...any) {
		errs = append(errs, fmt.Errorf("svcproxy: %v listen %d: %s", b.Key, b.Listen, fmt.Sprintf(f, a...)))
	}
	for _, b := range bs {
		port := b.Protocol + "/" + strconv.Itoa(b.Listen)
		switch other, dup := ports[port]; {
		case b.Service == "":
			bad(b, "no service name")
		case b.Protocol != "tcp" && b.Protocol != "udp":
			bad(b, "protocol must be tcp or udp")
		case b.Listen < 0 || b.Listen > 65535:
			bad(b, "listen port out of range 1-65535")
		case want[b.Key].Service != "":
			bad(b, "listed twice")
		case dup && b.Listen != 0:
			bad(b, "port already used by %v", other)
		default:
			ports[port] = b.Key
			ts := make([]Target, 0, len(b.Targets))
			for _, t := range b.Targets {
				if _, _, err := net.SplitHostPort(t.Addr); err != nil {
					bad(b, "target %q (pod %q): %v", t.Addr, t.Pod, err)
					continue
				}
				ts = append(ts, t)
			}
			b.Targets = ts
			want[b.Key] = b
		}
	}
	return want, errs
}

// open opens the listener of b.
func (p *Proxy) open(b Binding) (listener, error) {
	hostport := net.JoinHostPort(p.o.Host, strconv.Itoa(b.Listen))
	base := newBinding(b)
	if b.Protocol == "udp" {
		return p.listenUDP(base, hostport)
	}
	return p.listenTCP(base, hostport)
}

// Addr returns the bound address of a key's listener, nil if none.
func (p *Proxy) Addr(k Key) net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.ls[k]; ok {
		return l.addr()
	}
	return nil
}

// Close closes every listener and connection and returns once every
// goroutine of the proxy has ended. Set fails after it.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for k, l := range p.ls {
		l.close()
		delete(p.ls, k)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// Stats returns a snapshot of every binding's counters, sorted by key and
// target.
func (p *Proxy) Stats() []Stat {
	p.mu.Lock()
	ls := make([]*binding, 0, len(p.ls))
	for _, l := range p.ls {
		ls = append(ls, l.base())
	}
	p.mu.Unlock()
	var out []Stat
	for _, b := range ls {
		out = append(out, b.stats()...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Port, b.Port),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Target, b.Target)) < 0
	})
	return out
}
