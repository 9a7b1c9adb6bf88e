package controller

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/herd-dev/herd/api"
)

// ReconcileDaemon keeps one pod of a Daemon on every Ready node its
// template's node selector matches. pods are the pods the daemon owns
// (others are ignored), nodes every node.
//
// Daemon pods are created Pending but pinned (spec.node set): the
// scheduling step then checks the node's resources and ports and assigns
// dynamic ports, exactly as for other pods. A node's pod is the daemon's
// pod whose spec.node names it, whatever its name. New pods are named
// daemonPodName with the daemon's status.podsCreated as the number,
// skipping names of any pod in pods, so a replacement on the same node
// never has its predecessor's name. In one pass:
//   - Lost, Failed and Succeeded pods are deleted; the replacement, under a
//     new name, is created when its node is Ready again;
//   - pods on nodes that left, were deleted, no longer match or are drained
//     with their daemons (spec.drain.daemons) are deleted,
//     and so is every pod but one on a node with several (the one kept:
//     available first, then the oldest, then by name);
//   - a Ready matching node without a pod gets one, unless it is cordoned
//     (a cordoned node keeps the pod it has);
//   - on a template change pods are replaced (delete, then create under a
//     new name) board by board (rollingReplacements): every unavailable
//     old pod at once, and available old pods only while fewer than
//     spec.strategy.maxUnavailable (default 1) boards have no available
//     pod, so the next board is replaced only once the last one's new pod
//     is Ready.
//
// Status (desired, current, ready, revision, observedGeneration,
// podsCreated, the rollout history of api.RecordRevision) is written as it will be once the actions are applied,
// only when it changes. As for a deployment, every action of a pass
// carries the same Txn (the counter commits with the creates), and a pass
// creates only as many pods as fit in createBudget.
func ReconcileDaemon(now time.Time, ds *api.Daemon, pods []*api.Pod, nodes []*api.Node) []Action {
	return reconcileDaemon(now, ds, pods, sortNodes(nodes), nodeIndex(nodes), podNameSet(pods), nil)
}

// sortNodes returns the non-nil nodes sorted by name, in a new slice.
func sortNodes(nodes []*api.Node) []*api.Node {
	sorted := slices.DeleteFunc(slices.Clone(nodes), func(n *api.Node) bool { return n == nil })
	slices.SortFunc(sorted, compareByName)
	return sorted
}

// reconcileDaemon is ReconcileDaemon with the stored secrets by name (see
// reconcileDeployment).
func reconcileDaemon(now time.Time, ds *api.Daemon, pods []*api.Pod, sortedNodes []*api.Node, nodeByName map[string]*api.Node, taken func(string) bool, secrets map[string]*api.Secret) []Action {
	if ds == nil {
		return nil
	}
	r := newDaemonPass(ds, pods, nodeByName, taken, secrets)
	r.keepOnePerNode()
	r.placeAndRoll(sortedNodes)
	acts := append(r.deletes, r.creates...)
	sort.SliceStable(acts, func(i, j int) bool { // deletes before creates, each by name
		a, b := &acts[i], &acts[j]
		if a.Type != b.Type {
			return a.Type == ActionDelete
		}
		return a.Name < b.Name
	})
	if st := r.status(now, sortedNodes); !reflect.DeepEqual(st, ds.Status) {
		nd := *ds
		nd.Status = st
		acts = append(acts, newAction(ActionUpdateStatus, &nd, "%d desired, %d current, %d ready", st.Desired, st.Current, st.Ready))
	}
	return inTxn(acts, KeyOf(api.KindDaemon, ds.Metadata.Name))
}

// daemonPass is one reconcileDaemon pass in progress.
type daemonPass struct {
	ds               *api.Daemon
	rev              string
	secrets          []api.PodSecret // what new pods load
	owner            api.OwnerRef
	nodeByName       map[string]*api.Node
	owned            []*api.Pod          // the daemon's pods, the one kept on a node first
	current          map[string]*api.Pod // node → live pod kept there
	names            *namer
	maxCreates       int // -1 until the first create
	deletes, creates []Action
}

// newDaemonPass collects ds's pods, sorted so that the pod kept on a node
// comes first: by node, available first, then the oldest, then by name.
func newDaemonPass(ds *api.Daemon, pods []*api.Pod, nodeByName map[string]*api.Node, taken func(string) bool, secrets map[string]*api.Secret) *daemonPass {
	rev, refs := api.PodRevision(ds.Spec.Template, secrets)
	r := &daemonPass{
		ds:         ds,
		rev:        rev,
		secrets:    refs,
		owner:      api.OwnerRef{Kind: api.KindDaemon, Name: ds.Metadata.Name},
		nodeByName: nodeByName,
		current:    make(map[string]*api.Pod),
		names:      newNamer(nameKey(api.KindDaemon, ds.Metadata.Name, ds.Metadata.Created), ds.Status.PodsCreated, taken),
		maxCreates: -1,
	}
	r.owned = slices.DeleteFunc(slices.Clone(pods), func(p *api.Pod) bool { return p == nil || p.Spec.Owner != r.owner })
	slices.SortFunc(r.owned, func(a, b *api.Pod) int {
		if c := cmp.Compare(a.Spec.Node, b.Spec.Node); c != 0 {
			return c
		}
		if c := cmp.Compare(boolInt(!available(a, nodeByName)), boolInt(!available(b, nodeByName))); c != 0 {
			return c
		}
		if c := a.Metadata.Created.Compare(b.Metadata.Created); c != 0 {
			return c
		}
		return compareByName(a, b)
	})
	return r
}

// matches reports whether n may run the daemon's pod: it matches the node
// selector and has the template's devices (a daemon with devices runs on
// every board that has them, like one with a node selector).
func (r *daemonPass) matches(n *api.Node) bool {
	return n != nil && n.Status.Phase != api.NodeLeft && matchNode(r.ds.Spec.Template.NodeSelector, n) &&
		n.Status.MissingDevice(r.ds.Spec.Template.Devices) == ""
}

// eligible reports whether n may receive a new pod.
func (r *daemonPass) eligible(n *api.Node) bool {
	return r.matches(n) && n.Status.Phase == api.NodeReady && !n.Spec.Unschedulable
}

// keepOnePerNode deletes terminal pods, pods on nodes that are gone, left
// or no longer match, and every pod but the first on a node; the others
// become the node's current pod.
func (r *daemonPass) keepOnePerNode() {
	for _, p := range r.owned {
		n := r.nodeByName[p.Spec.Node]
		switch {
		case p.Status.Phase.Terminal():
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "pod is %s", p.Status.Phase))
		case n == nil:
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "board %s is gone", orNone(p.Spec.Node)))
		case !r.matches(n):
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "board %s no longer matches the node selector or left", n.Metadata.Name))
		case n.DrainsDaemons():
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "board %s is drained with its daemons (herdctl drain --daemons)", n.Metadata.Name))
		case r.current[n.Metadata.Name] != nil:
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "board %s already has pod %s of the daemon", n.Metadata.Name, r.current[n.Metadata.Name].Metadata.Name))
		default:
			r.current[n.Metadata.Name] = p
		}
	}
}

// create adds a pod pinned to n, unless the pass's creates are used up
// (the next pass creates it) or no name is left.
func (r *daemonPass) create(n *api.Node, why string) {
	if r.maxCreates < 0 {
		r.maxCreates = createsThatFit(&r.ds.Spec.Template)
	}
	if len(r.creates) >= r.maxCreates {
		return
	}
	name := r.names.name(daemonPodPrefix(r.ds.Metadata.Name, n.Metadata.Name))
	if name == "" {
		return
	}
	p := newPod(name, r.owner, r.ds.Spec.Template, r.rev, r.secrets)
	p.Spec.Node = n.Metadata.Name
	r.creates = append(r.creates, newAction(ActionCreate, p, "%s", why))
}

// placeAndRoll creates the missing pods, replaces unavailable old pods at
// once, and available old pods as rollingReplacements allows.
func (r *daemonPass) placeAndRoll(sortedNodes []*api.Node) {
	unavailable := 0
	var oldAvailable []*api.Pod
	for _, n := range sortedNodes {
		p := r.current[n.Metadata.Name]
		switch {
		case p == nil && r.eligible(n):
			r.create(n, fmt.Sprintf("board %s matches and has no pod", n.Metadata.Name))
			unavailable++
		case p == nil:
		case p.Spec.Revision == r.rev:
			if !available(p, r.nodeByName) {
				unavailable++
			}
		case !r.eligible(n):
			// Old pod on a cordoned or not Ready node: left until the
			// node can take its replacement.
			if !available(p, r.nodeByName) {
				unavailable++
			}
		case !available(p, r.nodeByName):
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "rolling update to revision %s (pod not available)", r.rev))
			r.create(n, fmt.Sprintf("rolling update to revision %s", r.rev))
			unavailable++
		default:
			oldAvailable = append(oldAvailable, p)
		}
	}
	for _, p := range rollingReplacements(daemonMaxUnavailable(r.ds), unavailable, oldAvailable) {
		r.deletes = append(r.deletes, newAction(ActionDelete, p, "rolling update to revision %s", r.rev))
		r.create(r.nodeByName[p.Spec.Node], fmt.Sprintf("rolling update to revision %s", r.rev))
	}
}

// daemonMaxUnavailable is ds's spec.strategy.maxUnavailable, default
// api.DefaultDaemonMaxUnavailable; below 1 (which admission refuses) it is
// 1, so a rollout always moves.
func daemonMaxUnavailable(ds *api.Daemon) int {
	if m := ds.Spec.Strategy.MaxUnavailable; m != nil {
		return max(1, *m)
	}
	return api.DefaultDaemonMaxUnavailable
}

// rollingReplacements picks the available old pods a daemon pass replaces
// (oldAvailable in board order): as many as keep the boards without an
// available pod at most maxUnavailable, counting the unavailable ones
// (boards whose pod is not ready, being replaced, or missing and about to
// be created). None while unavailable already reaches maxUnavailable: the
// next board waits until a replaced one's pod is Ready.
func rollingReplacements(maxUnavailable, unavailable int, oldAvailable []*api.Pod) []*api.Pod {
	n := min(max(0, maxUnavailable-unavailable), len(oldAvailable))
	return oldAvailable[:n]
}

// status returns the daemon's status as it will be once the pass's
// actions are applied.
func (r *daemonPass) status(now time.Time, sortedNodes []*api.Node) api.DaemonStatus {
	deleted := make(map[string]bool)
	for _, a := range r.deletes {
		deleted[a.Name] = true
	}
	st := r.ds.Status
	st.ObservedGeneration = r.ds.Metadata.Generation
	st.Revision = r.rev
	st.PodsCreated = r.names.next
	st.History = api.RecordRevision(st.History, r.ds.Spec.Template, r.rev, r.ds.Metadata.Generation, now)
	st.Desired, st.Current, st.Ready = 0, 0, 0
	for _, n := range sortedNodes {
		p := r.current[n.Metadata.Name]
		if p != nil && deleted[p.Metadata.Name] {
			p = nil
		}
		if r.eligible(n) || (p != nil && r.matches(n)) {
			st.Desired++
		}
	}
	for _, p := range r.current {
		if !deleted[p.Metadata.Name] {
			st.Current++
			if available(p, r.nodeByName) {
				st.Ready++
			}
		}
	}
	st.Current += len(r.creates)
	return st
}
