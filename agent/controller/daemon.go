package controller

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
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
//   - pods on nodes that left, were deleted or no longer match are deleted,
//     and so is every pod but one on a node with several (the one kept:
//     available first, then the oldest, then by name);
//   - a Ready matching node without a pod gets one, unless it is cordoned
//     (a cordoned node keeps the pod it has);
//   - on a template change pods are replaced (delete, then create under a
//     new name) one at a time: every unavailable old pod at once, and one
//     available old pod only while no pod of the daemon is unavailable.
//
// Status (desired, current, ready, revision, observedGeneration,
// podsCreated) is written as it will be once the actions are applied,
// only when it changes. As for a deployment, every action of a pass
// carries the same Txn (the counter commits with the creates), and a pass
// creates only as many pods as fit in createBudget.
func ReconcileDaemon(now time.Time, ds *api.Daemon, pods []*api.Pod, nodes []*api.Node) []Action {
	return reconcileDaemon(now, ds, pods, sortNodes(nodes), nodeIndex(nodes), podNameSet(pods))
}

// sortNodes returns the non-nil nodes sorted by name, in a new slice.
func sortNodes(nodes []*api.Node) []*api.Node {
	sorted := slices.DeleteFunc(slices.Clone(nodes), func(n *api.Node) bool { return n == nil })
	slices.SortFunc(sorted, compareByName)
	return sorted
}

func reconcileDaemon(now time.Time, ds *api.Daemon, pods []*api.Pod, sortedNodes []*api.Node, nodeByName map[string]*api.Node, taken func(string) bool) []Action {
	if ds == nil {
		return nil
	}
	rev := api.TemplateHash(ds.Spec.Template)
	owner := api.OwnerRef{Kind: api.KindDaemon, Name: ds.Metadata.Name}

	matches := func(n *api.Node) bool {
		return n != nil && n.Status.Phase != api.NodeLeft && matchNode(ds.Spec.Template.NodeSelector, n)
	}
	eligible := func(n *api.Node) bool { // may receive a new pod
		return matches(n) && n.Status.Phase == api.NodeReady && !n.Spec.Unschedulable
	}

	owned := slices.Clone(pods)
	owned = slices.DeleteFunc(owned, func(p *api.Pod) bool { return p == nil || p.Spec.Owner != owner })
	// The pod kept on a node is the first in this order.
	slices.SortFunc(owned, func(a, b *api.Pod) int {
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

	var deletes, creates []Action
	current := make(map[string]*api.Pod) // node → live pod kept there
	for _, p := range owned {
		n := nodeByName[p.Spec.Node]
		switch {
		case p.Status.Phase.Terminal():
			deletes = append(deletes, newAction(ActionDelete, p, "pod is %s", p.Status.Phase))
		case n == nil:
			deletes = append(deletes, newAction(ActionDelete, p, "board %s is gone", orNone(p.Spec.Node)))
		case !matches(n):
			deletes = append(deletes, newAction(ActionDelete, p, "board %s no longer matches the node selector or left", n.Metadata.Name))
		case current[n.Metadata.Name] != nil:
			deletes = append(deletes, newAction(ActionDelete, p, "board %s already has pod %s of the daemon", n.Metadata.Name, current[n.Metadata.Name].Metadata.Name))
		default:
			current[n.Metadata.Name] = p
		}
	}
	names := newNamer(nameKey(api.KindDaemon, ds.Metadata.Name, ds.Metadata.Created), ds.Status.PodsCreated, taken)
	maxCreates := -1 // computed at the first create
	create := func(n *api.Node, why string) {
		if maxCreates < 0 {
			maxCreates = createsThatFit(&ds.Spec.Template)
		}
		if len(creates) >= maxCreates {
			return // the next pass creates it
		}
		name := names.name(daemonPodPrefix(ds.Metadata.Name, n.Metadata.Name))
		if name == "" {
			return
		}
		p := newPod(name, owner, ds.Spec.Template, rev)
		p.Spec.Node = n.Metadata.Name
		creates = append(creates, newAction(ActionCreate, p, "%s", why))
	}

	// Missing pods, and unavailable old pods replaced at once.
	unavailable := 0
	var oldAvailable []*api.Pod
	for _, n := range sortedNodes {
		p := current[n.Metadata.Name]
		switch {
		case p == nil && eligible(n):
			create(n, fmt.Sprintf("board %s matches and has no pod", n.Metadata.Name))
			unavailable++
		case p == nil:
		case p.Spec.Revision == rev:
			if !available(p, nodeByName) {
				unavailable++
			}
		case !eligible(n):
			// Old pod on a cordoned or not Ready node: left until the
			// node can take its replacement.
			if !available(p, nodeByName) {
				unavailable++
			}
		case !available(p, nodeByName):
			deletes = append(deletes, newAction(ActionDelete, p, "rolling update to revision %s (pod not available)", rev))
			create(n, fmt.Sprintf("rolling update to revision %s", rev))
			unavailable++
		default:
			oldAvailable = append(oldAvailable, p)
		}
	}
	// One available old pod at a time.
	if unavailable == 0 && len(oldAvailable) > 0 {
		p := oldAvailable[0]
		deletes = append(deletes, newAction(ActionDelete, p, "rolling update to revision %s", rev))
		create(nodeByName[p.Spec.Node], fmt.Sprintf("rolling update to revision %s", rev))
		unavailable++
	}

	acts := append(deletes, creates...)
	slices.SortStableFunc(acts, func(a, b Action) int { // deletes before creates, each by name
		if a.Type != b.Type {
			if a.Type == ActionDelete {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})

	// Status once applied.
	deleted := make(map[string]bool)
	for _, a := range deletes {
		deleted[a.Name] = true
	}
	st := ds.Status
	st.ObservedGeneration = ds.Metadata.Generation
	st.Revision = rev
	st.PodsCreated = names.next
	st.Desired, st.Current, st.Ready = 0, 0, 0
	for _, n := range sortedNodes {
		p := current[n.Metadata.Name]
		if p != nil && deleted[p.Metadata.Name] {
			p = nil
		}
		if eligible(n) || (p != nil && matches(n)) {
			st.Desired++
		}
	}
	for _, p := range current {
		if !deleted[p.Metadata.Name] {
			st.Current++
			if available(p, nodeByName) {
				st.Ready++
			}
		}
	}
	st.Current += len(creates)
	if !reflect.DeepEqual(st, ds.Status) {
		nd := *ds
		nd.Status = st
		acts = append(acts, newAction(ActionUpdateStatus, &nd, "%d desired, %d current, %d ready", st.Desired, st.Current, st.Ready))
	}
	return inTxn(acts, KeyOf(api.KindDaemon, ds.Metadata.Name))
}
