package controller

import (
	"maps"
	"slices"
	"time"

	"github.com/herd-dev/herd/api"
)

// matchNode reports whether node n satisfies a node selector
// (api.Node.MatchesNodeSelector).
func matchNode(sel map[string]string, n *api.Node) bool { return n.MatchesNodeSelector(sel) }

// createBudget is how many bytes of pod creates one pass of a deployment
// or daemon puts in its transaction: half of what a Raft transaction holds
// (api.MaxBindTxnBytes, raftstore's default MaxTxnBytes), the other half
// left for the pass's deletes and its status write, which a Writer sends
// as names, resourceVersions and status only (see Writer).
const createBudget = api.MaxBindTxnBytes / 2

// podCreateOverhead bounds what a new pod's JSON holds besides its
// template and labels (counted by api.TemplateBytes): kind, name, owner,
// revision, Pending status and unit, and the op around it.
const podCreateOverhead = 2 << 10

// createsThatFit is how many new pods of template t fit in createBudget:
// at least one, which a template within api.MaxTemplateBytes always does.
func createsThatFit(t *api.PodTemplate) int {
	return max(1, createBudget/(api.TemplateBytes(t)+podCreateOverhead))
}

// podNameSet returns whether a name belongs to one of pods.
func podNameSet(pods []*api.Pod) func(string) bool {
	set := make(map[string]bool, len(pods))
	for _, p := range pods {
		if p != nil {
			set[p.Metadata.Name] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// available reports whether a pod serves: Running and ready, on a node
// that is Ready. A nil nodes map skips the node check; with a map, a pod on
// a node missing from it (deleted) is not available.
func available(p *api.Pod, nodes map[string]*api.Node) bool {
	if p.Status.Phase != api.PodRunning || !p.Status.Ready {
		return false
	}
	if nodes == nil {
		return true
	}
	n := nodes[p.Spec.Node]
	return n != nil && n.Status.Phase == api.NodeReady
}

// nodeIndex maps node names to nodes.
func nodeIndex(nodes []*api.Node) map[string]*api.Node {
	m := make(map[string]*api.Node, len(nodes))
	for _, n := range nodes {
		if n != nil {
			m[n.Metadata.Name] = n
		}
	}
	return m
}

// findCondition returns the condition of type typ, or nil.
func findCondition(conds []api.Condition, typ string) *api.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setCondition returns a copy of conds with c set: replacing the condition
// of the same type in place (keeping its LastTransitionTime when the status
// did not change) or appending it (LastTransitionTime now). conds is not
// modified.
func setCondition(conds []api.Condition, c api.Condition, now time.Time) []api.Condition {
	out := slices.Clone(conds)
	if old := findCondition(out, c.Type); old != nil {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		*old = c
		return out
	}
	c.LastTransitionTime = now
	return append(out, c)
}

// removeCondition returns conds without the condition of type typ (nil if
// none remain). conds is not modified.
func removeCondition(conds []api.Condition, typ string) []api.Condition {
	if findCondition(conds, typ) == nil {
		return conds
	}
	var out []api.Condition
	for _, c := range conds {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

// sameLabels compares label maps, nil and empty being equal.
func sameLabels(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
