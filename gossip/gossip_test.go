package gossip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
)

// Deadlines are generous: the machine running the tests may be loaded. They
// bound a failure, they do not assert speed.
const (
	joinWithin   = 10 * time.Second
	detectWithin = 15 * time.Second
)

// startCluster starts n nodes named n0..n(n-1) with one key; each joins
// the previous one through its join list.
func startCluster(t *testing.T, n int) []*Gossip {
	t.Helper()
	key := newKey(t)
	var nodes []*Gossip
	for i := range n {
		cfg := testConfig(t, fmt.Sprintf("n%d", i), key)
		if i > 0 {
			cfg.Join = []string{nodes[i-1].LocalMember().Address()}
		}
		g := startNode(t, cfg)
		if i > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), joinWithin)
			_, err := g.Join(ctx, nil)
			cancel()
			if err != nil {
				t.Fatalf("%s join: %v", cfg.Name, err)
			}
		}
		nodes = append(nodes, g)
	}
	waitAllAlive(t, nodes)
	return nodes
}

func waitAllAlive(t *testing.T, nodes []*Gossip) {
	t.Helper()
	testutil.Eventually(t, joinWithin, "gossip to agree", func() error {
		for _, g := range nodes {
			ms := g.Members()
			alive := 0
			for _, m := range ms {
				if m.State == api.MemberAlive {
					alive++
				}
			}
			if alive != len(nodes) || g.NumMembers() != len(nodes) {
				return fmt.Errorf("%s sees %s", g.LocalMember().Name, states(g))
			}
		}
		return nil
	})
}

func TestThreeMembersSeeEachOther(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, g := range nodes {
		ms := g.Members()
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		if diff := cmp.Diff([]string{"n0", "n1", "n2"}, names); diff != "" {
			t.Errorf("%s: members (-want +got):\n%s", g.LocalMember().Name, diff)
		}
		// Every member's meta, address and port round-trip to every node.
		for _, m := range ms {
			if diff := cmp.Diff(testMeta(m.Name), m.Meta); diff != "" {
				t.Errorf("%s sees %s meta (-want +got):\n%s", g.LocalMember().Name, m.Name, diff)
			}
			if m.MetaErr != "" {
				t.Errorf("%s sees %s MetaErr %q", g.LocalMember().Name, m.Name, m.MetaErr)
			}
			if m.Addr != "127.0.0.1" || m.Port == 0 {
				t.Errorf("%s sees %s at %s", g.LocalMember().Name, m.Name, m.Address())
			}
		}
	}
	self := nodes[1].LocalMember()
	if self.Name != "n1" || self.State != api.MemberAlive || self.Port == 0 {
		t.Errorf("LocalMember = %+v", self)
	}
}

func TestUpdateMetaPropagates(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	want := testMeta("n1")
	want.Labels = map[string]string{"rack": "top", "gpio": "yes"}
	want.Version = "v2"
	if err := b.UpdateMeta(want); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	ev := waitEvent(t, a, joinWithin, func(ev Event) bool {
		return ev.Type == EventUpdate && ev.Member.Name == "n1" && ev.Member.Meta.Version == "v2"
	})
	if diff := cmp.Diff(want, ev.Member.Meta); diff != "" {
		t.Errorf("event meta (-want +got):\n%s", diff)
	}
	testutil.Eventually(t, joinWithin, "gossip to agree", func() error {
		for _, m := range a.Members() {
			if m.Name == "n1" {
				if diff := cmp.Diff(want, m.Meta); diff != "" {
					return errors.New("n0 sees n1 meta (-want +got):\n" + diff)
				}
				return nil
			}
		}
		return errors.New("n1 missing")
	})
	if diff := cmp.Diff(want, b.LocalMember().Meta); diff != "" {
		t.Errorf("local meta (-want +got):\n%s", diff)
	}
}

func TestMetaTooLarge(t *testing.T) {
	big := testMeta("x")
	for i := range 20 {
		big.Labels[fmt.Sprintf("label-%02d", i)] = strings.Repeat("v", 20)
	}

	nodes := startCluster(t, 1)
	err := nodes[0].UpdateMeta(big)
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("UpdateMeta(big) = %v, want ErrMetaTooLarge", err)
	}
	for _, want := range []string{"512", "labels", "fewer or shorter labels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if diff := cmp.Diff(testMeta("n0"), nodes[0].LocalMember().Meta); diff != "" {
		t.Errorf("meta changed after a failed update (-want +got):\n%s", diff)
	}

	cfg := testConfig(t, "big", newKey(t))
	cfg.Meta = big
	if _, err := New(cfg); !errors.Is(err, ErrConfig) || !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("New(big meta) = %v, want ErrConfig and ErrMetaTooLarge", err)
	}
}

func TestGracefulLeave(t *testing.T) {
	nodes := startCluster(t, 3)
	a, c := nodes[0], nodes[2]
	if err := c.Leave(5 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	ev := waitEvent(t, a, detectWithin, func(ev Event) bool {
		return ev.Member.Name == "n2" && ev.Type != EventJoin && ev.Type != EventUpdate
	})
	if ev.Type != EventLeave || ev.Member.State != api.MemberLeft {
		t.Fatalf("event = %s, state %s; want leave, left", ev.Type, ev.Member.State)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	testutil.Eventually(t, detectWithin, "gossip to agree", func() error {
		for _, g := range nodes[:2] {
			if s := memberState(g, "n2"); s != api.MemberLeft {
				return fmt.Errorf("%s sees %s", g.LocalMember().Name, states(g))
			}
			if g.NumMembers() != 2 {
				return fmt.Errorf("%s NumMembers = %d", g.LocalMember().Name, g.NumMembers())
			}
		}
		return nil
	})
}

func TestFailureDetected(t *testing.T) {
	nodes := startCluster(t, 3)
	c := nodes[2]
	before := time.Now()
	if err := c.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, g := range nodes[:2] {
		ev := waitEvent(t, g, detectWithin, func(ev Event) bool {
			return ev.Member.Name == "n2" && ev.Type != EventJoin && ev.Type != EventUpdate
		})
		if ev.Type != EventFail || ev.Member.State != api.MemberDead {
			t.Fatalf("%s: event = %s, state %s; want fail, dead", g.LocalMember().Name, ev.Type, ev.Member.State)
		}
		if ev.At.Before(before) {
			t.Errorf("event At %v before shutdown at %v", ev.At, before)
		}
	}
	for _, g := range nodes[:2] {
		ms := g.Members()
		if len(ms) != 3 {
			t.Fatalf("%s: dead member not kept: %s", g.LocalMember().Name, states(g))
		}
		if ms[2].State != api.MemberDead || ms[2].Since.Before(before) {
			t.Errorf("%s: n2 = %s since %v", g.LocalMember().Name, ms[2].State, ms[2].Since)
		}
		if g.NumMembers() != 2 {
			t.Errorf("%s: NumMembers = %d, want 2", g.LocalMember().Name, g.NumMembers())
		}
	}
	// A shut-down node's channel is closed (this loop ends).
	for range c.Events() {
	}
}

func TestWrongKeyCannotJoin(t *testing.T) {
	nodes := startCluster(t, 1)
	a := nodes[0]
	intruder := startNode(t, testConfig(t, "intruder", newKey(t)))
	attempts := 0
	intruder.joinAttempt = func(error) { attempts++ }

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := intruder.Join(ctx, []string{a.LocalMember().Address()})
	if !errors.Is(err, ErrJoin) || n != 0 {
		t.Fatalf("Join with the wrong key = %d, %v; want 0, ErrJoin", n, err)
	}
	if attempts < 2 {
		t.Errorf("Join made %d attempts, want retries", attempts)
	}
	if got := a.NumMembers(); got != 1 {
		t.Errorf("cluster NumMembers = %d (%s), want 1", got, states(a))
	}
	if got := intruder.NumMembers(); got != 1 {
		t.Errorf("intruder NumMembers = %d (%s), want 1", got, states(intruder))
	}

	// A plain memberlist without any key cannot join either.
	mc := DefaultLocalConfig().memberlistConfig()
	mc.Name = "plain"
	mc.SecretKey = nil
	mc.Delegate = garbageDelegate{meta: []byte("{}")}
	mc.Logger = newMemberlistLogger(newTestLogger(t))
	plain, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Shutdown() })
	if n, err := plain.Join([]string{a.LocalMember().Address()}); err == nil || n != 0 {
		t.Errorf("unencrypted join = %d, %v; want an error", n, err)
	}
	if got := a.NumMembers(); got != 1 {
		t.Errorf("cluster NumMembers after unencrypted join = %d (%s), want 1", got, states(a))
	}
}

// garbageDelegate announces metadata that is not a Meta.
type garbageDelegate struct{ meta []byte }

func (d garbageDelegate) NodeMeta(int) []byte             { return d.meta }
func (d garbageDelegate) NotifyMsg([]byte)                {}
func (d garbageDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d garbageDelegate) LocalState(bool) []byte          { return nil }
func (d garbageDelegate) MergeRemoteState([]byte, bool)   {}

func TestGarbageMetaIsReportedNotFatal(t *testing.T) {
	key := newKey(t)
	a := startNode(t, testConfig(t, "a", key))

	for _, tc := range []struct{ name, meta string }{
		{"junk", "\xff\x00 definitely not json"},
		{"wrongtypes", `{"c":"four","b":[1]}`},
		{"empty", ""},
	} {
		mc := DefaultLocalConfig().memberlistConfig()
		mc.Name = tc.name
		mc.SecretKey = key
		mc.Delegate = garbageDelegate{meta: []byte(tc.meta)}
		mc.Logger = newMemberlistLogger(newTestLogger(t))
		raw, err := memberlist.Create(mc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Shutdown() })
		if _, err := raw.Join([]string{a.LocalMember().Address()}); err != nil {
			t.Fatalf("%s: raw join: %v", tc.name, err)
		}
	}
	testutil.Eventually(t, joinWithin, "gossip to agree", func() error {
		if a.NumMembers() != 4 {
			return errors.New(states(a))
		}
		return nil
	})
	for _, m := range a.Members() {
		if m.Name == "a" {
			continue
		}
		if m.MetaErr == "" || m.State != api.MemberAlive {
			t.Errorf("%s: state %s, MetaErr %q; want alive with a decode error", m.Name, m.State, m.MetaErr)
		}
		if diff := cmp.Diff(Meta{}, m.Meta); diff != "" {
			t.Errorf("%s: meta should be zero (-want +got):\n%s", m.Name, diff)
		}
	}
}

func TestJoinRetriesUntilSeedComesUp(t *testing.T) {
	key := newKey(t)
	seedAddr := testutil.FreeAddr(t)
	host, portStr, _ := net.SplitHostPort(seedAddr)
	port, _ := strconv.Atoi(portStr)

	b := startNode(t, testConfig(t, "b", key))
	failed := make(chan struct{}, 1)
	b.joinAttempt = func(error) {
		select {
		case failed <- struct{}{}:
		default:
		}
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), joinWithin)
	defer cancel()
	go func() {
		n, err := b.Join(ctx, []string{seedAddr})
		done <- result{n, err}
	}()

	select {
	case <-failed:
	case r := <-done:
		t.Fatalf("Join returned %d, %v before the seed existed", r.n, r.err)
	}
	cfg := testConfig(t, "a", key)
	cfg.BindAddr, cfg.BindPort = host, port
	a := startNode(t, cfg)

	r := <-done
	if r.err != nil || r.n != 1 {
		t.Fatalf("Join = %d, %v; want 1, nil", r.n, r.err)
	}
	waitAllAlive(t, []*Gossip{a, b})
}

func TestJoinErrors(t *testing.T) {
	g := startNode(t, testConfig(t, "a", newKey(t)))
	if _, err := g.Join(context.Background(), nil); !errors.Is(err, ErrJoin) {
		t.Errorf("Join with no addresses = %v, want ErrJoin", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Join(ctx, []string{testutil.FreeAddr(t)}); !errors.Is(err, ErrJoin) || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("Join with a cancelled ctx = %v, want ErrJoin naming the cancellation", err)
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
	if _, err := g.Join(context.Background(), []string{"127.0.0.1:1"}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Join after Shutdown = %v, want ErrShutdown", err)
	}
	if err := g.UpdateMeta(testMeta("a")); !errors.Is(err, ErrShutdown) {
		t.Errorf("UpdateMeta after Shutdown = %v, want ErrShutdown", err)
	}
}

func TestClockStampsSince(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := testConfig(t, "a", newKey(t))
	cfg.Clock = clocktest.New(at)
	g := startNode(t, cfg)
	if got := g.LocalMember().Since; !got.Equal(at) {
		t.Errorf("Since = %v, want %v", got, at)
	}
	ev := <-g.Events()
	if ev.Type != EventJoin || ev.Member.Name != "a" || !ev.At.Equal(at) {
		t.Errorf("first event = %+v, want own join at %v", ev, at)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := testConfig(t, "Bad_Name", []byte("short"))
	_, err := New(cfg)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New = %v, want ErrConfig", err)
	}
}

func TestStateChanges(t *testing.T) {
	prev := map[string]api.MemberState{"a": api.MemberAlive, "b": api.MemberAlive, "c": api.MemberDead}
	now := map[string]api.MemberState{"a": api.MemberAlive, "b": api.MemberDead, "d": api.MemberAlive}
	if diff := cmp.Diff([]string{"b", "c", "d"}, StateChanges(prev, now)); diff != "" {
		t.Errorf("StateChanges (-want +got):\n%s", diff)
	}
	if got := StateChanges(now, now); len(got) != 0 {
		t.Errorf("StateChanges of equal maps = %v", got)
	}
	ms := []Member{{Name: "a", State: api.MemberAlive}, {Name: "b", State: api.MemberLeft}}
	if diff := cmp.Diff(map[string]api.MemberState{"a": api.MemberAlive, "b": api.MemberLeft}, States(ms)); diff != "" {
		t.Errorf("States (-want +got):\n%s", diff)
	}
}

// muteUDP drops every outgoing UDP packet once mute is set: a node whose
// gossip copies all get lost.
type muteUDP struct {
	memberlist.NodeAwareTransport
	mute *atomic.Bool
}

func (t *muteUDP) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.mute.Load() {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *muteUDP) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.mute.Load() {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

// A server that missed every gossiped copy of a leave still reports it as
// a leave, not a failure: Leave syncs its flag with the servers over TCP
// (a server that took it for a failure would keep a departed server in
// Raft's configuration).
func TestLeaveReachesServersOverTCP(t *testing.T) {
	key := newKey(t)
	srv := testConfig(t, "n0", key)
	srv.Meta.Server = true
	srv.Meta.RaftAddr = "127.0.0.1:7001"
	s := startNode(t, srv)
	var mute atomic.Bool
	cfg := testConfig(t, "n1", key)
	cfg.Join = []string{s.LocalMember().Address()}
	cfg.wrapTransport = func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
		return &muteUDP{NodeAwareTransport: nt, mute: &mute}
	}
	c := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), joinWithin)
	defer cancel()
	if _, err := c.Join(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitAllAlive(t, []*Gossip{s, c})

	mute.Store(true)
	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ev := waitEvent(t, s, detectWithin, func(ev Event) bool {
		return ev.Member.Name == "n1" && (ev.Type == EventLeave || ev.Type == EventFail)
	})
	if ev.Type != EventLeave || ev.Member.State != api.MemberLeft {
		t.Fatalf("event = %s, state %s; want leave, left", ev.Type, ev.Member.State)
	}
}

// TestPing: an alive member's agent answers a ping; a stopped one does
// not, and a name gossip does not know alive fails at once.
func TestPing(t *testing.T) {
	nodes := startCluster(t, 3)
	// One ping may miss its probe timeout on a loaded machine (qemu):
	// an alive member answers one of them.
	testutil.Eventually(t, 10*time.Second, "gossip to agree", func() error {
		if rtt, err := nodes[0].Ping("n1"); err != nil || rtt <= 0 {
			return fmt.Errorf("Ping(n1) = %v, %v; want a round trip", rtt, err)
		}
		return nil
	})
	if _, err := nodes[0].Ping("nobody"); err == nil {
		t.Error("Ping of an unknown member succeeded")
	}
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].Ping("n2"); err == nil {
		t.Error("Ping of a stopped member succeeded")
	}
}
