package controller

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

// SchedulePending places the Pending pods among pods (oldest first: by
// creation time, then name) with the default scheduler configuration; see
// ScheduleWith.
func SchedulePending(now time.Time, snap *scheduler.Snapshot, pods []*api.Pod) []Action {
	return ScheduleWith(scheduler.DefaultConfig(), now, snap, pods)
}

// ScheduleWith is SchedulePending with a scheduler configuration (an
// invalid one falls back to the default). snap is every node and pod;
// pods are those to consider (usually snap.Pods; only Pending ones are
// placed). Each placed pod gets a Bind action: spec.node and spec.hostPorts
// set, phase Scheduled, status.ip the node's address, condition
// Scheduled=True. Each pod that fits nowhere gets condition
// Scheduled=False with the scheduler's explanation, written only when that
// explanation changed. Pods are placed as if the earlier binds of the same
// pass were applied.
func ScheduleWith(cfg scheduler.Config, now time.Time, snap *scheduler.Snapshot, pods []*api.Pod) []Action {
	var pending []*api.Pod
	var acts []Action
	for _, p := range pods {
		if p == nil || !p.Status.Phase.Pending() {
			continue
		}
		if miss := api.MissingSecrets(p); miss != "" {
			// Its owner makes a new pod once the secret exists (the
			// secret's version is part of the revision).
			if a, ok := notScheduled(p, reasonSecretMissing, "secret "+miss+" does not exist: herdctl create secret "+
				strings.SplitN(miss, ", ", 2)[0]+" --from-file KEY=PATH", now); ok {
				acts = append(acts, a)
			}
			continue
		}
		pending = append(pending, p)
	}
	if len(pending) == 0 {
		return acts
	}
	slices.SortFunc(pending, func(a, b *api.Pod) int {
		if c := a.Metadata.Created.Compare(b.Metadata.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	sc, err := scheduler.New(cfg)
	if err != nil {
		sc, _ = scheduler.New(scheduler.DefaultConfig())
	}
	if snap == nil {
		snap = &scheduler.Snapshot{}
	}
	snap = withoutAgentDown(snap)
	nodes := nodeIndex(snap.Nodes)

	for _, pl := range sc.PlaceAll(snap, pending) {
		p := pl.Pod
		if pl.Err != nil {
			reason := reasonUnschedulable
			if errors.Is(pl.Err, scheduler.ErrInvalidPod) {
				reason = "InvalidPod"
			}
			if a, ok := notScheduled(p, reason, pl.Err.Error(), now); ok {
				acts = append(acts, a)
			}
			continue
		}
		d := pl.Decision
		np := *p
		np.Spec.Node = d.Node
		np.Spec.HostPorts = d.HostPorts
		np.Status.Phase = api.PodScheduled
		np.Status.Message = ""
		if n := nodes[d.Node]; n != nil {
			np.Status.IP = n.Status.Address
		}
		np.Status.Conditions, _ = api.SetCondition(p.Status.Conditions, api.Condition{Type: api.ConditionScheduled,
			Status: api.ConditionTrue, Reason: "Scheduled", Message: fmt.Sprintf("placed on %s", d.Node)}, now)
		acts = append(acts, newAction(ActionBind, &np, "placed on %s: %s", d.Node, d.Reason))
	}
	return acts
}

// reasonSecretMissing is the Scheduled=False reason of a pod whose
// template names a secret that did not exist when the pod was made.
const reasonSecretMissing = "SecretMissing"

// notScheduled returns the status write that gives p the condition
// Scheduled=False with reason and msg, unless p has it already.
func notScheduled(p *api.Pod, reason, msg string, now time.Time) (Action, bool) {
	if c := api.FindCondition(p.Status.Conditions, api.ConditionScheduled); c != nil &&
		c.Status == api.ConditionFalse && c.Reason == reason && c.Message == msg {
		return Action{}, false
	}
	np := *p
	np.Status.Conditions, _ = api.SetCondition(p.Status.Conditions, api.Condition{Type: api.ConditionScheduled,
		Status: api.ConditionFalse, Reason: reason, Message: msg}, now)
	return newAction(ActionUpdateStatus, &np, "cannot schedule: %s", msg), true
}

// withoutAgentDown returns snap with every node whose AgentDown condition
// is True shown to the scheduler as NotReady (copies; snap is unchanged).
// Their pods stay in the snapshot, so they still count for spreading.
func withoutAgentDown(snap *scheduler.Snapshot) *scheduler.Snapshot {
	var out *scheduler.Snapshot
	for i, n := range snap.Nodes {
		if n == nil || n.Status.Phase != api.NodeReady {
			continue
		}
		if c := api.FindCondition(n.Status.Conditions, ConditionAgentDown); c == nil || c.Status != api.ConditionTrue {
			continue
		}
		if out == nil {
			cp := *snap
			cp.Nodes = slices.Clone(snap.Nodes)
			out = &cp
		}
		nn := *n
		nn.Status.Phase = api.NodeNotReady
		out.Nodes[i] = &nn
	}
	if out == nil {
		return snap
	}
	return out
}
