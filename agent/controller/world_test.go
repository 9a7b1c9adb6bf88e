package controller

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const gib = int64(1) << 30

// world is a fake store: it applies actions with the store's semantics
// (create fails on an existing name, compare-and-swap on resourceVersion,
// update keeps status, updateStatus keeps spec, a run of one Txn all or
// nothing) and keeps every object as it would come back from the store:
// through a JSON round trip.
type world struct {
	t           testing.TB
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
	return &world{t: t, now: t0,
		nodes: map[string]*api.Node{}, pods: map[string]*api.Pod{}, deployments: map[string]*api.Deployment{},
		daemons: map[string]*api.Daemon{}, services: map[string]*api.Service{}, members: map[string]MemberInfo{}}
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

// add stores objects as the user or a test fixture would, bypassing
// actions.
func (w *world) add(objs ...api.Object) {
	for _, o := range objs {
		w.rv++
		m := o.GetMeta()
		m.ResourceVersion = w.rv
		if m.Generation == 0 {
			m.Generation = 1
		}
		if m.Created.IsZero() {
			m.Created = w.now.Add(time.Duration(w.rv) * time.Microsecond)
		}
		w.put(o)
	}
}

// update stores o as a new version (a user's write), keeping nothing of the
// stored object.
func (w *world) update(o api.Object) {
	w.rv++
	o.GetMeta().ResourceVersion = w.rv
	w.put(o)
}

func (w *world) put(o api.Object) {
	switch o := o.(type) {
	case *api.Node:
		w.nodes[o.Metadata.Name] = roundTrip(w.t, o)
	case *api.Pod:
		w.pods[o.Metadata.Name] = roundTrip(w.t, o)
	case *api.Deployment:
		w.deployments[o.Metadata.Name] = roundTrip(w.t, o)
	case *api.Daemon:
		w.daemons[o.Metadata.Name] = roundTrip(w.t, o)
	case *api.Service:
		w.services[o.Metadata.Name] = roundTrip(w.t, o)
	default:
		w.t.Fatalf("put: unexpected %T", o)
	}
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

func (w *world) del(kind api.Kind, name string) {
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
// (the world is then as before and the error names the action).
func (w *world) applyTxn(txn []Action) error {
	saved := w.save()
	for _, a := range txn {
		if err := w.applyOne(a); err != nil {
			w.restore(saved)
			return fmt.Errorf("%v: %w", a, err)
		}
		if w.afterEach != nil {
			w.afterEach(a)
		}
	}
	return nil
}

// worldState is what save keeps: the maps (objects are never modified in
// place, only replaced) and the version.
type worldState struct {
	rv          uint64
	nodes       map[string]*api.Node
	pods        map[string]*api.Pod
	deployments map[string]*api.Deployment
	daemons     map[string]*api.Daemon
	services    map[string]*api.Service
}

func (w *world) save() worldState {
	return worldState{w.rv, maps.Clone(w.nodes), maps.Clone(w.pods), maps.Clone(w.deployments), maps.Clone(w.daemons), maps.Clone(w.services)}
}

func (w *world) restore(s worldState) {
	w.rv, w.nodes, w.pods, w.deployments, w.daemons, w.services = s.rv, s.nodes, s.pods, s.deployments, s.daemons, s.services
}

func (w *world) applyOne(a Action) error {
	if a.Object == nil || a.Object.GetKind() != a.Kind || a.Object.GetMeta().Name != a.Name {
		return fmt.Errorf("action object does not match %s/%s", a.Kind, a.Name)
	}
	cur := w.get(a.Kind, a.Name)
	if a.Type == ActionCreate {
		if cur != nil {
			return fmt.Errorf("already exists")
		}
		o := roundTrip(w.t, a.Object)
		if o.GetMeta().ResourceVersion != 0 {
			return fmt.Errorf("create with a resourceVersion")
		}
		o.GetMeta().Generation = 0
		w.add(o)
		return nil
	}
	if cur == nil {
		return fmt.Errorf("not found")
	}
	if rv := a.Object.GetMeta().ResourceVersion; rv != 0 && rv != cur.GetMeta().ResourceVersion {
		return fmt.Errorf("conflict: rv %d, stored %d", rv, cur.GetMeta().ResourceVersion)
	}
	if a.Type == ActionDelete {
		w.del(a.Kind, a.Name)
		return nil
	}
	next := roundTrip(w.t, a.Object)
	stored := roundTrip(w.t, cur)
	w.rv++
	switch a.Type {
	case ActionUpdate: // labels and spec
		setStatus(next, stored)
		next.GetMeta().Generation = stored.GetMeta().Generation
		if !reflect.DeepEqual(specOf(next), specOf(stored)) {
			next.GetMeta().Generation++
		}
	case ActionUpdateStatus: // status only
		setStatus(stored, next)
		next = stored
	case ActionBind: // spec and status
		if a.Kind != api.KindPod {
			return fmt.Errorf("bind of a %s", a.Kind)
		}
		next.GetMeta().Labels = stored.GetMeta().Labels
	default:
		return fmt.Errorf("unknown action type %q", a.Type)
	}
	m := next.GetMeta()
	m.ResourceVersion, m.Created = w.rv, stored.GetMeta().Created
	w.put(next)
	return nil
}

// setStatus copies src's status into dst (same kind).
func setStatus(dst, src api.Object) {
	switch d := dst.(type) {
	case *api.Node:
		d.Status = src.(*api.Node).Status
	case *api.Pod:
		d.Status = src.(*api.Pod).Status
	case *api.Deployment:
		d.Status = src.(*api.Deployment).Status
	case *api.Daemon:
		d.Status = src.(*api.Daemon).Status
	case *api.Service:
		d.Status = src.(*api.Service).Status
	}
}

func specOf(o api.Object) any {
	switch o := o.(type) {
	case *api.Node:
		return o.Spec
	case *api.Pod:
		return o.Spec
	case *api.Deployment:
		return o.Spec
	case *api.Daemon:
		return o.Spec
	case *api.Service:
		return o.Spec
	}
	return nil
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
		Status: api.NodeStatus{Phase: api.NodeReady, Fenced: true, Since: t0, Address: "10.0.0." + fmt.Sprint(len(name)),
			MemoryBytes: 4 * gib, CPUs: 4, Arch: "arm64", Model: "Pi 4"}}
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
	p := newPod(name, owner, t, api.TemplateHash(t))
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
