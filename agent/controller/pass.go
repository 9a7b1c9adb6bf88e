package controller

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

// Cluster is every object, and gossip's view of the members, at one point
// in time. It is read-only: reconcilers never modify it or what it points
// to.
type Cluster struct {
	// Version identifies the state (the store's resourceVersion); two
	// Clusters with the same non-zero Version hold the same objects.
	Version     uint64
	Nodes       []*api.Node
	Deployments []*api.Deployment
	Daemons     []*api.Daemon
	Pods        []*api.Pod
	Services    []*api.Service
	// Secrets are the stored secrets (sealed): their versions are part
	// of the revision of the templates that name them.
	Secrets []*api.Secret
	Jobs    []*api.Job
	Members []MemberInfo
}

// Add files stored objects into c by kind (objects of other kinds are
// ignored): how a State builds a Cluster from a store listing.
func (c *Cluster) Add(objs ...api.Object) {
	for _, o := range objs {
		switch o := o.(type) {
		case *api.Node:
			c.Nodes = append(c.Nodes, o)
		case *api.Deployment:
			c.Deployments = append(c.Deployments, o)
		case *api.Daemon:
			c.Daemons = append(c.Daemons, o)
		case *api.Pod:
			c.Pods = append(c.Pods, o)
		case *api.Service:
			c.Services = append(c.Services, o)
		case *api.Secret:
			c.Secrets = append(c.Secrets, o)
		case *api.Job:
			c.Jobs = append(c.Jobs, o)
		}
	}
}

// Key names one unit of reconcile work: "<kind>/<name>" for nodes,
// deployments, daemons and services, or KeySchedule for the scheduling
// step.
type Key = string

// KeySchedule is the key of the scheduling step (all Pending pods).
const KeySchedule Key = "schedule"

// KeyOf returns the key of an object kind and name.
func KeyOf(kind api.Kind, name string) Key { return string(kind) + "/" + name }

// Index is a Cluster with lookups built once, shared by the reconciles of
// one pass or of many keys against the same Cluster. It is read-only once
// built and safe for concurrent use.
type Index struct {
	c           *Cluster
	nodes       map[string]*api.Node
	sortedNodes []*api.Node
	members     map[string]MemberInfo
	deployments map[string]*api.Deployment
	daemons     map[string]*api.Daemon
	services    map[string]*api.Service
	secrets     map[string]*api.Secret
	jobs        map[string]*api.Job
	byOwner     map[api.OwnerRef][]*api.Pod
	podNames    map[string]bool
	byNode      map[string][]*api.Pod
	byLabel     map[string][]*api.Pod // "k=v" → pods with that label
	snap        *scheduler.Snapshot
}

// NewIndex indexes c.
func NewIndex(c *Cluster) *Index {
	if c == nil {
		c = &Cluster{}
	}
	ix := &Index{
		c:           c,
		nodes:       nodeIndex(c.Nodes),
		sortedNodes: sortNodes(c.Nodes),
		members:     make(map[string]MemberInfo, len(c.Members)),
		deployments: make(map[string]*api.Deployment, len(c.Deployments)),
		daemons:     make(map[string]*api.Daemon, len(c.Daemons)),
		services:    make(map[string]*api.Service, len(c.Services)),
		secrets:     make(map[string]*api.Secret, len(c.Secrets)),
		jobs:        make(map[string]*api.Job, len(c.Jobs)),
		byOwner:     make(map[api.OwnerRef][]*api.Pod),
		podNames:    make(map[string]bool, len(c.Pods)),
		byNode:      make(map[string][]*api.Pod),
		byLabel:     make(map[string][]*api.Pod),
		snap:        &scheduler.Snapshot{Nodes: c.Nodes, Pods: c.Pods, Services: c.Services},
	}
	for _, m := range c.Members {
		if m.Name != "" {
			ix.members[m.Name] = m
		}
	}
	for _, d := range c.Deployments {
		if d != nil {
			ix.deployments[d.Metadata.Name] = d
		}
	}
	for _, d := range c.Daemons {
		if d != nil {
			ix.daemons[d.Metadata.Name] = d
		}
	}
	for _, s := range c.Services {
		if s != nil {
			ix.services[s.Metadata.Name] = s
		}
	}
	for _, s := range c.Secrets {
		if s != nil {
			ix.secrets[s.Metadata.Name] = s
		}
	}
	for _, j := range c.Jobs {
		if j != nil {
			ix.jobs[j.Metadata.Name] = j
		}
	}
	for _, p := range c.Pods {
		if p == nil {
			continue
		}
		ix.byOwner[p.Spec.Owner] = append(ix.byOwner[p.Spec.Owner], p)
		ix.podNames[p.Metadata.Name] = true
		if p.Spec.Node != "" {
			ix.byNode[p.Spec.Node] = append(ix.byNode[p.Spec.Node], p)
		}
		for k, v := range p.Metadata.Labels {
			ix.byLabel[k+"="+v] = append(ix.byLabel[k+"="+v], p)
		}
	}
	for _, pods := range ix.byNode {
		slices.SortFunc(pods, compareByName)
	}
	return ix
}

// Cluster returns the indexed Cluster.
func (ix *Index) Cluster() *Cluster { return ix.c }

// Node returns the node called name, or nil.
func (ix *Index) Node(name string) *api.Node { return ix.nodes[name] }

// Member returns what gossip knows of the board called name.
func (ix *Index) Member(name string) (MemberInfo, bool) {
	m, ok := ix.members[name]
	return m, ok
}

// PodsOn returns every pod bound to node, in any phase, sorted by name.
// The slice is the index's: do not modify it.
func (ix *Index) PodsOn(node string) []*api.Pod { return ix.byNode[node] }

// Keys returns every key there is work for, sorted: every node, member and
// node that pods are bound to, deployment, daemon and service, every owner
// that is gone but still has pods, and KeySchedule.
func (ix *Index) Keys() []Key {
	set := make(map[Key]struct{})
	for n := range ix.nodes {
		set[KeyOf(api.KindNode, n)] = struct{}{}
	}
	for n := range ix.members {
		set[KeyOf(api.KindNode, n)] = struct{}{}
	}
	for n := range ix.byNode { // boards that are gone but still have pods
		set[KeyOf(api.KindNode, n)] = struct{}{}
	}
	for n := range ix.deployments {
		set[KeyOf(api.KindDeployment, n)] = struct{}{}
	}
	for n := range ix.daemons {
		set[KeyOf(api.KindDaemon, n)] = struct{}{}
	}
	for n := range ix.services {
		set[KeyOf(api.KindService, n)] = struct{}{}
	}
	for n := range ix.jobs {
		set[KeyOf(api.KindJob, n)] = struct{}{}
	}
	for o := range ix.byOwner { // owners that are gone but still have pods
		if o.Kind == api.KindDeployment || o.Kind == api.KindDaemon || o.Kind == api.KindJob {
			set[KeyOf(o.Kind, o.Name)] = struct{}{}
		}
	}
	set[KeySchedule] = struct{}{}
	return slices.Sorted(maps.Keys(set))
}

// servicePods returns the candidates for a selector: the pods carrying its
// first key=value (sorted by key), to be filtered by the whole selector.
func (ix *Index) servicePods(sel map[string]string) []*api.Pod {
	if len(sel) == 0 {
		return nil
	}
	k := slices.Min(slices.Collect(maps.Keys(sel)))
	return ix.byLabel[k+"="+sel[k]]
}

// podTaken reports whether a pod of that name is stored.
func (ix *Index) podTaken(name string) bool { return ix.podNames[name] }

// Reconcile runs the reconciler for one key against the index. An unknown
// key yields no actions; the key of a deployment or daemon that is gone
// deletes the pods it still owns (garbage collection: the placer then stops
// and removes their units).
func (ix *Index) Reconcile(now time.Time, cfg scheduler.Config, key Key) []Action {
	if key == KeySchedule {
		return ScheduleWith(cfg, now, ix.snap, ix.c.Pods)
	}
	kind, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	switch api.Kind(kind) {
	case api.KindNode:
		n, m := ix.nodes[name], ix.members[name]
		if n == nil && m.Name == "" {
			// The Node object was deleted and gossip does not know the
			// board: pods still bound there are lost.
			return losePods(name, api.NodeStatus{Phase: api.NodeNotReady, Conditions: []api.Condition{{
				Type: api.ConditionReady, Status: api.ConditionFalse, Reason: reasonMemberUnknown, Message: "the board was deleted"}}}, ix.byNode[name])
		}
		return ReconcileNode(now, n, m, ix.byNode[name])
	case api.KindDeployment:
		owned := ix.byOwner[api.OwnerRef{Kind: api.KindDeployment, Name: name}]
		if d := ix.deployments[name]; d != nil {
			return reconcileDeployment(now, d, owned, ix.nodes, ix.podTaken, ix.secrets)
		}
		return deleteOrphans(owned, "deployment "+name+" was deleted")
	case api.KindDaemon:
		owned := ix.byOwner[api.OwnerRef{Kind: api.KindDaemon, Name: name}]
		if d := ix.daemons[name]; d != nil {
			return reconcileDaemon(now, d, owned, ix.sortedNodes, ix.nodes, ix.podTaken, ix.secrets)
		}
		return deleteOrphans(owned, "daemon "+name+" was deleted")
	case api.KindService:
		if s := ix.services[name]; s != nil {
			return reconcileService(now, s, ix.servicePods(s.Spec.Selector), ix.nodes)
		}
	case api.KindJob:
		owned := ix.byOwner[api.OwnerRef{Kind: api.KindJob, Name: name}]
		if j := ix.jobs[name]; j != nil {
			return reconcileJob(now, j, owned, ix.podTaken, ix.secrets)
		}
		return deleteOrphans(owned, "job "+name+" was deleted")
	}
	return nil
}

// WakeAfter returns how long after now key wants reconciling again
// without any change (a job backing off until its next attempt), 0 for
// never.
func (ix *Index) WakeAfter(now time.Time, key Key) time.Duration {
	kind, name, _ := strings.Cut(key, "/")
	if api.Kind(kind) == api.KindJob {
		return jobWakeAfter(now, ix.jobs[name])
	}
	return 0
}

// ReconcileAll is one full pass over c: every node, deployment, daemon and
// service (in key order), then the scheduling step, each against the same
// state. The actions of different keys are independent; apply them in the
// order returned, each run of one Txn as one transaction.
func ReconcileAll(now time.Time, cfg scheduler.Config, c *Cluster) []Action {
	ix := NewIndex(c)
	var acts []Action
	keys := ix.Keys()
	slices.SortStableFunc(keys, func(a, b Key) int { // schedule last
		return cmp.Compare(boolInt(a == KeySchedule), boolInt(b == KeySchedule))
	})
	for _, k := range keys {
		acts = append(acts, ix.Reconcile(now, cfg, k)...)
	}
	return acts
}

// deleteOrphans deletes the pods of an owner that no longer exists, in
// name order.
func deleteOrphans(pods []*api.Pod, why string) []Action {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, compareByName)
	acts := make([]Action, 0, len(sorted))
	for _, p := range sorted {
		acts = append(acts, newAction(ActionDelete, p, "%s", why))
	}
	return acts
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
