package controller

import (
	"maps"

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

// sameLabels compares label maps, nil and empty being equal.
func sameLabels(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
