package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/raftstore"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const gib = int64(1) << 30

// world is a store for the controllers' tests: a raftstore.MemStore, so
// that actions are applied with the store's own rules (create fails on an
// existing name, compare-and-swap on resourceVersion, update keeps status
// and moves the generation only on a spec change, updateStatus keeps spec,
// a no-op writes nothing, one Txn all or nothing), mapped to operations as
// the agent's Writer maps them. The maps hold every object as the store
// returns it, read back after every write; tests read them, and write
// through add, update, put and del.
type world struct {
	t           testing.TB
	st          *raftstore.MemStore
	now         time.Time
	rv          uint64
	nodes       map[string]*api.Node
	pods        map[string]*api.Pod
	deployments map[string]*api.Deployment
	daemons     map[string]*api.Daemon
	services    map[string]*api.Service
	members     map[string]MemberInfo
	// afterEach, when set, runs after every single applied action.
	afterEach func(a Action)
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, now: t0, members: map[string]MemberInfo{}}
	// Creation times as a fixture would have them: one microsecond per
	// resourceVersion after now (a rejected transaction takes none).
	w.st = raftstore.NewMemStore(clock.NowFunc(func() time.Time { return w.now.Add(time.Duration(w.rv+1) * time.Microsecond) }))
	w.sync()
	return w
}

// roundTrip returns o as the store would return it.
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

// sync reads every object back from the store into the maps.
func (w *world) sync() {
	w.t.Helper()
	objs, rv, err := w.st.List("")
	if err != nil {
		w.t.Fatalf("List: %v", err)
	}
	w.rv = rv
	w.nodes, w.pods, w.deployments = map[string]*api.Node{}, map[string]*api.Pod{}, map[string]*api.Deployment{}
	w.daemons, w.services = map[string]*api.Daemon{}, map[string]*api.Service{}
	for _, raw := range objs {
		w.keep(raw)
	}
}

// syncOne reads kind/name back from the store into the maps, or drops it
// from them when the store has no such object.
func (w *world) syncOne(kind api.Kind, name string) {
	w.t.Helper()
	raw, err := w.st.Get(kind, name)
	switch {
	case errors.Is(err, raftstore.ErrNotFound):
		switch kind {
		case api.KindNode:
			delete(w.nodes, name)
		case api.KindPod:
			delete(w.pods, name)
		case api.KindDeployment:
			delete(w.deployments, name)
		case api.KindDaemon:
			delete(w.daemons, name)
		case api.KindService:
			delete(w.services, name)
		}
	case err != nil:
		w.t.Fatalf("Get %s/%s: %v", kind, name, err)
	default:
		w.keep(raw)
	}
}

// keep decodes a stored object into its map.
func (w *world) keep(raw api.RawObject) {
	w.t.Helper()
	o, err := api.FromRaw(raw)
	if err != nil {
		w.t.Fatalf("FromRaw %s/%s: %v", raw.Kind, raw.Metadata.Name, err)
	}
	switch o := o.(type) {
	case *api.Node:
		w.nodes[o.Metadata.Name] = o
	case *api.Pod:
		w.pods[o.Metadata.Name] = o
	case *api.Deployment:
		w.deployments[o.Metadata.Name] = o
	case *api.Daemon:
		w.daemons[o.Metadata.Name] = o
	case *api.Service:
		w.services[o.Metadata.Name] = o
	default:
		w.t.Fatalf("sync: unexpected %T", o)
	}
}

// txn applies ops as one store transaction and reads back the objects
// they name: a transaction writes nothing else the world keeps (the
// store's own events aside), and a refused one writes nothing at all.
// Reading back only those keeps building a world of thousands of objects
// linear (BenchmarkReconcile500Boards10000Pods).
func (w *world) txn(ops []raftstore.Op) error {
	w.t.Helper()
	if _, err := w.st.Txn(context.Background(), ops); err != nil {
		return err
	}
	for _, op := range ops {
		w.syncOne(op.Object.Kind, op.Object.Metadata.Name)
	}
	w.rv = w.st.ResourceVersion()
	return nil
}

// raw encodes o for an op.
func (w *world) raw(o api.Object) api.RawObject {
	w.t.Helper()
	raw, err := api.ToRaw(o)
	if err != nil {
		w.t.Fatalf("ToRaw: %v", err)
	}
	return raw
}

// add stores objects as the user or a test fixture would, each in its own
// transaction, status included; a resourceVersion given is ignored.
func (w *world) add(objs ...api.Object) {
	w.t.Helper()
	for _, o := range objs {
		if err := w.txn(w.userWrite(o)); err != nil {
			w.t.Fatalf("add %s/%s: %v", o.GetKind(), o.GetMeta().Name, err)
		}
	}
}

// update stores o as a new version (a user's write, unconditional): its
// labels, spec and status.
func (w *world) update(o api.Object) { w.add(o) }

// put is update.
func (w *world) put(o api.Object) { w.add(o) }

// userWrite is the ops of an unconditional write of o: a create when it is
// not stored, else an update and a status update.
func (w *world) userWrite(o api.Object) []raftstore.Op {
	raw := w.raw(o)
	raw.Metadata.ResourceVersion = 0
	if w.get(o.GetKind(), o.GetMeta().Name) == nil {
		return []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}
	}
	return []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}, {Type: raftstore.OpUpdateStatus, Object: raw}}
}

func (w *world) get(kind api.Kind, name string) api.Object {
	var o api.Object
	var ok bool
	switch kind {
	case api.KindNode:
		o, ok = w.nodes[name]
	case api.KindPod:
		o, ok = w.pods[name]
	case api.KindDeployment:
		o, ok = w.deployments[name]
	case api.KindDaemon:
		o, ok = w.daemons[name]
	case api.KindService:
		o, ok = w.services[name]
	}
	if !ok {
		return nil
	}
	return o
}

// del deletes kind/name unconditionally.
func (w *world) del(kind api.Kind, name string) {
	w.t.Helper()
	err := w.txn([]raftstore.Op{{Type: raftstore.OpDelete, Object: api.RawObject{Kind: kind, Metadata: api.ObjectMeta{Name: name}}}})
	if err != nil {
		w.t.Fatalf("del %s/%s: %v", kind, name, err)
	}
}

// apply applies actions in order, each of Transactions(acts) all or
// nothing, failing the test on a store error. afterEach runs after every
// action, inside its transaction too: the bounds it checks hold at every
// step, so they hold at the commits.
func (w *world) apply(acts []Action) {
	w.t.Helper()
	for _, txn := range Transactions(acts) {
		if err := w.applyTxn(txn); err != nil {
			w.t.Fatalf("apply %v: %v", txn, err)
		}
	}
}

// applyTxn applies one transaction: every action, or none when one fails
// (the world is then as before and the error names the store's refusal).
// With afterEach set, each action is committed on its own so that
// afterEach sees every step; a failure then fails the test anyway.
func (w *world) applyTxn(txn []Action) error {
	var ops []raftstore.Op
	for _, a := range txn {
		o, err := w.opsFor(a)
		if err != nil {
			return err
		}
		if w.afterEach != nil {
			if err := w.txn(o); err != nil {
				return fmt.Errorf("%v: %w", a, err)
			}
			w.afterEach(a)
			continue
		}
		ops = append(ops, o...)
	}
	if len(ops) == 0 {
		return nil
	}
	if err := w.txn(ops); err != nil {
		return fmt.Errorf("%v: %w", txn, err)
	}
	return nil
}

// worldState is what save keeps: the version.
type worldState struct{ rv uint64 }

func (w *world) save() worldState { return worldState{w.rv} }

// opsFor maps an action to store operations as the agent's Writer does
// (agent.opsFor): a delete carries the kind, name and resourceVersion, a
// status write those and the status, a bind is a spec update and a status
// update in one transaction.
func (w *world) opsFor(a Action) ([]raftstore.Op, error) {
	if a.Object == nil || a.Object.GetKind() != a.Kind || a.Object.GetMeta().Name != a.Name {
		return nil, fmt.Errorf("action object does not match %s/%s", a.Kind, a.Name)
	}
	raw := w.raw(a.Object)
	bare := api.RawObject{Kind: raw.Kind, Metadata: api.ObjectMeta{Name: raw.Metadata.Name, ResourceVersion: raw.Metadata.ResourceVersion}}
	switch a.Type {
	case ActionCreate:
		return []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}, nil
	case ActionUpdate:
		return []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}, nil
	case ActionUpdateStatus:
		bare.Status = raw.Status
		return []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: bare}}, nil
	case ActionDelete:
		return []raftstore.Op{{Type: raftstore.OpDelete, Object: bare}}, nil
	case ActionBind:
		if a.Kind != api.KindPod {
			return nil, fmt.Errorf("bind of a %s", a.Kind)
		}
		status := raw
		status.Metadata.ResourceVersion = 0 // follows the update in the same txn
		return []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}, {Type: raftstore.OpUpdateStatus, Object: status}}, nil
	}
	return nil, fmt.Errorf("unknown action type %q", a.Type)
}

func sortedValues[T api.Object](m map[string]T) []T {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, compareByName)
	return out
}

func (w *world) podList() []*api.Pod   { return sortedValues(w.pods) }
func (w *world) nodeList() []*api.Node { return sortedValues(w.nodes) }
func (w *world) snapshot() *scheduler.Snapshot {
	return &scheduler.Snapshot{Nodes: w.nodeList(), Pods: w.podList()}
}

func (w *world) cluster() *Cluster {
	c := &Cluster{Version: w.rv, Nodes: w.nodeList(), Pods: w.podList(),
		Deployments: sortedValues(w.deployments), Daemons: sortedValues(w.daemons), Services: sortedValues(w.services)}
	for _, n := range slices.Sorted(maps.Keys(w.members)) {
		c.Members = append(c.Members, w.members[n])
	}
	return c
}

// owned returns the pods of an owner, sorted by name.
func (w *world) owned(kind api.Kind, name string) []*api.Pod {
	var out []*api.Pod
	for _, p := range w.podList() {
		if p.Spec.Owner == (api.OwnerRef{Kind: kind, Name: name}) {
			out = append(out, p)
		}
	}
	return out
}

// runPods plays the executor and the boards: every bound pod that is not
// Running and ready becomes so (at most limit pods, in name order; limit < 0
// means all). It returns how many changed.
func (w *world) runPods(limit int) int {
	n := 0
	for _, p := range w.podList() {
		if limit >= 0 && n >= limit {
			break
		}
		switch p.Status.Phase {
		case api.PodScheduled, api.PodStarting:
		case api.PodRunning:
			if p.Status.Ready {
				continue
			}
		default:
			continue
		}
		ready := true
		w.apply(ObservePod(w.now, p, UnitObservation{Unit: api.UnitName(p.Metadata.Name), Found: true, ActiveState: "active", SubState: "running", Ready: &ready}))
		n++
	}
	return n
}

// summary renders actions as "type kind/name" lines.
func summary(acts []Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, fmt.Sprintf("%s %s/%s", a.Type, a.Kind, a.Name))
	}
	return out
}

func fmtActions(acts []Action) string {
	var b strings.Builder
	for _, a := range acts {
		b.WriteString("\n  " + a.String())
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Builders.

func readyNode(name string, opts ...func(*api.Node)) *api.Node {
	n := &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name},
		Status: api.NodeStatus{Phase: api.NodeReady, Fenced: true, Since: t0, Address: "10.0.0." + fmt.Sprint(len(name)), BoardFacts: api.BoardFacts{MemoryBytes: 4 * gib, CPUs: 4, Arch: "arm64", Model: "Pi 4"}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withAddr(a string) func(*api.Node) { return func(n *api.Node) { n.Status.Address = a } }
func withPhase(ph api.NodePhase) func(*api.Node) {
	return func(n *api.Node) { n.Status.Phase = ph; n.Status.Fenced = ph == api.NodeReady }
}
func withLabels(kv ...string) func(*api.Node) {
	return func(n *api.Node) {
		n.Metadata.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}

func webTemplate() api.PodTemplate {
	return api.PodTemplate{
		Labels: map[string]string{"app": "web"},
		Exec:   []string{"/usr/bin/web", "--port", "8080"},
		Ports:  []api.Port{{Name: "http", Port: 0, Protocol: "tcp"}},
		Resources: api.Resources{
			MemoryRequest: "64M", CPURequest: "10%",
		},
	}
}

func intp(i int) *int { return &i }

func deployment(name string, replicas int, opts ...func(*api.Deployment)) *api.Deployment {
	t := webTemplate()
	t.Labels = map[string]string{"app": name}
	d := &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: name},
		Spec: api.DeploymentSpec{Replicas: intp(replicas), Selector: map[string]string{"app": name}, Template: t}}
	for _, o := range opts {
		o(d)
	}
	return d
}

func strategy(surge, unavail int) func(*api.Deployment) {
	return func(d *api.Deployment) {
		d.Spec.Strategy = api.RolloutStrategy{MaxSurge: intp(surge), MaxUnavailable: intp(unavail)}
	}
}

// ownedPod returns a pod of owner in phase ph on node (Running pods are
// ready).
func ownedPod(name string, owner api.OwnerRef, t api.PodTemplate, node string, ph api.PodPhase) *api.Pod {
	p := newPod(name, owner, t, api.TemplateHash(t), nil)
	p.Spec.Node = node
	p.Status.Phase = ph
	if ph == api.PodRunning {
		p.Status.Ready = true
	}
	if node != "" && len(t.Ports) > 0 {
		p.Spec.HostPorts = map[string]int{}
		for i, port := range t.Ports {
			hp := port.Port
			if hp == 0 {
				hp = 20000 + i
			}
			p.Spec.HostPorts[port.Name] = hp
		}
	}
	return p
}

func deployPod(d *api.Deployment, name, node string, ph api.PodPhase) *api.Pod {
	return ownedPod(name, api.OwnerRef{Kind: api.KindDeployment, Name: d.Metadata.Name}, d.Spec.Template, node, ph)
}
