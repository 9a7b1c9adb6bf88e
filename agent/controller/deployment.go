package controller

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/herd-dev/herd/api"
)

// Deployment condition reasons.
const (
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
	reasonRolloutComplete    = "NewRevisionAvailable"
	reasonRolling            = "RollingUpdate"
	reasonScaling            = "Scaling"
	reasonUnschedulable      = "Unschedulable"
	reasonPodFailed          = "PodFailed"
)

// ReconcileDeployment keeps a Deployment's pods at spec.replicas of its
// current template revision. pods are the pods the deployment owns
// (spec.owner = deployments/<name>; others are ignored), nodes every node
// (a pod on a node that is not Ready does not count as available).
//
// In one pass it:
//   - deletes Lost, Failed and Succeeded pods, so they are replaced;
//   - without a rollout, creates missing pods and deletes surplus ones,
//     Pending first, then pods on nodes that are not Ready, then not
//     ready ones, then the newest;
//   - during a rollout (pods of an older revision remain), creates pods of
//     the new revision while the total stays within replicas+maxSurge, and
//     deletes old pods (unavailable ones first) only while the available
//     count stays at least replicas-maxUnavailable (as Kubernetes computes
//     it: total - minAvailable - unavailable new pods), repeating both
//     steps until neither can move, so that one pass reaches the fixed
//     point for the current observations;
//   - writes the status (counts, revision, observedGeneration, conditions
//     Available, Progressing, ReplicaFailure) as it will be once the
//     actions are applied, only when it changes.
//
// Actions come deletes first, then creates, then the status: applied in
// that order the total never exceeds replicas+maxSurge and availability
// never drops below replicas-maxUnavailable.
//
// New pods are Pending, named <deployment>-<5 chars>: pod number
// status.podsCreated gets the suffix scramble(podsCreated), skipping names
// of any pod in pods (others' too), and the status write advances the
// counter (see api.DeploymentStatus.PodsCreated). Every action of a pass
// carries the same Txn, so the deletes, the creates and the counter
// commit together, the status write compare-and-swap on the deployment's
// resourceVersion: reconciling twice from the same state (a retry, or a
// new leader) asks for the same names, and a name is never handed out
// twice, even once its pod is gone from the store.
//
// A pass creates only as many pods as fit in half a Raft transaction
// (createBudget); the writes wake the deployment again and the next pass
// creates more.
func ReconcileDeployment(now time.Time, d *api.Deployment, pods []*api.Pod, nodes []*api.Node) []Action {
	return reconcileDeployment(now, d, pods, nodeIndex(nodes), podNameSet(pods))
}

func reconcileDeployment(now time.Time, d *api.Deployment, pods []*api.Pod, nodeByName map[string]*api.Node, taken func(string) bool) []Action {
	if d == nil {
		return nil
	}
	rev := api.TemplateHash(d.Spec.Template)
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = max(0, *d.Spec.Replicas)
	}
	surge, unavail := 1, 0
	if d.Spec.Strategy.MaxSurge != nil {
		surge = max(0, *d.Spec.Strategy.MaxSurge)
	}
	if d.Spec.Strategy.MaxUnavailable != nil {
		unavail = max(0, *d.Spec.Strategy.MaxUnavailable)
	}
	if surge == 0 && unavail == 0 {
		surge = 1 // both zero could never make progress; admission should refuse it
	}
	owner := api.OwnerRef{Kind: api.KindDeployment, Name: d.Metadata.Name}

	var deletes []Action
	var failed []*api.Pod
	var live, newPods, oldPods []*api.Pod
	for _, p := range pods {
		if p == nil || p.Spec.Owner != owner {
			continue
		}
		switch {
		case p.Status.Phase.Terminal():
			if p.Status.Phase != api.PodLost {
				failed = append(failed, p)
			}
			deletes = append(deletes, newAction(ActionDelete, p, "pod is %s; replacing it", p.Status.Phase))
		case p.Spec.Revision == rev:
			newPods = append(newPods, p)
			live = append(live, p)
		default:
			oldPods = append(oldPods, p)
			live = append(live, p)
		}
	}
	slices.SortFunc(deletes, func(a, b Action) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(failed, compareByName)
	sortForDeletion(newPods, nodeByName)
	sortForDeletion(oldPods, nodeByName)

	nNew, nOld := len(newPods), len(oldPods)
	availNew, availOld := countAvailable(newPods, nodeByName), countAvailable(oldPods, nodeByName)
	deleted := make(map[string]bool)
	toCreate := 0
	deletePod := func(p *api.Pod, why string) {
		deleted[p.Metadata.Name] = true
		deletes = append(deletes, newAction(ActionDelete, p, "%s", why))
	}

	if nOld == 0 {
		if nNew < replicas {
			toCreate = replicas - nNew
		}
		for i := 0; nNew > replicas; i++ {
			deletePod(newPods[i], fmt.Sprintf("scaling down to %d replicas", replicas))
			if available(newPods[i], nodeByName) {
				availNew--
			}
			nNew--
		}
	} else {
		minAvailable := max(0, replicas-unavail)
		maxTotal := replicas + surge
		oi := 0 // next old pod to delete, in deletion order
		for {
			moved := false
			total := nNew + toCreate + nOld
			if c := min(replicas-(nNew+toCreate), maxTotal-total); c > 0 {
				toCreate += c
				moved = true
			}
			total = nNew + toCreate + nOld
			newUnavailable := nNew + toCreate - availNew
			for scaleDown := total - minAvailable - newUnavailable; scaleDown > 0 && oi < len(oldPods); scaleDown-- {
				p := oldPods[oi]
				oi++
				deletePod(p, fmt.Sprintf("rolling update to revision %s", rev))
				if available(p, nodeByName) {
					availOld--
				}
				nOld--
				moved = true
			}
			if !moved {
				break
			}
		}
		// Replicas lowered during a rollout: drop surplus new pods.
		for i := 0; nNew > replicas; i++ {
			deletePod(newPods[i], fmt.Sprintf("scaling down to %d replicas", replicas))
			if available(newPods[i], nodeByName) {
				availNew--
			}
			nNew--
		}
	}

	// Creates: as many as fit in one transaction, named from the counter.
	// Fewer creates than planned keep the bounds: the deletes above do not
	// depend on toCreate (they free what availability allows), and the
	// total only shrinks.
	if toCreate > 0 {
		toCreate = min(toCreate, createsThatFit(&d.Spec.Template))
	}
	names := newNamer(nameKey(api.KindDeployment, d.Metadata.Name, d.Metadata.Created), d.Status.PodsCreated, taken)
	prefix := deploymentPodPrefix(d.Metadata.Name)
	acts := deletes
	for range toCreate {
		name := names.name(prefix)
		if name == "" {
			toCreate = len(acts) - len(deletes)
			break
		}
		p := newPod(name, owner, d.Spec.Template, rev)
		acts = append(acts, newAction(ActionCreate, p, "%d of %d replicas of revision %s", nNew+toCreate, replicas, rev))
	}

	// Status as it will be once the actions are applied.
	st := d.Status
	st.ObservedGeneration = d.Metadata.Generation
	st.Revision = rev
	st.PodsCreated = names.next
	st.Replicas = nNew + toCreate + nOld
	st.UpdatedReplicas = nNew + toCreate
	st.ReadyReplicas = availNew + availOld
	st.AvailableReplicas = availNew + availOld
	minAvailable := max(0, replicas-unavail)
	if st.AvailableReplicas >= minAvailable {
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: api.ConditionAvailable, Status: api.ConditionTrue,
			Reason: reasonMinimumAvailable, Message: fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, replicas)}, now)
	} else {
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: api.ConditionAvailable, Status: api.ConditionFalse,
			Reason: reasonMinimumUnavailable, Message: fmt.Sprintf("%d of %d replicas available, %d required", st.AvailableReplicas, replicas, minAvailable)}, now)
	}
	complete := nOld == 0 && st.UpdatedReplicas == replicas && st.AvailableReplicas == replicas
	switch {
	case complete:
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonRolloutComplete, Message: fmt.Sprintf("revision %s is available", rev)}, now)
	case nOld > 0:
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonRolling, Message: fmt.Sprintf("%d of %d pods updated to revision %s, %d old remain", st.UpdatedReplicas, replicas, rev, nOld)}, now)
	default:
		st.Conditions = setCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonScaling, Message: fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, replicas)}, now)
	}
	st.Conditions = replicaFailure(st.Conditions, live, deleted, failed, complete, now)

	if !reflect.DeepEqual(st, d.Status) {
		nd := *d
		nd.Status = st
		acts = append(acts, newAction(ActionUpdateStatus, &nd, "%d/%d updated, %d available", st.UpdatedReplicas, replicas, st.AvailableReplicas))
	}
	return inTxn(acts, KeyOf(api.KindDeployment, d.Metadata.Name))
}

// replicaFailure sets the ReplicaFailure condition: True/Unschedulable while
// a remaining pod cannot be scheduled; True/PodFailed when pods failed this
// pass, kept until the rollout is complete so it does not vanish with the
// failed pod; absent otherwise.
func replicaFailure(conds []api.Condition, live []*api.Pod, deleted map[string]bool, failed []*api.Pod, complete bool, now time.Time) []api.Condition {
	var unsched []*api.Pod
	for _, p := range live {
		if deleted[p.Metadata.Name] || p.Status.Phase != api.PodPending {
			continue
		}
		if c := findCondition(p.Status.Conditions, api.ConditionScheduled); c != nil && c.Status == api.ConditionFalse {
			unsched = append(unsched, p)
		}
	}
	slices.SortFunc(unsched, compareByName)
	switch {
	case len(unsched) > 0:
		c := findCondition(unsched[0].Status.Conditions, api.ConditionScheduled)
		return setCondition(conds, api.Condition{Type: api.ConditionReplicaFailure, Status: api.ConditionTrue,
			Reason: reasonUnschedulable, Message: fmt.Sprintf("%d pods cannot be scheduled; %s: %s", len(unsched), unsched[0].Metadata.Name, c.Message)}, now)
	case len(failed) > 0:
		msg := failed[0].Status.Message
		if msg == "" {
			msg = string(failed[0].Status.Phase)
		}
		return setCondition(conds, api.Condition{Type: api.ConditionReplicaFailure, Status: api.ConditionTrue,
			Reason: reasonPodFailed, Message: fmt.Sprintf("pod %s: %s", failed[0].Metadata.Name, msg)}, now)
	case complete:
		return removeCondition(conds, api.ConditionReplicaFailure)
	}
	if c := findCondition(conds, api.ConditionReplicaFailure); c != nil && c.Reason == reasonPodFailed {
		return conds
	}
	return removeCondition(conds, api.ConditionReplicaFailure)
}

func countAvailable(ps []*api.Pod, nodes map[string]*api.Node) int {
	n := 0
	for _, p := range ps {
		if available(p, nodes) {
			n++
		}
	}
	return n
}

// sortForDeletion orders pods by how willingly they are deleted: Pending
// ones first, then those on nodes that are not Ready, then those not
// available, then the newest, then by name (descending).
func sortForDeletion(ps []*api.Pod, nodes map[string]*api.Node) {
	type ranked struct {
		p    *api.Pod
		rank int
	}
	rs := make([]ranked, len(ps))
	for i, p := range ps {
		r := 3
		switch {
		case p.Status.Phase == api.PodPending || p.Status.Phase == "":
			r = 0
		case nodes[p.Spec.Node] != nil && nodes[p.Spec.Node].Status.Phase != api.NodeReady:
			r = 1
		case !available(p, nodes):
			r = 2
		}
		rs[i] = ranked{p, r}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if c := b.p.Metadata.Created.Compare(a.p.Metadata.Created); c != 0 {
			return c
		}
		return cmp.Compare(b.p.Metadata.Name, a.p.Metadata.Name)
	})
	for i := range rs {
		ps[i] = rs[i].p
	}
}

// newPod returns a Pending pod made from template t.
func newPod(name string, owner api.OwnerRef, t api.PodTemplate, rev string) *api.Pod {
	return &api.Pod{
		Kind:     api.KindPod,
		Metadata: api.ObjectMeta{Name: name, Labels: maps.Clone(t.Labels)},
		Spec:     api.PodSpec{Owner: owner, Template: t.DeepCopy(), Revision: rev},
		Status:   api.PodStatus{Phase: api.PodPending, Unit: api.UnitName(name)},
	}
}
