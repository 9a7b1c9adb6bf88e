package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
)

var (
	// ErrShutdown is returned by operations on a Gossip after Shutdown.
	ErrShutdown = errors.New("gossip: shut down")
	// ErrJoin is returned (wrapped) when Join gives up.
	ErrJoin = errors.New("gossip: join failed")
)

// Member is one node of the cluster as this node sees it.
type Member struct {
	Name string
	// Addr is the advertised IP address.
	Addr string
	// Port is the advertised gossip port.
	Port int
	// State is api.MemberAlive, MemberDead or MemberLeft. There is no
	// suspicion: memberlist offers no callback for it and its Members()
	// hands out pointers that it keeps mutating under its own lock, so
	// reading it would be a data race. A suspect member is reported alive
	// until it is declared dead (see LANTiming for how long that takes).
	State api.MemberState
	// Since is when this node saw State begin (Config.Clock).
	Since time.Time
	// Meta is the member's decoded metadata; zero if MetaErr is set.
	Meta Meta
	// MetaErr is why the member's metadata did not decode, "" if it did.
	MetaErr string
}

// Address returns "Addr:Port", suitable for Join.
func (m Member) Address() string {
	return net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))
}

func (m Member) clone() Member {
	m.Meta = m.Meta.clone()
	return m
}

// Gossip is a running cluster membership: this node's memberlist plus a
// table of every member seen (alive, dead and left). All methods are safe
// for concurrent use.
type Gossip struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	jitter func() float64 // cfg.Jitter or math/rand/v2
	ml     *memberlist.Memberlist

	// metaMu guards metaBytes, read by memberlist through NodeMeta, and
	// meta/leaving, from which metaBytes is encoded.
	metaMu    sync.Mutex
	metaBytes []byte
	meta      Meta
	leaving   bool
	// updateMu serialises UpdateMeta (it must not hold metaMu while
	// memberlist calls back into NodeMeta).
	updateMu sync.Mutex

	// mu guards table. Never held while calling into memberlist: memberlist
	// calls the event delegate with its own lock held.
	mu    sync.Mutex
	table map[string]Member

	events *eventQueue
	counts counters
	// msgs queues received user messages for Config.OnMessage (nil when
	// unset); dropped counts the ones that did not fit.
	msgs    chan message
	msgStop chan struct{}
	dropped atomic.Uint64
	closed  atomic.Bool
	// lifeMu keeps Leave and Shutdown apart: memberlist panics on a leave
	// after shutdown.
	lifeMu sync.Mutex

	// joinAttempt, if set (tests), is called after each failed join attempt.
	joinAttempt func(err error)
}

// New validates cfg, starts memberlist listening on cfg.BindAddr:BindPort
// and returns the running Gossip. It does not join anyone: call Join.
func New(cfg Config) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metaBytes, err := EncodeMeta(cfg.Meta)
	if err != nil {
		return nil, err // unreachable: Validate encoded it
	}
	cfg.Key = append([]byte(nil), cfg.Key...)
	cfg.AcceptKeys = slices.Clone(cfg.AcceptKeys)
	cfg.Join = slices.Clone(cfg.Join)
	cfg.Meta = cfg.Meta.clone()
	g := &Gossip{
		cfg:       cfg,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		jitter:    cfg.Jitter,
		metaBytes: metaBytes,
		meta:      cfg.Meta,
		table:     make(map[string]Member),
		events:    newEventQueue(64),
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.log = g.log.With("node", cfg.Name)
	if g.clock == nil {
		g.clock = clock.RealClock()
	}
	if g.jitter == nil {
		g.jitter = rand.Float64
	}

	mc := cfg.memberlistConfig()
	mc.Logger = newMemberlistLogger(g.log)
	d := &delegate{g: g}
	mc.Delegate = d
	mc.Events = d
	mc.Conflict = d
	mc.Ping = d
	tr, err := newTransport(mc.BindAddr, mc.BindPort, g.log)
	if err != nil {
		return nil, fmt.Errorf("gossip: listen on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	if mc.BindPort == 0 {
		mc.BindPort = tr.Port()
		mc.AdvertisePort = tr.Port()
	}
	mc.Transport = tr
	if cfg.wrapTransport != nil {
		mc.Transport = cfg.wrapTransport(tr)
	}

	go g.events.run()
	if cfg.OnMessage != nil {
		g.msgs = make(chan message, messageQueue)
		g.msgStop = make(chan struct{})
		go g.deliver(g.msgs, g.msgStop)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		tr.Shutdown()
		g.events.close()
		g.closeMessages()
		return nil, fmt.Errorf("gossip: start memberlist on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	g.ml = ml
	self := g.LocalMember()
	g.log.Debug("gossip started", "addr", self.Address())
	return g, nil
}

// Join contacts the given addresses ("host:port", or "host" for the
// configured BindPort), or cfg.Join when addrs is empty, and retries with
// exponential backoff (100ms doubling to 5s, jittered) until at least one
// succeeds or ctx ends. It returns how many addresses were contacted in the
// successful attempt. One attempt can outlast ctx by up to Timing.TCPTimeout
// per unreachable address, since memberlist's join is not cancellable.
func (g *Gossip) Join(ctx context.Context, addrs []string) (int, error) {
	if g.closed.Load() {
		return 0, ErrShutdown
	}
	if len(addrs) == 0 {
		addrs = g.cfg.Join
	}
	if len(addrs) == 0 {
		return 0, fmt.Errorf("%w: no addresses to join (Config.Join is empty)", ErrJoin)
	}
	const maxWait = 5 * time.Second
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		n, err := g.ml.Join(addrs)
		if n > 0 {
			g.log.Debug("gossip joined", "contacted", n, "attempt", attempt)
			return n, nil
		}
		if err == nil {
			err = errors.New("no address answered")
		}
		g.log.Debug("gossip join attempt failed", "attempt", attempt, "addrs", addrs, "err", err)
		if g.joinAttempt != nil {
			g.joinAttempt(err)
		}
		if g.closed.Load() {
			return 0, ErrShutdown
		}
		// Jitter in [0.8, 1.2) so that boards powered on together do not
		// retry in lockstep.
		d := spread(wait, g.jitter())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: %v after %d attempts: %v", ErrJoin, ctx.Err(), attempt, err)
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
	}
}

// Members returns every member this node knows of, itself included, sorted
// by name: alive ones and, for Config.DeadRetention, dead and left ones.
func (g *Gossip) Members() []Member {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Member, 0, len(g.table))
	for name, m := range g.table {
		if m.State != api.MemberAlive && g.cfg.DeadRetention > 0 && now.Sub(m.Since) > g.cfg.DeadRetention {
			delete(g.table, name)
			continue
		}
		out = append(out, m.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ping sends the alive member name one gossip ping and waits for its ack
// (answered by that member's agent, over UDP) for at most the probe
// timeout, returning the round trip. It fails at once for a member not
// known alive here.
func (g *Gossip) Ping(name string) (time.Duration, error) {
	g.mu.Lock()
	m, ok := g.table[name]
	g.mu.Unlock()
	if !ok || m.State != api.MemberAlive {
		return 0, fmt.Errorf("gossip: ping %s: not an alive member", name)
	}
	ip := net.ParseIP(m.Addr)
	if ip == nil {
		return 0, fmt.Errorf("gossip: ping %s: address %q is not an IP", name, m.Addr)
	}
	return g.ml.Ping(name, &net.UDPAddr{IP: ip, Port: m.Port})
}

// NumMembers returns the number of alive members, this node included.
func (g *Gossip) NumMembers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.table {
		if m.State == api.MemberAlive {
			n++
		}
	}
	return n
}

// LocalMember returns this node as the cluster sees it.
func (g *Gossip) LocalMember() Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.table[g.cfg.Name].clone()
}

// Events returns the channel of membership changes, this node's own join
// first. There is one channel per Gossip (every call returns the same one),
// closed by Shutdown. It is buffered and never blocks memberlist: while the
// consumer is slow, events for the same member are coalesced into the
// latest, so a consumer should treat an event as "re-read Members for this
// name". Nobody reading is fine too: the backlog stays one event per member.
func (g *Gossip) Events() <-chan Event {
	return g.events.out
}

// UpdateMeta replaces this node's metadata and gossips the change. The new
// Meta must encode to at most MetaMaxSize bytes (ErrMetaTooLarge otherwise,
// and nothing changes). The local change is immediate; the error also
// reports when the broadcast was not sent within Timing.TCPTimeout (it
// still spreads by later gossip and push/pull).
func (g *Gossip) UpdateMeta(m Meta) error {
	if g.closed.Load() {
		return ErrShutdown
	}
	b, err := EncodeMeta(m)
	if err != nil {
		return err
	}
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	g.metaMu.Lock()
	if g.leaving {
		g.metaMu.Unlock()
		return fmt.Errorf("gossip: update metadata: node is leaving")
	}
	g.meta = m.clone()
	g.metaBytes = b
	g.metaMu.Unlock()
	if err := g.ml.UpdateNode(g.cfg.Timing.TCPTimeout); err != nil {
		return fmt.Errorf("gossip: update metadata: %w", err)
	}
	return nil
}

// Leave announces that this node leaves the cluster, waiting up to timeout
// for each of its two gossiped steps (and up to Timing.TCPTimeout for a
// direct sync with the servers between them, see pushLeavingToServers). Others then see it as left
// (EventLeave) rather than dead. Call Shutdown afterwards.
//
// memberlist reports a leave and a death through the same callback, so
// Leave first gossips a "leaving" flag in this node's metadata and only
// then memberlist's leave; a peer that missed every copy of the flag (rare:
// it is sent Timing.RetransmitMult times and repeated by push/pull) reports
// the leave as a failure.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.lifeMu.Lock()
	defer g.lifeMu.Unlock()
	if g.closed.Load() {
		return ErrShutdown
	}
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	g.metaMu.Lock()
	b, err := encodeMeta(g.meta, true)
	if err == nil {
		g.leaving = true
		g.metaBytes = b
	}
	g.metaMu.Unlock()
	if err != nil {
		return fmt.Errorf("gossip: leave: %w", err) // unreachable: the flag fits by construction
	}
	if err := g.ml.UpdateNode(timeout); err != nil {
		g.log.Warn("gossip leave flag not fully gossiped; some peers may report a failure", "err", err)
	}
	g.pushLeavingToServers()
	if err := g.ml.Leave(timeout); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// maxLeavePushes bounds the servers a leaving node syncs with directly.
const maxLeavePushes = 7

// pushLeavingToServers makes sure the alive servers (at most
// maxLeavePushes) hold this node's leaving flag before the leave itself
// goes out, by one push/pull over TCP with each, in parallel (memberlist's
// Join; each bounded by Timing.TCPTimeout). The flag's UDP copies nearly
// always get there first, but a server that missed them would take the
// leave for a failure and keep a server that left in Raft's
// configuration; a worker that misses it only shows "dead" for a while.
// A server that does not answer is skipped: the gossiped flag may still
// reach it.
func (g *Gossip) pushLeavingToServers() {
	var addrs []string
	for _, m := range g.Members() {
		if m.Name != g.cfg.Name && m.State == api.MemberAlive && m.Meta.Server && len(addrs) < maxLeavePushes {
			addrs = append(addrs, m.Address())
		}
	}
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() {
			if _, err := g.ml.Join([]string{a}); err != nil {
				g.log.Debug("gossip leave: sync with server failed", "addr", a, "err", err)
			}
		})
	}
	wg.Wait()
}

// Shutdown stops gossiping and listening without announcing anything (the
// others will declare this node dead unless Leave came first) and closes
// the Events channel. It is safe to call more than once; Members still
// returns the last known table afterwards. A Leave in progress finishes
// first.
func (g *Gossip) Shutdown() error {
	g.lifeMu.Lock()
	defer g.lifeMu.Unlock()
	if g.closed.Swap(true) {
		return nil
	}
	err := g.ml.Shutdown()
	g.events.close()
	g.closeMessages()
	if err != nil {
		return fmt.Errorf("gossip: shutdown: %w", err)
	}
	return nil
}

// observe records what memberlist told the delegate and queues the event.
// It is called with memberlist's node lock held: it must not call into
// memberlist.
func (g *Gossip) observe(n *memberlist.Node, typ EventType) {
	now := g.clock.Now()
	m := Member{
		Name: n.Name,
		Addr: n.Addr.String(),
		Port: int(n.Port),
	}
	switch typ {
	case EventJoin, EventUpdate:
		m.State = api.MemberAlive
	case EventLeave:
		m.State = api.MemberLeft
	case EventFail:
		m.State = api.MemberDead
	}
	meta, _, err := decodeMeta(n.Meta)
	if err != nil {
		m.MetaErr = err.Error()
	} else {
		m.Meta = meta
	}

	g.mu.Lock()
	prev, had := g.table[n.Name]
	m.Since = now
	if had && prev.State == m.State {
		m.Since = prev.Since
	}
	metaChanged := !had || prev.MetaErr != m.MetaErr
	g.table[n.Name] = m
	g.mu.Unlock()

	if err != nil && metaChanged {
		g.log.Warn("gossip member has unreadable metadata", "member", n.Name, "addr", m.Address(), "err", err)
	}
	if typ != EventUpdate || !had || prev.State != m.State {
		g.log.Debug("gossip member "+typ.String(), "member", n.Name, "addr", m.Address())
	}
	g.counts.count(typ)
	g.events.push(Event{Type: typ, Member: m.clone(), At: now})
}

// delegate implements memberlist's Delegate, EventDelegate and
// ConflictDelegate for a Gossip. memberlist calls the event methods one at a
// time, with its node lock held.
type delegate struct {
	g *Gossip
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate.
func (d *delegate) NodeMeta(limit int) []byte {
	d.g.metaMu.Lock()
	defer d.g.metaMu.Unlock()
	if len(d.g.metaBytes) > limit {
		// EncodeMeta enforces MetaMaxSize; memberlist would panic on more.
		return nil
	}
	return d.g.metaBytes
}

// GetBroadcasts implements memberlist.Delegate; herd has none.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate; herd has no extra state.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.g.observe(n, EventJoin) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.g.observe(n, EventUpdate) }

// NotifyLeave implements memberlist.EventDelegate. memberlist reports both a
// graceful leave and a death here, and n.State does not tell them apart
// (memberlist keeps the real state in a field it does not pass on), so the
// leaving flag that Gossip.Leave puts in the metadata does.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	if _, leaving, err := decodeMeta(n.Meta); err == nil && leaving {
		d.g.observe(n, EventLeave)
		return
	}
	d.g.observe(n, EventFail)
}

// NotifyConflict implements memberlist.ConflictDelegate: two boards claim
// the same name.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.g.log.Warn("gossip name conflict: two nodes use the same name",
		"member", existing.Name, "addr", existing.Address(), "otherAddr", other.Address())
}

// States maps each member's name to its state.
func States(ms []Member) map[string]api.MemberState {
	out := make(map[string]api.MemberState, len(ms))
	for _, m := range ms {
		out[m.Name] = m.State
	}
	return out
}

// StateChanges returns, sorted, the names whose state differs between two
// States maps: changed, appeared or gone.
func StateChanges(prev, now map[string]api.MemberState) []string {
	var changed []string
	for name, st := range now {
		if prev[name] != st {
			changed = append(changed, name)
		}
	}
	for name := range prev {
		if _, ok := now[name]; !ok {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}
