package controller

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
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
//     Available, Progressing, ReplicaFailure, the rollout history of
//     api.RecordRevision) as it will be once the actions are applied, only
//     when it changes.
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
	return reconcileDeployment(now, d, pods, nodeIndex(nodes), podNameSet(pods), nil)
}

// reconcileDeployment is ReconcileDeployment with the stored secrets by
// name: a template that names secrets has their versions in its revision
// (api.PodRevision), so a changed secret rolls the pods like a changed
// template, and its new pods carry the secrets' keys.
func reconcileDeployment(now time.Time, d *api.Deployment, pods []*api.Pod, nodeByName map[string]*api.Node, taken func(string) bool, secrets map[string]*api.Secret) []Action {
	if d == nil {
		return nil
	}
	r := newRollout(d, pods, nodeByName, secrets)
	if r.nOld == 0 {
		r.scale()
	} else {
		r.roll()
	}
	acts := r.creates(d, taken)
	if st := r.status(now, d); !reflect.DeepEqual(st, d.Status) {
		nd := *d
		nd.Status = st
		acts = append(acts, newAction(ActionUpdateStatus, &nd, "%d/%d updated, %d available", st.UpdatedReplicas, r.replicas, st.AvailableReplicas))
	}
	return inTxn(acts, KeyOf(api.KindDeployment, d.Metadata.Name))
}

// rollout is one reconcileDeployment pass in progress: the deployment's
// pods sorted into kinds, the counts as they will be once the pass's
// actions are applied, and the actions so far.
type rollout struct {
	rev                      string
	secrets                  []api.PodSecret // what new pods load
	owner                    api.OwnerRef
	replicas, surge, unavail int
	nodeByName               map[string]*api.Node
	live, newPods, oldPods   []*api.Pod
	failed                   []*api.Pod // failed this pass (not Lost), by name
	deletes                  []Action
	deleted                  map[string]bool
	nNew, nOld               int
	availNew, availOld       int
	toCreate                 int
	podsCreated              int64
	// Moves (move.go): the deployment, the pods leaving (their
	// replacement exists), the replacements to create, the progress.
	dep          *api.Deployment
	leaving      map[string]bool
	nLeaving     int
	replacements []replacement
	moveNote     string
	rebalance    *api.RebalanceStatus
}

// newRollout reads d's spec (replicas, strategy) and sorts its pods:
// terminal ones are deleted at once (sorted by name), the live ones are new
// (the current revision) or old, each kind in deletion order.
func newRollout(d *api.Deployment, pods []*api.Pod, nodeByName map[string]*api.Node, secrets map[string]*api.Secret) *rollout {
	rev, refs := api.PodRevision(d.Spec.Template, secrets)
	r := &rollout{
		rev:        rev,
		secrets:    refs,
		owner:      api.OwnerRef{Kind: api.KindDeployment, Name: d.Metadata.Name},
		replicas:   1,
		surge:      1,
		nodeByName: nodeByName,
		deleted:    make(map[string]bool),
		dep:        d,
	}
	if d.Spec.Replicas != nil {
		r.replicas = max(0, *d.Spec.Replicas)
	}
	if d.Spec.Strategy.MaxSurge != nil {
		r.surge = max(0, *d.Spec.Strategy.MaxSurge)
	}
	if d.Spec.Strategy.MaxUnavailable != nil {
		r.unavail = max(0, *d.Spec.Strategy.MaxUnavailable)
	}
	if r.surge == 0 && r.unavail == 0 {
		r.surge = 1 // both zero could never make progress; admission should refuse it
	}
	for _, p := range pods {
		if p == nil || p.Spec.Owner != r.owner {
			continue
		}
		switch {
		case p.Status.Phase.Terminal():
			if p.Status.Phase != api.PodLost {
				r.failed = append(r.failed, p)
			}
			r.deletes = append(r.deletes, newAction(ActionDelete, p, "pod is %s; replacing it", p.Status.Phase))
		case p.Spec.Revision == r.rev:
			r.newPods = append(r.newPods, p)
			r.live = append(r.live, p)
		default:
			r.oldPods = append(r.oldPods, p)
			r.live = append(r.live, p)
		}
	}
	sort.Slice(r.deletes, func(i, j int) bool { return r.deletes[i].Name < r.deletes[j].Name })
	slices.SortFunc(r.failed, compareByName)
	sortForDeletion(r.newPods, nodeByName)
	sortForDeletion(r.oldPods, nodeByName)
	r.nNew, r.nOld = len(r.newPods), len(r.oldPods)
	r.availNew, r.availOld = countAvailable(r.newPods, nodeByName), countAvailable(r.oldPods, nodeByName)
	return r
}

func (r *rollout) deletePod(p *api.Pod, why string) {
	r.deleted[p.Metadata.Name] = true
	r.deletes = append(r.deletes, newAction(ActionDelete, p, "%s", why))
}

// minAvailable is how many pods must stay available: replicas -
// maxUnavailable.
func (r *rollout) minAvailable() int { return max(0, r.replicas-r.unavail) }

// scale plans the pass without a rollout: settle the moves in flight,
// create the missing pods, delete the surplus, start the next move
// (move.go). A pod leaving in a move does not count towards replicas.
func (r *rollout) scale() {
	r.finishMoves()
	if n := r.nNew - r.nLeaving; n < r.replicas {
		r.toCreate = r.replicas - n
	}
	r.dropSurplusNew()
	r.startMove()
}

// dropSurplusNew deletes new pods beyond replicas, in deletion order,
// skipping those already deleted or leaving.
func (r *rollout) dropSurplusNew() {
	for i := 0; r.nNew-r.nLeaving > r.replicas && i < len(r.newPods); i++ {
		p := r.newPods[i]
		if r.deleted[p.Metadata.Name] || r.leaving[p.Metadata.Name] {
			continue
		}
		r.dropNew(p, fmt.Sprintf("scaling down to %d replicas", r.replicas))
	}
}

// roll plans a rollout step: create new pods within replicas+maxSurge and
// delete old ones while availability allows, until neither moves; then
// drop surplus new pods (replicas lowered during the rollout).
func (r *rollout) roll() {
	maxTotal := r.replicas + r.surge
	oi := 0 // next old pod to delete, in deletion order
	for {
		moved := false
		total := r.nNew + r.toCreate + r.nOld
		if c := min(r.replicas-(r.nNew+r.toCreate), maxTotal-total); c > 0 {
			r.toCreate += c
			moved = true
		}
		total = r.nNew + r.toCreate + r.nOld
		newUnavailable := r.nNew + r.toCreate - r.availNew
		for scaleDown := total - r.minAvailable() - newUnavailable; scaleDown > 0 && oi < len(r.oldPods); scaleDown-- {
			p := r.oldPods[oi]
			oi++
			r.deletePod(p, fmt.Sprintf("rolling update to revision %s", r.rev))
			if available(p, r.nodeByName) {
				r.availOld--
			}
			r.nOld--
			moved = true
		}
		if !moved {
			break
		}
	}
	r.dropSurplusNew()
}

// creates returns the deletes followed by the creates: as many as fit in
// one transaction, named from the counter. Fewer creates than planned keep
// the bounds: the deletes do not depend on toCreate (they free what
// availability allows), and the total only shrinks.
func (r *rollout) creates(d *api.Deployment, taken func(string) bool) []Action {
	if r.toCreate > 0 {
		r.toCreate = min(r.toCreate, createsThatFit(&d.Spec.Template))
	}
	names := newNamer(nameKey(api.KindDeployment, d.Metadata.Name, d.Metadata.Created), d.Status.PodsCreated, taken)
	prefix := deploymentPodPrefix(d.Metadata.Name)
	acts := r.deletes
	for i := range r.toCreate {
		name := names.name(prefix)
		if name == "" {
			r.toCreate = len(acts) - len(r.deletes)
			break
		}
		p := newPod(name, r.owner, d.Spec.Template, r.rev, r.secrets)
		why := r.applyReplacement(i, p)
		if why == "" {
			why = fmt.Sprintf("%d of %d replicas of revision %s", r.nNew+r.toCreate, r.replicas, r.rev)
		}
		acts = append(acts, newAction(ActionCreate, p, "%s", why))
	}
	r.podsCreated = names.next
	return acts
}

// status returns d's status as it will be once the pass's actions are
// applied.
func (r *rollout) status(now time.Time, d *api.Deployment) api.DeploymentStatus {
	st := d.Status
	st.ObservedGeneration = d.Metadata.Generation
	st.Revision = r.rev
	st.PodsCreated = r.podsCreated
	st.History = api.RecordRevision(st.History, d.Spec.Template, r.rev, d.Metadata.Generation, now)
	st.Replicas = r.nNew + r.toCreate + r.nOld
	st.UpdatedReplicas = r.nNew + r.toCreate
	st.ReadyReplicas = r.availNew + r.availOld
	st.AvailableReplicas = r.availNew + r.availOld
	if r.rebalance != nil {
		st.Rebalance = r.rebalance
	}
	replicas, rev, minAvailable := r.replicas, r.rev, r.minAvailable()
	if st.AvailableReplicas >= minAvailable {
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionAvailable, Status: api.ConditionTrue,
			Reason: reasonMinimumAvailable, Message: fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, replicas)}, now)
	} else {
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionAvailable, Status: api.ConditionFalse,
			Reason: reasonMinimumUnavailable, Message: fmt.Sprintf("%d of %d replicas available, %d required", st.AvailableReplicas, replicas, minAvailable)}, now)
	}
	complete := r.nOld == 0 && st.UpdatedReplicas == replicas && st.AvailableReplicas == replicas
	switch {
	case complete:
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonRolloutComplete, Message: fmt.Sprintf("revision %s is available", rev)}, now)
	case r.moveNote != "":
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonMoving, Message: r.moveNote}, now)
	case r.nOld > 0:
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonRolling, Message: fmt.Sprintf("%d of %d pods updated to revision %s, %d old remain", st.UpdatedReplicas, replicas, rev, r.nOld)}, now)
	default:
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionProgressing, Status: api.ConditionTrue,
			Reason: reasonScaling, Message: fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, replicas)}, now)
	}
	st.Conditions = replicaFailure(st.Conditions, r.live, r.deleted, r.failed, complete, now)
	return st
}

// replicaFailure sets the ReplicaFailure condition: True/Unschedulable while
// a remaining pod cannot be scheduled; True/PodFailed when pods failed this
// pass, kept until the rollout is complete so it does not vanish with the
// failed pod; absent otherwise.
func replicaFailure(conds []api.Condition, live []*api.Pod, deleted map[string]bool, failed []*api.Pod, complete bool, now time.Time) []api.Condition {
	var unsched []*api.Pod
	for _, p := range live {
		if deleted[p.Metadata.Name] || !p.Status.Phase.Pending() {
			continue
		}
		if c := api.FindCondition(p.Status.Conditions, api.ConditionScheduled); c != nil && c.Status == api.ConditionFalse {
			unsched = append(unsched, p)
		}
	}
	slices.SortFunc(unsched, compareByName)
	switch {
	case len(unsched) > 0:
		c := api.FindCondition(unsched[0].Status.Conditions, api.ConditionScheduled)
		conds, _ = api.SetCondition(conds, api.Condition{Type: api.ConditionReplicaFailure, Status: api.ConditionTrue,
			Reason: reasonUnschedulable, Message: fmt.Sprintf("%d pods cannot be scheduled; %s: %s", len(unsched), unsched[0].Metadata.Name, c.Message)}, now)
		return conds
	case len(failed) > 0:
		msg := failed[0].Status.Message
		if msg == "" {
			msg = string(failed[0].Status.Phase)
		}
		conds, _ = api.SetCondition(conds, api.Condition{Type: api.ConditionReplicaFailure, Status: api.ConditionTrue,
			Reason: reasonPodFailed, Message: fmt.Sprintf("pod %s: %s", failed[0].Metadata.Name, msg)}, now)
		return conds
	case !complete:
		if c := api.FindCondition(conds, api.ConditionReplicaFailure); c != nil && c.Reason == reasonPodFailed {
			return conds
		}
	}
	conds, _ = api.RemoveCondition(conds, api.ConditionReplicaFailure)
	return conds
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
// ones first, then those on nodes that are not Ready or are draining
// (they must leave anyway), then those not
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
		case p.Status.Phase.Pending():
			r = 0
		case nodes[p.Spec.Node] != nil && (nodes[p.Spec.Node].Status.Phase != api.NodeReady || onDrainingNode(p, nodes)):
			r = 1
		case !available(p, nodes):
			r = 2
		}
		rs[i] = ranked{p, r}
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if c := b.p.Metadata.Created.Compare(a.p.Metadata.Created); c != 0 {
			return c < 0
		}
		return b.p.Metadata.Name < a.p.Metadata.Name
	})
	for i := range rs {
		ps[i] = rs[i].p
	}
}

// newPod returns a Pending pod made from template t, loading secrets.
func newPod(name string, owner api.OwnerRef, t api.PodTemplate, rev string, secrets []api.PodSecret) *api.Pod {
	return &api.Pod{
		Kind:     api.KindPod,
		Metadata: api.ObjectMeta{Name: name, Labels: maps.Clone(t.Labels)},
		Spec:     api.PodSpec{Owner: owner, Template: t.DeepCopy(), Revision: rev, Secrets: slices.Clone(secrets)},
		Status:   api.PodStatus{Phase: api.PodPending, Unit: api.UnitName(name)},
	}
}
