package placer

import (
	"context"
	"hash/fnv"
	"strconv"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
)

// view is one Snapshot with the lookups a pass needs: the controllers'
// own index of it (controller.Index), so the placer and the reconcilers
// read the same state the same way. It is read-only once built and shared
// by every worker while the state's Version is unchanged.
type view struct {
	c  *controller.Cluster
	ix *controller.Index
}

func newView(c *controller.Cluster) *view {
	if c == nil {
		c = &controller.Cluster{}
	}
	return &view{c: c, ix: controller.NewIndex(c)}
}

// view returns a view of the current state, reusing the last one while the
// state's non-zero Version is unchanged.
func (p *Placer) view(ctx context.Context) (*view, error) {
	c, err := p.state.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	p.viewMu.Lock()
	defer p.viewMu.Unlock()
	if p.lastView != nil && c.Version != 0 && p.lastView.c.Version == c.Version {
		return p.lastView, nil
	}
	p.lastView = newView(c)
	return p.lastView, nil
}

// desired returns the pods whose units must run on node: bound there and
// not terminal, sorted by name.
func (v *view) desired(node string) []*api.Pod {
	var out []*api.Pod
	for _, p := range v.ix.PodsOn(node) {
		if !p.Status.Phase.Terminal() {
			out = append(out, p)
		}
	}
	return out
}

// eligibility says whether a node gets passes.
type eligibility int

const (
	// nodeGone: no Node object; the worker is about to be stopped.
	nodeGone eligibility = iota
	// nodeSkipped: the node is down and gossip does not call it dead
	// (NotReady and not fencing, Left, or gossip says left): leave it
	// alone.
	nodeSkipped
	// nodeActive: Ready (also while gossip says dead: each pass is then
	// a witness), or alive and fencing.
	nodeActive
	// nodeSweep: down (not Ready) while gossip calls it dead: its pods are
	// Lost and replaced elsewhere. Each pass only tries to reach the board
	// and stop the herd units it must no longer run (sweep), so a board
	// cut off by a partition stops its stale work as soon as the leader
	// reaches it again, before gossip has healed and fencing begins.
	nodeSweep
)

// witnessing reports whether node is Ready while gossip declares it dead:
// the node controller waits for the placer's word on whether the board
// still answers (controller.Witness), and each pass gives it.
func (v *view) witnessing(node string) bool {
	n := v.ix.Node(node)
	m, ok := v.ix.Member(node)
	return n != nil && ok && m.State == api.MemberDead && n.Status.Phase == api.NodeReady
}

// fencing reports whether n is an alive board waiting to be fenced: NotReady
// with the Fencing condition the node controller sets.
func fencing(n *api.Node) bool {
	if n.Status.Phase != api.NodeNotReady {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == controller.ConditionFencing {
			return true
		}
	}
	return false
}

// eligible says whether node gets passes in this view.
func (v *view) eligible(node string) eligibility {
	n := v.ix.Node(node)
	if n == nil {
		return nodeGone
	}
	if m, ok := v.ix.Member(node); ok && m.State == api.MemberLeft {
		return nodeSkipped
	}
	if m, ok := v.ix.Member(node); ok && m.State == api.MemberDead && n.Status.Phase != api.NodeReady {
		return nodeSweep
	}
	if n.Status.Phase == api.NodeReady || fencing(n) {
		return nodeActive
	}
	return nodeSkipped
}

// fingerprint summarises what about node should wake its worker: the
// node's eligibility, whether it is witnessed, its address, and every bound pod's name, generation
// (moves with its spec), revision and whether it is terminal. Status
// written by the placer itself (phase Scheduled → Running, readiness)
// leaves it unchanged, so the placer's own writes do not wake it again.
func (v *view) fingerprint(node string) uint64 {
	h := fnv.New64a()
	w := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	w(strconv.Itoa(int(v.eligible(node))))
	w(strconv.FormatBool(v.witnessing(node)))
	if n := v.ix.Node(node); n != nil {
		w(n.Status.Address)
		w(string(n.Status.Phase))
	}
	for _, p := range v.ix.PodsOn(node) {
		w(p.Metadata.Name)
		w(strconv.FormatInt(p.Metadata.Generation, 10))
		w(p.Spec.Revision)
		w(strconv.FormatBool(p.Status.Phase.Terminal()))
	}
	return h.Sum64()
}
