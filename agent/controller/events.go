package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// DeriveEvents says what one committed change means as events: old is the
// object before the change (nil if it was created), cur after it (nil if
// deleted), now the time to stamp. It is pure, and a change nobody would
// want to read about (a status write that only refreshes facts, a resync
// that changed nothing a user sees) yields none, so an idle cluster
// records nothing.
func DeriveEvents(old, cur api.Object, now time.Time) []api.EventSpec {
	switch {
	case old == nil && cur == nil:
		return nil
	case cur == nil:
		return []api.EventSpec{event(old, api.ReasonDeleted, api.EventNormal, "", now, "deleted")}
	}
	switch c := cur.(type) {
	case *api.Node:
		o, _ := old.(*api.Node)
		return nodeEvents(o, c, now)
	case *api.Pod:
		o, _ := old.(*api.Pod)
		return podEvents(o, c, now)
	case *api.Service:
		o, _ := old.(*api.Service)
		return serviceEvents(o, c, now)
	case *api.Deployment:
		o, _ := old.(*api.Deployment)
		return deploymentEvents(o, c, now)
	case *api.Daemon:
		o, _ := old.(*api.Daemon)
		return daemonEvents(o, c, now)
	}
	return nil
}

// event builds one EventSpec about o.
func event(o api.Object, reason, typ, node string, now time.Time, format string, args ...any) api.EventSpec {
	return api.EventSpec{
		Time:    now,
		Object:  api.OwnerRef{Kind: o.GetKind(), Name: o.GetMeta().Name},
		Reason:  reason,
		Type:    typ,
		Node:    node,
		Message: api.EventMessage(fmt.Sprintf(format, args...)),
	}
}

func nodeEvents(old, cur *api.Node, now time.Time) []api.EventSpec {
	name := cur.Metadata.Name
	if old == nil {
		return []api.EventSpec{event(cur, api.ReasonNodeJoined, api.EventNormal, name, now, "%s joined (%s)", name, cur.Status.Phase)}
	}
	var out []api.EventSpec
	if old.Spec.Unschedulable != cur.Spec.Unschedulable {
		if cur.Spec.Unschedulable {
			out = append(out, event(cur, api.ReasonNodeCordoned, api.EventNormal, name, now, "%s cordoned: no new pods are placed there", name))
		} else {
			out = append(out, event(cur, api.ReasonNodeUncordoned, api.EventNormal, name, now, "%s uncordoned", name))
		}
	}
	if old.Draining() != cur.Draining() {
		if cur.Draining() {
			what := "its deployments' pods"
			if cur.DrainsDaemons() {
				what += " and daemons' pods"
			}
			out = append(out, event(cur, api.ReasonNodeDraining, api.EventNormal, name, now, "%s draining: %s move off, one at a time", name, what))
		} else {
			out = append(out, event(cur, api.ReasonNodeDrainEnded, api.EventNormal, name, now, "%s: drain request ended", name))
		}
	}
	wasDown, isDown := hasTrue(old.Status.Conditions, ConditionAgentDown), hasTrue(cur.Status.Conditions, ConditionAgentDown)
	if isDown && !wasDown {
		out = append(out, event(cur, ConditionAgentDown, api.EventWarning, name, now, "%s: %s", name, conditionMessage(cur.Status.Conditions, ConditionAgentDown)))
	}
	if old.Status.Phase != cur.Status.Phase {
		msg := conditionMessage(cur.Status.Conditions, api.ConditionReady)
		switch cur.Status.Phase {
		case api.NodeReady:
			out = append(out, event(cur, api.ReasonNodeReady, api.EventNormal, name, now, "%s is Ready: %s", name, msg))
		case api.NodeNotReady:
			reason := api.ReasonNodeNotReady
			if c := api.FindCondition(cur.Status.Conditions, api.ConditionReady); c != nil && c.Reason == reasonMemberDead {
				reason = api.ReasonNodeDead
			}
			out = append(out, event(cur, reason, api.EventWarning, name, now, "%s is NotReady: %s", name, msg))
		case api.NodeLeft:
			out = append(out, event(cur, api.ReasonNodeLeft, api.EventNormal, name, now, "%s left the cluster", name))
		}
	}
	if cur.Status.Fenced && !old.Status.Fenced {
		out = append(out, event(cur, api.ReasonFenced, api.EventNormal, name, now, "%s fenced: %s", name, conditionMessage(cur.Status.Conditions, api.ConditionReady)))
	}
	return out
}

func podEvents(old, cur *api.Pod, now time.Time) []api.EventSpec {
	node := cur.Spec.Node
	if old == nil {
		old = &api.Pod{}
		if cur.Spec.Owner.Name != "" {
			return append([]api.EventSpec{event(cur, api.ReasonCreated, api.EventNormal, "", now, "created by %s", cur.Spec.Owner)},
				podEvents(old, cur, now)...)
		}
	}
	var out []api.EventSpec
	if c := api.FindCondition(cur.Status.Conditions, api.ConditionScheduled); c != nil && c.Status == api.ConditionFalse {
		if oc := api.FindCondition(old.Status.Conditions, api.ConditionScheduled); oc == nil || oc.Status != c.Status || oc.Message != c.Message {
			out = append(out, event(cur, api.ReasonFailedScheduling, api.EventWarning, "", now, "%s", c.Message))
		}
	}
	if node != "" && old.Spec.Node != node {
		out = append(out, event(cur, api.ReasonBound, api.EventNormal, node, now, "bound to %s", node))
	}
	if old.Status.Phase != cur.Status.Phase {
		out = append(out, podPhaseEvent(cur, now)...)
	}
	switch {
	case cur.Status.Ready && !old.Status.Ready:
		out = append(out, event(cur, api.ReasonReady, api.EventNormal, node, now, "ready on %s", node))
	case !cur.Status.Ready && old.Status.Ready && !cur.Status.Phase.Terminal():
		out = append(out, event(cur, api.ReasonNotReady, api.EventWarning, node, now, "not ready on %s%s", node, colonMsg(cur.Status.Message)))
	}
	if cur.Status.Restarts > old.Status.Restarts && old.Spec.Node == node {
		out = append(out, event(cur, api.ReasonRestarted, api.EventWarning, node, now, "systemd restarted %s (%d restarts)", cur.Status.Unit, cur.Status.Restarts))
	}
	return out
}

// podPhaseEvent is the event of a pod entering its current phase, if any.
func podPhaseEvent(p *api.Pod, now time.Time) []api.EventSpec {
	node := p.Spec.Node
	switch p.Status.Phase {
	case api.PodRunning:
		return []api.EventSpec{event(p, api.ReasonStarted, api.EventNormal, node, now, "%s active on %s", unitName(p), node)}
	case api.PodLost:
		return []api.EventSpec{event(p, api.ReasonLost, api.EventWarning, node, now, "lost with %s%s", node, colonMsg(p.Status.Message))}
	case api.PodFailed:
		return []api.EventSpec{event(p, api.ReasonFailed, api.EventWarning, node, now, "failed on %s%s", node, colonMsg(p.Status.Message))}
	case api.PodSucceeded:
		return []api.EventSpec{event(p, api.ReasonSucceeded, api.EventNormal, node, now, "succeeded on %s", node)}
	}
	return nil
}

func serviceEvents(old, cur *api.Service, now time.Time) []api.EventSpec {
	if old == nil {
		old = &api.Service{}
	}
	was, is := endpointSummary(old.Status.Endpoints), endpointSummary(cur.Status.Endpoints)
	if slices.Equal(was, is) {
		return nil
	}
	if len(is) == 0 {
		return []api.EventSpec{event(cur, api.ReasonEndpointsUpdated, api.EventWarning, "", now, "no ready endpoints")}
	}
	return []api.EventSpec{event(cur, api.ReasonEndpointsUpdated, api.EventNormal, "", now, "%d endpoints: %s", len(is), strings.Join(is, ", "))}
}

// endpointSummary lists the distinct pod@node pairs of eps, sorted.
func endpointSummary(eps []api.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Pod+"@"+e.Node)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func deploymentEvents(old, cur *api.Deployment, now time.Time) []api.EventSpec {
	if old == nil {
		return nil
	}
	var out []api.EventSpec
	if o, c := old.Spec.Replicas, cur.Spec.Replicas; o != nil && c != nil && *o != *c {
		out = append(out, event(cur, api.ReasonScaled, api.EventNormal, "", now, "scaled from %d to %d", *o, *c))
	}
	out = append(out, rolloutEvents(cur, old.Status.Revision, cur.Status.Revision, old.Status.Conditions, cur.Status.Conditions, now)...)
	return out
}

func daemonEvents(old, cur *api.Daemon, now time.Time) []api.EventSpec {
	if old == nil {
		return nil
	}
	return rolloutEvents(cur, old.Status.Revision, cur.Status.Revision, old.Status.Conditions, cur.Status.Conditions, now)
}

// rolloutEvents: a new revision observed, the object Available again (after
// a rollout or a failover), a replica failure raised.
func rolloutEvents(o api.Object, oldRev, rev string, oldConds, conds []api.Condition, now time.Time) []api.EventSpec {
	var out []api.EventSpec
	if oldRev != "" && rev != oldRev {
		out = append(out, event(o, api.ReasonRolloutStarted, api.EventNormal, "", now, "rolling out revision %s", rev))
	}
	if c := api.FindCondition(conds, api.ConditionAvailable); c != nil && c.Status == api.ConditionTrue {
		if oc := api.FindCondition(oldConds, api.ConditionAvailable); oc == nil || oc.Status != api.ConditionTrue {
			out = append(out, event(o, api.ReasonAvailable, api.EventNormal, "", now, "available%s", colonMsg(c.Message)))
		}
	}
	if c := api.FindCondition(conds, api.ConditionReplicaFailure); c != nil && c.Status == api.ConditionTrue {
		if oc := api.FindCondition(oldConds, api.ConditionReplicaFailure); oc == nil || oc.Status != api.ConditionTrue || oc.Reason != c.Reason {
			out = append(out, event(o, api.ReasonReplicaFailure, api.EventWarning, "", now, "%s", c.Message))
		}
	}
	return out
}

func hasTrue(conds []api.Condition, typ string) bool {
	c := api.FindCondition(conds, typ)
	return c != nil && c.Status == api.ConditionTrue
}

func conditionMessage(conds []api.Condition, typ string) string {
	if c := api.FindCondition(conds, typ); c != nil {
		if c.Message != "" {
			return c.Message
		}
		return c.Reason
	}
	return ""
}

func unitName(p *api.Pod) string {
	if p.Status.Unit != "" {
		return p.Status.Unit
	}
	return "the unit"
}

// colonMsg is ": msg", or nothing for an empty msg.
func colonMsg(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
