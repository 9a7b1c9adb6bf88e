package placer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

var _ Executor = (*fakeboard.Fleet)(nil)

// fakeState is an in-memory store serving the placer's State and Writer:
// objects come back through a JSON round trip (as from the store), status
// writes compare-and-swap on resourceVersion, spec changes move the
// generation, and every change is announced to the watchers.
type fakeState struct {
	t        testing.TB
	mu       sync.Mutex
	rv       uint64
	nodes    map[string]*api.Node
	pods     map[string]*api.Pod
	members  map[string]controller.MemberInfo
	watchers []chan controller.Change
	applies  int // Apply calls
	applied  []controller.Action
	snap     *controller.Cluster // last snapshot, reused while rv is unchanged
	// decoded: the objects of snap by kind/name, reused by the next
	// snapshot while their resourceVersion is unchanged (as the agent's
	// clusterState does).
	decoded map[string]api.Object
}

var (
	_ controller.State  = (*fakeState)(nil)
	_ controller.Writer = (*fakeState)(nil)
)

func newFakeState(t testing.TB) *fakeState {
	return &fakeState{t: t, nodes: map[string]*api.Node{}, pods: map[string]*api.Pod{}, members: map[string]controller.MemberInfo{}}
}

func roundTrip[T api.Object](t testing.TB, o T) T {
	t.Helper()
	raw, err := api.ToRaw(o)
	if err != nil {
		t.Fatalf("ToRaw: %v", err)
	}
	back, err := api.FromRaw(raw)
	if err != nil {
		t.Fatalf("FromRaw: %v", err)
	}
	return back.(T)
}

func (s *fakeState) Snapshot(ctx context.Context) (*controller.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil && s.snap.Version == s.rv {
		return s.snap, nil // shared, as a real State's cache would be
	}
	c := &controller.Cluster{Version: s.rv}
	next := make(map[string]api.Object, len(s.decoded))
	decode := func(key string, o api.Object) api.Object {
		if d, ok := s.decoded[key]; ok && d.GetMeta().ResourceVersion == o.GetMeta().ResourceVersion {
			next[key] = d
			return d
		}
		d := roundTrip(s.t, o)
		next[key] = d
		return d
	}
	for _, n := range slices.Sorted(maps.Keys(s.nodes)) {
		c.Nodes = append(c.Nodes, decode("nodes/"+n, s.nodes[n]).(*api.Node))
	}
	for _, n := range slices.Sorted(maps.Keys(s.pods)) {
		c.Pods = append(c.Pods, decode("pods/"+n, s.pods[n]).(*api.Pod))
	}
	s.decoded = next
	for _, n := range slices.Sorted(maps.Keys(s.members)) {
		c.Members = append(c.Members, s.members[n])
	}
	s.snap = c
	return c, nil
}

func (s *fakeState) Watch(ctx context.Context) (<-chan controller.Change, error) {
	ch := make(chan controller.Change, 1024)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.watchers, ch); i >= 0 {
			s.watchers = slices.Delete(s.watchers, i, i+1)
			close(ch)
		}
	}()
	return ch, nil
}

// notifyLocked announces a change to every watcher.
func (s *fakeState) notifyLocked(kind api.Kind, name string, o api.Object) {
	for _, w := range s.watchers {
		select {
		case w <- controller.Change{Kind: kind, Name: name, Object: o}:
		default: // a full watcher misses it; the resync catches up
		}
	}
}

func (s *fakeState) Apply(ctx context.Context, acts []controller.Action) error {
	if err := ctx.Err(); err != nil {
		return err // as the store's: a write is not begun for a caller gone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applies++
	for _, a := range acts {
		if a.Type != controller.ActionUpdateStatus {
			return fmt.Errorf("fakeState: unexpected action %s", a)
		}
		switch o := a.Object.(type) {
		case *api.Pod:
			old := s.pods[o.Metadata.Name]
			if old == nil || old.Metadata.ResourceVersion != o.Metadata.ResourceVersion {
				return fmt.Errorf("fakeState: conflict on %s", a)
			}
			np := roundTrip(s.t, old)
			np.Status = o.Status
			s.rv++
			np.Metadata.ResourceVersion = s.rv
			s.pods[o.Metadata.Name] = roundTrip(s.t, np)
			s.notifyLocked(api.KindPod, o.Metadata.Name, np)
		case *api.Node:
			old := s.nodes[o.Metadata.Name]
			if old == nil || old.Metadata.ResourceVersion != o.Metadata.ResourceVersion {
				return fmt.Errorf("fakeState: conflict on %s", a)
			}
			nn := roundTrip(s.t, old)
			nn.Status = o.Status
			s.rv++
			nn.Metadata.ResourceVersion = s.rv
			s.nodes[o.Metadata.Name] = roundTrip(s.t, nn)
			s.notifyLocked(api.KindNode, o.Metadata.Name, nn)
		default:
			return fmt.Errorf("fakeState: unexpected object %T", a.Object)
		}
		s.applied = append(s.applied, a)
	}
	return nil
}

// putNode stores n as given (a new version).
func (s *fakeState) putNode(n *api.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	n = roundTrip(s.t, n)
	n.Kind = api.KindNode
	n.Metadata.ResourceVersion = s.rv
	s.nodes[n.Metadata.Name] = n
	s.notifyLocked(api.KindNode, n.Metadata.Name, n)
}

func (s *fakeState) deleteNode(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	n := s.nodes[name]
	delete(s.nodes, name)
	s.notifyLocked(api.KindNode, name, n)
}

func (s *fakeState) setMember(m controller.MemberInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	s.members[m.Name] = m
	s.notifyLocked(api.KindNode, m.Name, nil)
}

// putPod stores p, moving its generation when the spec changed.
func (s *fakeState) putPod(p *api.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = roundTrip(s.t, p)
	p.Kind = api.KindPod
	gen := int64(1)
	if old := s.pods[p.Metadata.Name]; old != nil {
		gen = old.Metadata.Generation
		a, _ := json.Marshal(old.Spec)
		b, _ := json.Marshal(p.Spec)
		if !bytes.Equal(a, b) {
			gen++
		}
	}
	s.rv++
	p.Metadata.Generation = gen
	p.Metadata.ResourceVersion = s.rv
	s.pods[p.Metadata.Name] = p
	s.notifyLocked(api.KindPod, p.Metadata.Name, p)
}

// updatePod changes a stored pod with fn.
func (s *fakeState) updatePod(name string, fn func(*api.Pod)) {
	p := s.pod(name)
	if p == nil {
		s.t.Fatalf("updatePod: no pod %s", name)
	}
	fn(p)
	s.putPod(p)
}

func (s *fakeState) deletePod(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	p := s.pods[name]
	delete(s.pods, name)
	s.notifyLocked(api.KindPod, name, p)
}

func (s *fakeState) pod(name string) *api.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pods[name]; p != nil {
		return roundTrip(s.t, p)
	}
	return nil
}

func (s *fakeState) node(name string) *api.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[name]; n != nil {
		return roundTrip(s.t, n)
	}
	return nil
}

func (s *fakeState) applyCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies
}

// readyNode returns a Ready, fenced node at addr.
func readyNode(name, addr string) *api.Node {
	return &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name}, Status: api.NodeStatus{
		Phase: api.NodeReady, Since: t0, Fenced: true, Address: addr,
		Conditions: []api.Condition{{Type: api.ConditionReady, Status: api.ConditionTrue, Reason: "MemberAlive", LastTransitionTime: t0}},
	}}
}

// downNode returns a node gossip declared dead, as the node controller
// leaves it.
func downNode(t testing.TB, name, addr string) *api.Node {
	n := readyNode(name, addr)
	acts := controller.ReconcileNode(t0, n, controller.MemberInfo{Name: name, Addr: addr, State: api.MemberDead}, nil)
	return statusOf(t, n, acts)
}

// fencingNode returns a node that came back alive after being down, as
// the node controller leaves it: NotReady with the Fencing condition.
func fencingNode(t testing.TB, name, addr string) *api.Node {
	n := downNode(t, name, addr)
	acts := controller.ReconcileNode(t0.Add(time.Minute), n, controller.MemberInfo{Name: name, Addr: addr, State: api.MemberAlive}, nil)
	n = statusOf(t, n, acts)
	if !fencing(n) {
		t.Fatalf("fencingNode: node is not fencing: %+v", n.Status)
	}
	return n
}

func statusOf(t testing.TB, n *api.Node, acts []controller.Action) *api.Node {
	t.Helper()
	for _, a := range acts {
		if a.Type == controller.ActionUpdateStatus && a.Kind == api.KindNode {
			return a.Object.(*api.Node)
		}
	}
	t.Fatalf("no node status action in %v", acts)
	return nil
}

// webPod returns a pod of deployment web bound to node, Scheduled, with
// one file and one fixed port.
func webPod(name, node string) *api.Pod {
	return &api.Pod{
		Kind:     api.KindPod,
		Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: api.PodSpec{
			Owner:    api.OwnerRef{Kind: api.KindDeployment, Name: "web"},
			Revision: "abc123",
			Node:     node,
			Template: api.PodTemplate{
				Labels: map[string]string{"app": "web"},
				Exec:   []string{"/usr/bin/web", "--port", "${PORT}"},
				Files:  []api.File{{Path: "/etc/web/" + name + ".conf", Content: "greeting = hello\n", Mode: "0640"}},
				Ports:  []api.Port{{Name: "http", Port: 8080, Protocol: "tcp"}},
			},
			HostPorts: map[string]int{"http": 8080},
		},
		Status: api.PodStatus{Phase: api.PodScheduled, Unit: api.UnitName(name), IP: "127.0.0.1"},
	}
}

// render returns a pod's unit file.
func render(t testing.TB, p *api.Pod) []byte {
	t.Helper()
	b, err := units.Render(p)
	if err != nil {
		t.Fatalf("Render %s: %v", p.Metadata.Name, err)
	}
	return b
}

// harness is a Placer over a fakeState and a fakeboard Fleet with a fake
// clock and no jitter.
type harness struct {
	t     testing.TB
	st    *fakeState
	fleet *fakeboard.Fleet
	clock *clocktest.Clock
	p     *Placer

	mu    sync.Mutex
	parks []park
}

func newHarness(t testing.TB, tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, st: newFakeState(t), fleet: fakeboard.New(), clock: clocktest.New(t0)}
	cfg := DefaultConfig()
	cfg.ObserveJitter = 0
	for _, f := range tweak {
		f(&cfg)
	}
	p, err := New(cfg, h.fleet, h.st, h.st, h.clock, testutil.Logger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.onPark = func(pk park) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.parks = append(h.parks, pk)
	}
	h.p = p
	return h
}

// pass runs one pass over node with a fresh worker state w (create with
// h.p.newWorker).
func (h *harness) pass(w *worker) passResult {
	h.t.Helper()
	return w.pass(context.Background())
}

// run starts the Placer until the test ends.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			h.t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

// parksOf returns the parks of node so far.
func (h *harness) parksOf(node string) []park {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []park
	for _, p := range h.parks {
		if p.node == node {
			out = append(out, p)
		}
	}
	return out
}

// waitPark waits until node's worker parked for the n-th time (1-based)
// and returns that park.
func (h *harness) waitPark(node string, n int) park {
	h.t.Helper()
	testutil.Until(h.t, 10*time.Second, fmt.Sprintf("park %d of %s", n, node), func() bool { return len(h.parksOf(node)) >= n })
	return h.parksOf(node)[n-1]
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testutil.Until(h.t, 10*time.Second, what, cond)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
