package raftstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustTxn(t *testing.T, s *Store, ops ...Op) []api.RawObject {
	t.Helper()
	objs, err := s.Txn(ctxTimeout(t, 15*time.Second), ops)
	if err != nil {
		t.Fatalf("txn on %s: %v", s.NodeID(), err)
	}
	return objs
}

func deployment(name, spec string) api.RawObject {
	return obj(api.KindDeployment, name, 0, spec, "", nil)
}

// waitObject waits until s holds kind/name with at least resourceVersion rv.
func waitObject(t *testing.T, s *Store, kind api.Kind, name string, rv uint64) api.RawObject {
	t.Helper()
	var o api.RawObject
	testutil.Until(t, 15*time.Second, fmt.Sprintf("%s to have %s/%s at RV %d", s.NodeID(), kind, name, rv), func() bool {
		var err error
		o, err = s.Get(kind, name)
		return err == nil && o.Metadata.ResourceVersion >= rv
	})
	return o
}

func TestClusterElectsLeader(t *testing.T) {
	c := NewTestCluster(t, 3)
	leader := c.Leader()
	for i, s := range c.Stores {
		if got := s.IsLeader(); got != (i == leader) {
			t.Errorf("server %d IsLeader %v", i, got)
		}
		if err := s.WaitForLeader(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Errorf("server %d: %v", i, err)
		}
	}
	wantID := c.Configs[leader].NodeID
	testutil.Until(t, 10*time.Second, "every server to know the leader", func() bool {
		for _, s := range c.Stores {
			if id, addr := s.Leader(); id != wantID || addr != c.Stores[leader].Addr() {
				return false
			}
		}
		return true
	})
	got, err := c.Stores[c.Follower()].Configuration()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c.Servers(), got); d != "" {
		t.Errorf("configuration (-want +got):\n%s", d)
	}
	st := c.Stores[leader].Stats()
	if st.State != "Leader" || st.LeaderID != wantID || st.Term == 0 {
		t.Errorf("leader stats %+v", st)
	}
}

func TestClusterForwardsWritesFromFollowers(t *testing.T) {
	c := NewTestCluster(t, 3)
	f := c.Stores[c.Follower()]

	objs := mustTxn(t, f, op(OpCreate, deployment("web", `{"replicas":1}`)))
	rv := objs[0].Metadata.ResourceVersion
	if rv == 0 || objs[0].Metadata.Generation != 1 || objs[0].Metadata.Created.IsZero() {
		t.Fatalf("forwarded create returned %+v", objs[0].Metadata)
	}
	// Read-your-writes on the follower that forwarded.
	if got, err := f.Get(api.KindDeployment, "web"); err != nil || got.Metadata.ResourceVersion != rv {
		t.Fatalf("follower Get right after its Txn: %+v, %v", got.Metadata, err)
	}
	for _, s := range c.Stores {
		waitObject(t, s, api.KindDeployment, "web", rv)
	}

	// Typed errors survive the trip to the leader and back.
	tests := []struct {
		name string
		ops  []Op
		want error
		msg  string
	}{
		{"exists", []Op{op(OpCreate, deployment("web", `{}`))}, ErrExists, "raftstore: already exists: deployments/web"},
		{"not found", []Op{op(OpUpdate, deployment("nope", `{}`))}, ErrNotFound, "raftstore: not found: deployments/nope"},
		{"conflict", []Op{op(OpUpdate, obj(api.KindDeployment, "web", rv+100, `{}`, "", nil))}, ErrConflict,
			fmt.Sprintf("raftstore: conflict: deployments/web: have %d, got %d", rv, rv+100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Txn(ctxTimeout(t, 10*time.Second), tt.ops)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if err.Error() != tt.msg {
				t.Errorf("message %q, want %q", err, tt.msg)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		// Local validation catches this before forwarding; send it raw.
		addr := c.Stores[c.Leader()].Addr()
		_, _, err := f.forward(ctxTimeout(t, 10*time.Second), addr, []Op{{Type: "upsert", Object: deployment("web", `{}`)}}, "")
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("err %v, want ErrInvalid", err)
		}
	})

	// A multi-op CAS transaction from the follower.
	objs = mustTxn(t, f,
		op(OpUpdate, obj(api.KindDeployment, "web", rv, `{"replicas":3}`, "", nil)),
		op(OpCreate, obj(api.KindPod, "web-1", 0, `{}`, "", nil)))
	if objs[0].Metadata.Generation != 2 || objs[1].Metadata.ResourceVersion != objs[0].Metadata.ResourceVersion {
		t.Errorf("txn result %+v", objs)
	}
	for _, s := range c.Stores {
		waitObject(t, s, api.KindPod, "web-1", objs[1].Metadata.ResourceVersion)
	}
}

func TestClusterWatchAcrossServers(t *testing.T) {
	c := NewTestCluster(t, 3)
	leader, follower := c.Stores[c.Leader()], c.Stores[c.Follower()]
	mustTxn(t, leader, op(OpCreate, deployment("a", `{}`)))
	_, rv, err := leader.List(api.KindDeployment)
	if err != nil {
		t.Fatal(err)
	}
	// Watch on the follower from the leader's index: it may lag, but it
	// must deliver exactly what comes after rv.
	ch, err := follower.Watch(t.Context(), api.KindDeployment, rv)
	if err != nil {
		t.Fatal(err)
	}
	mustTxn(t, leader, op(OpCreate, deployment("b", `{}`)))
	mustTxn(t, follower, op(OpDelete, deployment("a", "")))
	got := recv(t, ch, 2)
	if got[0].Name != "b" || got[0].Type != api.EventAdded || got[1].Name != "a" || got[1].Type != api.EventDeleted {
		t.Errorf("events %v", got)
	}
}

func TestClusterLeaderFailover(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	for i := range 5 {
		mustTxn(t, c.Stores[old], op(OpCreate, deployment(fmt.Sprintf("d%d", i), `{}`)))
	}
	want, _, _ := c.Stores[old].List("")

	var subs []<-chan bool
	for i, s := range c.Stores {
		if i != old {
			ch, cancel := s.LeadershipChanges()
			t.Cleanup(cancel)
			subs = append(subs, ch)
		}
	}
	c.Stop(old)
	leader := c.Leader()
	if leader == old {
		t.Fatal("stopped server still leader")
	}
	got, _, err := c.Stores[leader].List("")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, rawCmp); d != "" {
		t.Errorf("state on the new leader (-want +got):\n%s", d)
	}
	// Exactly one remaining subscriber was told it leads.
	testutil.Until(t, 10*time.Second, "the new leader's subscriber to see true", func() bool {
		n := 0
		for _, ch := range subs {
			select {
			case v := <-ch:
				if v {
					n++
				}
			default:
			}
		}
		return n == 1
	})
	// Writes work on both survivors.
	for _, s := range c.Stores {
		if s != nil {
			mustTxn(t, s, op(OpCreate, deployment("after-"+s.NodeID(), `{}`)))
		}
	}
}

func TestClusterRestartFromDisk(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 3, OnDisk: true, Configure: func(i int, cfg *Config) {
		cfg.SnapshotThreshold = 8 // exercise snapshots on disk too
		cfg.TrailingLogs = 4
		cfg.SnapshotInterval = 50 * time.Millisecond
	}})
	leader := c.Stores[c.Leader()]
	for i := range 20 {
		mustTxn(t, leader, op(OpCreate, deployment(fmt.Sprintf("before-%d", i), `{}`)))
	}
	f := c.Follower()
	waitObject(t, c.Stores[f], api.KindDeployment, "before-19", 1)
	c.Stop(f)
	var last api.RawObject
	for i := range 20 {
		last = mustTxn(t, c.Stores[c.Leader()], op(OpCreate, deployment(fmt.Sprintf("while-down-%d", i), `{}`)))[0]
	}
	s := c.Restart(f)
	waitObject(t, s, api.KindDeployment, "while-down-19", last.Metadata.ResourceVersion)
	want, _, _ := c.Stores[c.Leader()].List("")
	got, _, _ := s.List("")
	if d := cmp.Diff(want, got, rawCmp); d != "" {
		t.Errorf("restarted follower (-want +got):\n%s", d)
	}

	// The whole cluster restarts from disk with its state.
	for i := range c.Stores {
		c.Stop(i)
	}
	for i := range c.Stores {
		c.Restart(i)
	}
	c.Leader()
	for i, s := range c.Stores {
		if ok, err := s.HasExistingState(); !ok || err != nil {
			t.Errorf("server %d HasExistingState %v, %v", i, ok, err)
		}
		waitObject(t, s, api.KindDeployment, "while-down-19", last.Metadata.ResourceVersion)
		got, _, _ := s.List("")
		if d := cmp.Diff(want, got, rawCmp); d != "" {
			t.Errorf("server %d after full restart (-want +got):\n%s", i, d)
		}
	}
}

func TestClusterAddNonvoterCatchesUp(t *testing.T) {
	c := NewTestCluster(t, 1)
	leader := c.Stores[0]
	mustTxn(t, leader, op(OpCreate, deployment("web", `{}`)))

	cfg := TestConfig(t, "late", c.Key)
	late, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Close() })
	if ok, err := late.HasExistingState(); ok || err != nil {
		t.Fatalf("new server HasExistingState %v, %v", ok, err)
	}
	if err := late.AddNonvoter("x", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
		t.Errorf("AddNonvoter on a non-leader: %v, want ErrNotLeader", err)
	}
	if err := leader.AddNonvoter("late", late.Addr()); err != nil {
		t.Fatal(err)
	}
	waitObject(t, late, api.KindDeployment, "web", 1)
	// The non-voter forwards writes too.
	mustTxn(t, late, op(OpCreate, deployment("from-late", `{}`)))
	waitObject(t, leader, api.KindDeployment, "from-late", 1)

	servers, err := leader.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{{ID: "node0", Address: leader.Addr(), Voter: true}, {ID: "late", Address: late.Addr(), Voter: false}}
	if d := cmp.Diff(want, servers); d != "" {
		t.Errorf("configuration (-want +got):\n%s", d)
	}
	if err := leader.RemoveServer("late"); err != nil {
		t.Fatal(err)
	}
	servers, _ = leader.Configuration()
	if len(servers) != 1 {
		t.Errorf("configuration after remove: %+v", servers)
	}
}

func TestWrongClusterKeyCannotJoinOrConnect(t *testing.T) {
	c := NewTestCluster(t, 1)
	leader := c.Stores[0]
	mustTxn(t, leader, op(OpCreate, deployment("secret", `{"token":"x"}`)))

	intruder, err := Open(TestConfig(t, "intruder", TestKey("some other key")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { intruder.Close() })
	honest, err := Open(TestConfig(t, "honest", c.Key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { honest.Close() })

	// The intruder cannot talk to the leader at all.
	if _, _, err := intruder.forward(ctxTimeout(t, 5*time.Second), leader.Addr(), []Op{op(OpCreate, deployment("evil", `{}`))}, ""); err == nil {
		t.Fatal("forward with the wrong key succeeded")
	}
	if conn, err := intruder.mux.dial(ctxTimeout(t, 5*time.Second), leader.Addr(), protoRaft); err == nil {
		conn.Close()
		t.Error("raft dial with the wrong key completed the handshake")
	}
	// Even if the leader adds it, it never receives the log, while an
	// honest server added at the same time does.
	if err := leader.AddNonvoter("intruder", intruder.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := leader.AddNonvoter("honest", honest.Addr()); err != nil {
		t.Fatal(err)
	}
	waitObject(t, honest, api.KindDeployment, "secret", 1)
	if _, err := intruder.Get(api.KindDeployment, "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("intruder read the state: %v", err)
	}
	if st := intruder.Stats(); st.LastLogIndex != 0 || st.LeaderID != "" {
		t.Errorf("intruder received raft traffic: %+v", st)
	}
	if _, err := leader.Get(api.KindDeployment, "evil"); !errors.Is(err, ErrNotFound) {
		t.Errorf("intruder wrote: %v", err)
	}
	if _, err := intruder.Txn(ctxTimeout(t, time.Second), []Op{op(OpCreate, deployment("evil", `{}`))}); !errors.Is(err, ErrNoLeader) {
		t.Errorf("intruder Txn: %v, want ErrNoLeader", err)
	}
}

func TestTxnWithoutLeader(t *testing.T) {
	s, err := Open(TestConfig(t, "alone", TestKey("alone")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Txn(ctxTimeout(t, 300*time.Millisecond), []Op{op(OpCreate, deployment("a", `{}`))})
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want ErrNoLeader and DeadlineExceeded", err)
	}
	if err := s.WaitForLeader(ctxTimeout(t, 100*time.Millisecond)); !errors.Is(err, ErrNoLeader) {
		t.Errorf("WaitForLeader: %v", err)
	}
	if err := s.Barrier(ctxTimeout(t, time.Second)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Barrier on a non-leader: %v, want ErrNotLeader", err)
	}
}

func TestTxnValidatesLocally(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 1, Configure: func(_ int, cfg *Config) { cfg.MaxTxnBytes = 2048 }})
	s := c.Stores[0]
	tests := []struct {
		name string
		ops  []Op
	}{
		{"empty", nil},
		{"unknown kind", []Op{op(OpCreate, obj("widgets", "a", 0, "", "", nil))}},
		{"empty name", []Op{op(OpCreate, obj(api.KindPod, "", 0, "", "", nil))}},
		{"bad JSON spec", []Op{op(OpCreate, obj(api.KindPod, "a", 0, "{nope", "", nil))}},
		{"too large", []Op{op(OpCreate, obj(api.KindPod, "a", 0, `"`+strings.Repeat("x", 4096)+`"`, "", nil))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Txn(t.Context(), tt.ops); !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := s.Get("widgets", "a"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Get of an unknown kind: %v", err)
	}
	if _, err := s.Watch(t.Context(), "widgets", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Watch of an unknown kind: %v", err)
	}
}

func TestLeadershipChangesManySubscribers(t *testing.T) {
	c := NewTestCluster(t, 1)
	s := c.Stores[0]
	a, cancelA := s.LeadershipChanges()
	b, cancelB := s.LeadershipChanges()
	defer cancelB()
	for _, ch := range []<-chan bool{a, b} {
		if v := <-ch; !v {
			t.Errorf("first value %v, want true (current state)", v)
		}
	}
	cancelA()
	if _, ok := <-a; ok {
		t.Error("channel open after cancel")
	}
	cancelA() // idempotent
	c.Stop(0)
	if _, ok := <-b; ok {
		// A final false may be delivered before the close.
		if _, ok := <-b; ok {
			t.Error("channel open after Close")
		}
	}
}

func TestCloseIsIdempotentAndEndsEverything(t *testing.T) {
	c := NewTestCluster(t, 1)
	s := c.Stores[0]
	mustTxn(t, s, op(OpCreate, deployment("a", `{}`)))
	ch, err := s.Watch(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	recvClosed(t, ch)
	if _, err := s.Txn(t.Context(), []Op{op(OpCreate, deployment("b", `{}`))}); !errors.Is(err, ErrClosed) {
		t.Errorf("Txn after Close: %v", err)
	}
	if _, err := s.Get(api.KindDeployment, "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.Watch(t.Context(), "", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
}

func TestBootstrapIsIdempotent(t *testing.T) {
	c := NewTestCluster(t, 3)
	for i, s := range c.Stores {
		if err := s.Bootstrap(c.Servers()); err != nil {
			t.Errorf("server %d: second Bootstrap: %v", i, err)
		}
	}
	if err := c.Stores[0].Bootstrap(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Bootstrap(nil): %v", err)
	}
}

func TestLeadershipTransfer(t *testing.T) {
	c := NewTestCluster(t, 3)
	old := c.Leader()
	if err := c.Stores[c.Follower()].LeadershipTransfer(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("transfer on a follower: %v, want ErrNotLeader", err)
	}
	if err := c.Stores[old].LeadershipTransfer(); err != nil {
		t.Fatal(err)
	}
	c.NewLeader(old)
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.NodeID, good.BindAddr, good.ServerKey = "n1", "127.0.0.1:0", TestKey("x")
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "NodeID"},
		{"no bind", func(c *Config) { c.BindAddr = "" }, "BindAddr"},
		{"bad bind", func(c *Config) { c.BindAddr = "localhost" }, "BindAddr"},
		{"unspecified bind without advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7000" }, "AdvertiseAddr"},
		{"unspecified advertise", func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7000" }, "AdvertiseAddr"},
		{"short key", func(c *Config) { c.ServerKey = []byte("short") }, "ServerKey"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout }, "LeaderLeaseTimeout"},
		{"election below heartbeat", func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 }, "ElectionTimeout"},
		{"negative interval", func(c *Config) { c.HeartbeatInterval = -time.Millisecond }, "HeartbeatInterval"},
		{"interval past half the timeout", func(c *Config) { c.HeartbeatInterval = c.HeartbeatTimeout / 2 }, "HeartbeatInterval"},
		{"interval past half the lease", func(c *Config) { c.HeartbeatInterval = c.LeaderLeaseTimeout/2 + time.Millisecond }, "HeartbeatInterval"},
		{"no history", func(c *Config) { c.WatchHistory = 0 }, "WatchHistory"},
		{"no history bytes", func(c *Config) { c.WatchHistoryBytes = 0 }, "WatchHistoryBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
	c := good
	c.BindAddr, c.AdvertiseAddr = "0.0.0.0:0", "10.0.0.5:0"
	if err := c.Validate(); err != nil {
		t.Errorf("wildcard bind with advertise: %v", err)
	}
}

func TestListSortedWithIndex(t *testing.T) {
	c := NewTestCluster(t, 1)
	s := c.Stores[0]
	var last []api.RawObject
	for _, name := range []string{"c", "a", "b"} {
		last = mustTxn(t, s, op(OpCreate, deployment(name, `{}`)), op(OpCreate, obj(api.KindNode, name, 0, `{}`, "", nil)))
	}
	objs, rv, err := s.List(api.KindDeployment)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Metadata.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("names %v", names)
	}
	if rv != last[0].Metadata.ResourceVersion {
		t.Errorf("list index %d, want %d", rv, last[0].Metadata.ResourceVersion)
	}
	all, _, _ := s.List("")
	if len(all) != 6 || all[0].Kind != api.KindNode || all[3].Kind != api.KindDeployment {
		t.Errorf("List(\"\") order: %v", all)
	}
	// Returned objects are copies.
	objs[0].Metadata.Labels = map[string]string{"x": "y"}
	if o, _ := s.Get(api.KindDeployment, "a"); o.Metadata.Labels != nil {
		t.Error("modifying a listed object changed the store")
	}
}
