package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/herd-dev/herd/api"
)

// Moves: how a deployment moves its pods for `herdctl drain` (pods on a
// board whose spec.drain is set) and `herdctl rebalance` (the pods
// api.PlanSpread picks while spec.rebalance is pending). Both intents are
// in the store, and so is every move in flight: the replacement pod names
// the pod it replaces (spec.replaces). A move is therefore level-triggered
// like the rest of the reconcile: a new leader, or a pass after a crash,
// reads the same pods and continues the same move; herdctl only records
// the intent and watches.
//
// One move at a time per deployment, and only while no rollout is in
// progress (a rollout replaces pods anyway, deleting those on draining
// boards first; see sortForDeletion), and while no pod is missing:
//
//   - with max_surge ≥ 1, a surge move: the replacement is created first
//     (the one pod above replicas that max_surge allows), and the old pod
//     is deleted only once the replacement is Running and ready on a Ready
//     board, and only if the available pods left are still at least
//     replicas - max_unavailable; while its replacement exists the old pod
//     does not count towards replicas;
//   - with max_surge = 0 (then max_unavailable ≥ 1), there is no room for a
//     replacement first: the old pod is deleted and its replacement created
//     in one transaction, only if the available pods left are at least
//     replicas - max_unavailable, and only once the previous replacement is
//     available.
//
// A drain's replacement is placed by the scheduler (its spread score puts
// it on the board with the fewest of the deployment's pods; the draining
// board is cordoned, so never there); a rebalance's replacement is pinned
// to the board of the plan. A replacement still Pending whose move is no
// longer wanted (the drain or rebalance was withdrawn) is deleted, so
// nothing is left half-done; one that has started completes its move. A
// rebalance replacement that cannot be placed on its board is deleted and
// the rebalance reported done with the reason.

// reasonMoving is the Progressing reason while a move is in flight.
const reasonMoving = "Moving"

// replacement is a pod to create in a move: the pod it replaces, the board
// it is pinned to ("" lets the scheduler choose) and why.
type replacement struct {
	of  *api.Pod
	to  string
	why string
}

// moveWanted reports whether p should leave its board: the board is
// draining, or the deployment has a rebalance pending.
func (r *rollout) moveWanted(p *api.Pod) bool {
	return r.nodeByName[p.Spec.Node].Draining() || r.dep.RebalancePending()
}

// byName returns the live pods of the current revision not deleted in this
// pass, by name, and a name index of them.
func (r *rollout) byName() ([]*api.Pod, map[string]*api.Pod) {
	ps := slices.DeleteFunc(slices.Clone(r.newPods), func(p *api.Pod) bool { return r.deleted[p.Metadata.Name] })
	slices.SortFunc(ps, compareByName)
	idx := make(map[string]*api.Pod, len(ps))
	for _, p := range ps {
		idx[p.Metadata.Name] = p
	}
	return ps, idx
}

func (r *rollout) dropNew(p *api.Pod, why string) {
	r.deletePod(p, why)
	r.nNew--
	if available(p, r.nodeByName) {
		r.availNew--
	}
}

// finishMoves settles the moves in flight (replacements whose pod is still
// there): deletes the old pod once its replacement is available and the
// floor allows, cancels a replacement that is still Pending and no longer
// wanted or that cannot be placed on its rebalance board; the others stay
// in flight and their old pods leaving (not counted towards replicas).
func (r *rollout) finishMoves() {
	r.leaving = make(map[string]bool)
	ps, idx := r.byName()
	for _, q := range ps {
		p := idx[q.Spec.Replaces]
		if q.Spec.Replaces == "" || p == nil || r.deleted[p.Metadata.Name] || r.leaving[p.Metadata.Name] || r.deleted[q.Metadata.Name] {
			continue
		}
		pending := q.Status.Phase.Pending()
		switch {
		case available(q, r.nodeByName):
			if left := r.availNew - boolInt(available(p, r.nodeByName)); left < r.minAvailable() {
				r.leaving[p.Metadata.Name] = true
				r.moveNote = fmt.Sprintf("moving %s off %s: replacement %s is ready, but deleting %s would leave %d available, fewer than %d (replicas - max_unavailable)",
					p.Metadata.Name, p.Spec.Node, q.Metadata.Name, p.Metadata.Name, left, r.minAvailable())
				continue
			}
			r.dropNew(p, fmt.Sprintf("moved off %s: replacement %s is available on %s", p.Spec.Node, q.Metadata.Name, q.Spec.Node))
		case pending && !r.moveWanted(p):
			r.dropNew(q, fmt.Sprintf("the move of %s is no longer requested", p.Metadata.Name))
		case pending && q.Spec.Node != "" && unschedulable(q) != "":
			r.dropNew(q, fmt.Sprintf("cannot place the replacement of %s on %s", p.Metadata.Name, q.Spec.Node))
			if r.dep.RebalancePending() {
				r.rebalanceStatus(true, fmt.Sprintf("stopped: %s cannot move to %s: %s", p.Metadata.Name, q.Spec.Node, unschedulable(q)))
			}
		default:
			r.leaving[p.Metadata.Name] = true
			r.moveNote = fmt.Sprintf("moving %s off %s: replacement %s %s", p.Metadata.Name, p.Spec.Node, q.Metadata.Name, podProgress(q))
		}
	}
	r.nLeaving = len(r.leaving)
}

// unschedulable returns the scheduler's message for a pod it could not
// place, or "".
func unschedulable(p *api.Pod) string {
	if c := api.FindCondition(p.Status.Conditions, api.ConditionScheduled); c != nil && c.Status == api.ConditionFalse {
		return c.Message
	}
	return ""
}

// podProgress says where a replacement is: "Pending: 0/3 boards: ...",
// "Starting on b3".
func podProgress(p *api.Pod) string {
	switch {
	case p.Status.Phase.Pending():
		if msg := unschedulable(p); msg != "" {
			return "Pending: " + msg
		}
		return "Pending"
	case p.Status.Phase == api.PodRunning && !p.Status.Ready:
		return "Running on " + p.Spec.Node + ", not ready"
	}
	return string(p.Status.Phase) + " on " + p.Spec.Node
}

// startMove begins the next move when none is in flight and no pod is
// missing or surplus: a surge move (a replacement to create) or, without
// surge, the old pod's delete with its replacement.
func (r *rollout) startMove() {
	if r.nLeaving > 0 || r.toCreate > 0 || r.nNew > r.replicas {
		return
	}
	ps, idx := r.byName()
	if r.surge == 0 {
		for _, q := range ps {
			if q.Spec.Replaces != "" && idx[q.Spec.Replaces] == nil && !available(q, r.nodeByName) {
				r.moveNote = fmt.Sprintf("moved %s: waiting for its replacement %s (%s)", q.Spec.Replaces, q.Metadata.Name, podProgress(q))
				return
			}
		}
	}
	p, to, why := r.nextMove(ps)
	if p == nil {
		return
	}
	if r.surge == 0 {
		if left := r.availNew - boolInt(available(p, r.nodeByName)); left < r.minAvailable() {
			r.moveNote = fmt.Sprintf("%s must move (%s), but deleting it would leave %d available, fewer than %d (replicas - max_unavailable; max_surge is 0)",
				p.Metadata.Name, why, left, r.minAvailable())
			return
		}
		r.dropNew(p, fmt.Sprintf("moving off %s (%s); max_surge is 0, so it stops before its replacement starts", p.Spec.Node, why))
	} else {
		r.leaving[p.Metadata.Name] = true
		r.nLeaving++
	}
	r.replacements = append(r.replacements, replacement{of: p, to: to, why: why})
	r.toCreate++
}

// nextMove picks the next pod to move among ps (by name): a pod on a
// draining board first, else, with a rebalance pending, the first move of
// the spread plan. It also writes the rebalance's progress.
func (r *rollout) nextMove(ps []*api.Pod) (p *api.Pod, to, why string) {
	for _, p := range ps {
		if n := r.nodeByName[p.Spec.Node]; p.Status.Phase.Occupies() && n.Draining() {
			return p, "", "board " + p.Spec.Node + " is draining"
		}
	}
	if !r.dep.RebalancePending() || (r.rebalance != nil && r.rebalance.Done) {
		return nil, "", ""
	}
	for _, q := range ps {
		if q.Spec.Node == "" || !q.Status.Phase.Occupies() {
			r.rebalanceStatus(false, fmt.Sprintf("waiting for %s to be placed", q.Metadata.Name))
			return nil, "", ""
		}
	}
	boards := api.SpreadBoards(nodeValues(r.nodeByName), &r.dep.Spec.Template)
	plan := api.PlanSpread(boards, ps)
	counts := spreadString(boards, api.SpreadCounts(boards, ps))
	if len(plan) == 0 {
		r.rebalanceStatus(true, "spread over "+counts)
		return nil, "", ""
	}
	m := plan[0]
	r.rebalanceStatus(false, fmt.Sprintf("%d moves left, spread %s", len(plan), counts))
	for _, q := range ps {
		if q.Metadata.Name == m.Pod {
			return q, m.To, fmt.Sprintf("rebalance: %s to %s", m.From, m.To)
		}
	}
	return nil, "", ""
}

// rebalanceStatus sets the status of the pending rebalance request.
func (r *rollout) rebalanceStatus(done bool, msg string) {
	if r.dep.Spec.Rebalance == nil {
		return
	}
	r.rebalance = &api.RebalanceStatus{ID: r.dep.Spec.Rebalance.ID, Done: done, Message: msg}
}

// applyReplacement makes pod p, the i-th create of the pass, a move's
// replacement when there is one for i, and returns the create's reason
// ("" for an ordinary create).
func (r *rollout) applyReplacement(i int, p *api.Pod) string {
	if i >= len(r.replacements) {
		return ""
	}
	m := r.replacements[i]
	p.Spec.Replaces = m.of.Metadata.Name
	p.Spec.Node = m.to
	where := "where the scheduler places it"
	if m.to != "" {
		where = "pinned to " + m.to
	}
	// The note the next pass writes too (no flapping).
	if r.surge == 0 {
		r.moveNote = fmt.Sprintf("moved %s: waiting for its replacement %s (%s)", m.of.Metadata.Name, p.Metadata.Name, podProgress(p))
	} else {
		r.moveNote = fmt.Sprintf("moving %s off %s: replacement %s %s", m.of.Metadata.Name, m.of.Spec.Node, p.Metadata.Name, podProgress(p))
	}
	return fmt.Sprintf("replaces %s on %s (%s), %s", m.of.Metadata.Name, m.of.Spec.Node, m.why, where)
}

// nodeValues returns the nodes of an index, in no particular order.
func nodeValues(m map[string]*api.Node) []*api.Node {
	out := make([]*api.Node, 0, len(m))
	for _, n := range m {
		out = append(out, n)
	}
	slices.SortFunc(out, compareByName)
	return out
}

// spreadString renders counts per board: "b1=2 b2=1 b3=1".
func spreadString(boards []string, counts []int) string {
	if len(boards) == 0 {
		return "no eligible boards"
	}
	parts := make([]string, len(boards))
	for i, b := range boards {
		parts[i] = fmt.Sprintf("%s=%d", b, counts[i])
	}
	return strings.Join(parts, " ")
}

// onDrainingNode reports whether p is bound to a draining board:
// sortForDeletion deletes such pods first among the Ready boards' pods, as
// they must leave anyway.
func onDrainingNode(p *api.Pod, nodes map[string]*api.Node) bool {
	return nodes[p.Spec.Node].Draining()
}
