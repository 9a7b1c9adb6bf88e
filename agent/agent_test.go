package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/gossip"
)

// running is one in-process agent.
type running struct {
	cfg  Config
	a    *Agent
	stop context.CancelFunc
	done chan struct{}
}

// testFleet is n agents on a loopback address of the test's own (see
// freeAddr) with free ports, raft on loopback TCP, memberlist with the
// local timing preset.
type testFleet struct {
	t      *testing.T
	key    []byte
	agents []*running
	boards *fakeboard.Fleet // what the leader does to boards
}

func newFleet(t *testing.T, n, expect int) *testFleet {
	t.Helper()
	sum := sha256.Sum256([]byte(t.Name()))
	f := &testFleet{t: t, key: sum[:], boards: fakeboard.New()}
	// Like boards, every agent has the whole list to join, so one that
	// returns after being declared dead finds the others again.
	var gossipAddrs []string
	for i := 0; i < n; i++ {
		gossipAddrs = append(gossipAddrs, testutil.FreeAddr(t))
	}
	for i := 0; i < n; i++ {
		cfg := DefaultConfig()
		cfg.Name = fmt.Sprintf("a%d", i+1)
		cfg.DataDir = t.TempDir()
		cfg.BootstrapExpect = expect
		cfg.GossipBind = gossipAddrs[i]
		cfg.RaftBind = testutil.FreeAddr(t)
		cfg.APIListen = []string{testutil.FreeAddr(t)}
		cfg.SSHAddress = "127.0.0.1:22"
		cfg.SSHHostKeyFile = ""
		cfg.ClusterKeyFile = ""
		for j, g := range gossipAddrs {
			if j != i {
				cfg.Join = append(cfg.Join, g)
			}
		}
		f.start(cfg)
	}
	t.Cleanup(func() {
		for _, r := range f.agents {
			if r.a != nil {
				r.stop()
				<-r.done
			}
		}
	})
	return f
}

func (f *testFleet) start(cfg Config) *running {
	f.t.Helper()
	timing := gossip.LocalTiming()
	facts := api.BoardFacts{Arch: "amd64", MemoryBytes: 1 << 30, CPUs: 4}
	logger := testutil.LevelLogger(f.t, slog.LevelWarn)
	a, err := New(cfg, Options{ClusterKey: f.key, Logger: logger, GossipTiming: &timing, Facts: &facts, Executor: f.boards})
	if err != nil {
		f.t.Fatalf("start %s: %v", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cfg: cfg, a: a, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); a.Run(ctx) }()
	for i, old := range f.agents {
		if old.cfg.Name == cfg.Name {
			f.agents[i] = r
			return r
		}
	}
	f.agents = append(f.agents, r)
	return r
}

// stop stops agent i gracefully and forgets it.
func (f *testFleet) stopAgent(i int) Config {
	r := f.agents[i]
	r.stop()
	<-r.done
	f.agents[i] = &running{cfg: r.cfg} // down: no agent
	return r.cfg
}

// crash closes agent i's raftstore, gossip and API without leaving gossip
// or handing over leadership: what a power cut looks like to the others.
func (f *testFleet) crash(i int) Config {
	r := f.agents[i]
	r.a.close()
	r.stop()
	<-r.done
	f.agents[i] = &running{cfg: r.cfg} // down: no agent
	return r.cfg
}

func (f *testFleet) client(i int) *client.Client {
	f.t.Helper()
	c, err := client.New(f.agents[i].a.APIAddrs(), client.Options{Token: f.agents[i].a.APIToken(), Timeout: 10 * time.Second})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// leader waits until all running agents agree on one leader and returns its index.
func (f *testFleet) leader() int {
	f.t.Helper()
	idx := -1
	testutil.Eventually(f.t, 15*time.Second, "one agreed leader", func() error {
		var id string
		for _, r := range f.agents {
			if r.a == nil {
				continue
			}
			lid, _ := r.a.store.Leader()
			if lid == "" {
				return fmt.Errorf("%s sees no leader", r.cfg.Name)
			}
			if id != "" && lid != id {
				return fmt.Errorf("leaders disagree: %s vs %s", id, lid)
			}
			id = lid
		}
		for i, r := range f.agents {
			if r.a != nil && r.cfg.Name == id {
				idx = i
				return nil
			}
		}
		return fmt.Errorf("leader %s is not running", id)
	})
	return idx
}

func webDeployment(replicas int) api.Object {
	return &api.Deployment{
		Kind:     api.KindDeployment,
		Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Template: api.PodTemplate{
				Labels: map[string]string{"app": "web"},
				Exec:   []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
				Ports:  []api.Port{{Name: "http"}},
			},
		},
	}
}

func (f *testFleet) waitObject(i int, kind api.Kind, name string, check func(api.RawObject) error) {
	f.t.Helper()
	testutil.Eventually(f.t, 10*time.Second, fmt.Sprintf("%s/%s on %s", kind, name, f.agents[i].cfg.Name), func() error {
		o, err := f.agents[i].a.store.Get(kind, name)
		if err != nil {
			return err
		}
		if check != nil {
			return check(o)
		}
		return nil
	})
}

func TestFleetReplicatesAndSurvivesLeaderLoss(t *testing.T) {
	f := newFleet(t, 3, 3)
	lead := f.leader()

	// Raft membership: the three bootstrap servers vote.
	servers, err := f.agents[lead].a.store.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for _, s := range servers {
		if s.Voter {
			voters = append(voters, s.ID)
		}
	}
	if diff := cmp.Diff([]string{"a1", "a2", "a3"}, voters); diff != "" {
		t.Errorf("voters (-want +got):\n%s", diff)
	}

	// The leader's recorder has listed the state once it records its
	// election; a change committed before that list would be part of the
	// state it starts from, with no event (a slow board, qemu under load).
	testutil.Eventually(t, 10*time.Second, "the leader's election event", func() error {
		return f.hasEvents(lead, "LeaderElected node/a"+strconv.Itoa(lead+1))
	})

	// Apply through a follower: forwarded to the leader, seen everywhere.
	follower := (lead + 1) % 3
	ctx := context.Background()
	res, err := f.client(follower).Apply(ctx, []api.Object{webDeployment(3)}, false)
	if err != nil {
		t.Fatalf("apply on follower: %v", err)
	}
	if len(res) != 1 || res[0].Action != "created" {
		t.Fatalf("apply result = %+v, want one created", res)
	}
	for i := range f.agents {
		f.waitObject(i, api.KindDeployment, "web", nil)
	}

	// CAS: a write carrying a stale resourceVersion is refused.
	stale := res[0].Object
	if _, err := f.client(lead).Scale(ctx, "web", 5); err != nil {
		t.Fatal(err)
	}
	staleObj, err := api.FromRaw(stale)
	if err != nil {
		t.Fatal(err)
	}
	staleObj.GetMeta().Labels = map[string]string{"x": "y"}
	if _, err := f.client(follower).Update(ctx, staleObj); !api.IsCode(err, "conflict") {
		t.Fatalf("stale update: got %v, want a conflict", err)
	}

	// The leader records events: its election, the scale.
	testutil.Eventually(t, 10*time.Second, "events on the leader", func() error {
		return f.hasEvents(lead, "LeaderElected node/a"+strconv.Itoa(lead+1), "Scaled deployment/web")
	})

	// Crash the leader: a new one is elected and the state is intact.
	crashed := f.crash(lead)
	newLead := f.leader()
	if newLead == lead {
		t.Fatal("the crashed agent is still leader")
	}
	// The events survive, and the new leader records its election.
	testutil.Eventually(t, 10*time.Second, "events after the leader's loss", func() error {
		return f.hasEvents(newLead, "Scaled deployment/web", "LeaderElected node/a"+strconv.Itoa(newLead+1))
	})
	obj, err := f.client(newLead).Get(ctx, api.KindDeployment, "web")
	if err != nil {
		t.Fatalf("get after leader loss: %v", err)
	}
	d, err := api.FromRaw(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := *d.(*api.Deployment).Spec.Replicas; got != 5 {
		t.Errorf("replicas after leader loss = %d, want 5", got)
	}

	// Write while the old leader is down, then restart it from its data
	// dir: it catches up.
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Target: "http"}}}}
	if _, err := f.client(newLead).Apply(ctx, []api.Object{svc}, false); err != nil {
		t.Fatalf("apply while one agent is down: %v", err)
	}
	f.start(crashed)
	f.waitObject(lead, api.KindService, "web", nil)
	f.waitObject(lead, api.KindDeployment, "web", func(o api.RawObject) error {
		d, err := api.FromRaw(o)
		if err != nil {
			return err
		}
		if r := *d.(*api.Deployment).Spec.Replicas; r != 5 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})
	f.leader()
}

// hasEvents reports, as an error, which of want ("Reason kind/name") agent
// i's store does not list among its events.
func (f *testFleet) hasEvents(i int, want ...string) error {
	raws, _, err := f.client(i).List(context.Background(), api.KindEvent)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, r := range raws {
		var s api.EventSpec
		if err := json.Unmarshal(r.Spec, &s); err != nil {
			return err
		}
		have[s.Reason+" "+s.Object.String()] = true
	}
	for _, w := range want {
		if !have[w] {
			return fmt.Errorf("no event %q among %d", w, len(raws))
		}
	}
	return nil
}

func TestWatchResumesFromResourceVersion(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	c := f.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Apply(ctx, []api.Object{webDeployment(1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	from := res[0].Object.Metadata.ResourceVersion
	if _, err := c.Scale(ctx, "web", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Scale(ctx, "web", 3); err != nil {
		t.Fatal(err)
	}
	ch, err := c.Watch(ctx, api.KindDeployment, from)
	if err != nil {
		t.Fatal(err)
	}
	// The controllers write status too (same generation): keep the events
	// that changed the spec.
	var got []int
	gen := res[0].Object.Metadata.Generation
	for ev := range ch {
		d, err := api.FromRaw(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if g := d.GetMeta().Generation; g > gen {
			gen = g
			got = append(got, *d.(*api.Deployment).Spec.Replicas)
		}
		if len(got) == 2 {
			break
		}
	}
	if diff := cmp.Diff([]int{2, 3}, got); diff != "" {
		t.Errorf("replayed replicas (-want +got):\n%s", diff)
	}
}

func TestGossipEventsReachAgent(t *testing.T) {
	f := newFleet(t, 3, 3)
	f.leader()
	statusOf := func(i int, name string) api.MemberState {
		for _, m := range f.agents[i].a.Status(t.Context()).Members {
			if m.Name == name {
				return m.State
			}
		}
		return "absent"
	}
	testutil.Eventually(t, 10*time.Second, "all members alive", func() error {
		for _, n := range []string{"a1", "a2", "a3"} {
			if s := statusOf(0, n); s != "alive" {
				return fmt.Errorf("%s is %s", n, s)
			}
		}
		return nil
	})
	f.stopAgent(2) // graceful: leaves gossip
	testutil.Eventually(t, 10*time.Second, "a3 left", func() error {
		if s := statusOf(0, "a3"); s != "left" {
			return fmt.Errorf("a3 is %s", s)
		}
		return nil
	})
	f.crash(1) // silent: declared dead by the failure detector
	testutil.Eventually(t, 10*time.Second, "a2 dead", func() error {
		if s := statusOf(0, "a2"); s != "dead" {
			return fmt.Errorf("a2 is %s", s)
		}
		return nil
	})
}

// workerConfig is a gossip-only agent on free loopback ports that joins
// the gossip addresses given (none: alone).
func workerConfig(t *testing.T, name string, join ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.Server = false
	cfg.DataDir = t.TempDir()
	cfg.GossipBind = testutil.FreeAddr(t)
	cfg.APIListen = []string{testutil.FreeAddr(t)}
	cfg.SSHAddress = "127.0.0.1:22"
	cfg.SSHHostKeyFile = ""
	cfg.ClusterKeyFile = ""
	cfg.Join = join
	return cfg
}

func TestGossipOnlyAgentRefusesState(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	f.start(workerConfig(t, "worker", f.agents[0].cfg.GossipBind))
	c := f.client(1)
	_, _, err := c.List(context.Background(), api.KindDeployment)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 503 {
		t.Fatalf("list on a gossip-only agent: %v, want 503", err)
	}
	testutil.Eventually(t, 10*time.Second, "worker in gossip", func() error {
		for _, m := range f.agents[0].a.Status(t.Context()).Members {
			if m.Name == "worker" && m.State == "alive" && !m.Server {
				return nil
			}
		}
		return errors.New("not yet")
	})
}
