package api

import (
	"cmp"
	"slices"
	"time"
)

// Moving pods: `herdctl drain` and `herdctl rebalance` record an intent in
// a spec (NodeSpec.Drain, DeploymentSpec.Rebalance) and the leader's
// deployment controller moves the pods, one at a time per deployment,
// each move a replacement created first (PodSpec.Replaces names the pod it
// replaces) and the old pod deleted once the replacement is available. The
// rules about those objects live here: what a drained board is, which
// boards a rebalance spreads over, the spread plan, and the fields'
// validation. Every field is optional, so objects without them read as
// before; an agent that predates them refuses a write carrying one (strict
// decoding names the unknown field).

// ConditionAgentDown is the type of a Ready board's condition saying its
// agent is not answering gossip although the board answers SSH (set by the
// node controller): the board keeps its pods but takes no new ones.
const ConditionAgentDown = "AgentDown"

// NodeDrain is a request to move every pod off a board (herdctl drain).
// A board with a drain request is also cordoned (NodeSpec.Unschedulable):
// validation refuses one without the other.
type NodeDrain struct {
	// Daemons also stops the daemons' pods on the board; they come back
	// when the board is uncordoned (a daemon places no pod on a cordoned
	// board).
	Daemons bool `json:"daemons,omitempty"`
	// Requested is when herdctl asked, by the clock of the machine herdctl
	// ran on: shown by describe, never compared with the leader's clock.
	Requested time.Time `json:"requested,omitzero"`
}

// RebalanceRequest asks the deployment controller to move the
// deployment's pods until they are spread evenly over the boards they may
// run on (herdctl rebalance). It is part of the spec, so it moves the
// generation but not the template revision, and apply keeps the stored
// one (a manifest cannot carry it). A request is done when
// DeploymentStatus.Rebalance has its ID and Done.
type RebalanceRequest struct {
	// ID tells requests apart: 1 to 64 characters of [A-Za-z0-9_-].
	ID string `json:"id"`
	// Requested is when herdctl asked (herdctl's clock; shown only).
	Requested time.Time `json:"requested,omitzero"`
}

// RebalanceStatus is the deployment controller's progress on the
// deployment's rebalance request.
type RebalanceStatus struct {
	// ID is the request this status is about.
	ID string `json:"id"`
	// Done is true once no move is left to make, or the next one cannot be
	// made (Message says why).
	Done bool `json:"done,omitempty"`
	// Message says what is moving, what is left or why it stopped.
	Message string `json:"message,omitempty"`
}

// Draining reports whether the board has a drain request.
func (n *Node) Draining() bool { return n != nil && n.Spec.Drain != nil }

// DrainsDaemons reports whether the board's drain request stops daemons'
// pods too.
func (n *Node) DrainsDaemons() bool { return n.Draining() && n.Spec.Drain.Daemons }

// DrainLeft returns the pods that keep board n from being drained, sorted
// by name: every pod bound to it (spec.node) that is not terminal (a
// terminal pod has no unit), except daemons' pods when the request leaves
// them (NodeDrain.Daemons false). The board is drained when none is left.
func DrainLeft(n *Node, pods []*Pod) []*Pod {
	if n == nil {
		return nil
	}
	var left []*Pod
	for _, p := range pods {
		if p == nil || p.Spec.Node != n.Metadata.Name || p.Status.Phase.Terminal() {
			continue
		}
		if p.Spec.Owner.Kind == KindDaemon && !n.DrainsDaemons() {
			continue
		}
		left = append(left, p)
	}
	slices.SortFunc(left, func(a, b *Pod) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	return left
}

// RebalancePending reports whether the deployment has a rebalance request
// its status does not yet report done.
func (d *Deployment) RebalancePending() bool {
	if d == nil || d.Spec.Rebalance == nil {
		return false
	}
	st := d.Status.Rebalance
	return st == nil || st.ID != d.Spec.Rebalance.ID || !st.Done
}

// KeepRebalance gives d, a deployment being applied from a manifest, the
// rebalance request of stored, the deployment as it is stored (nil when
// new): a manifest never carries one, and applying it again must neither
// cancel a pending request nor start one.
func (d *Deployment) KeepRebalance(stored *Deployment) {
	d.Spec.Rebalance = nil
	if stored != nil && stored.Spec.Rebalance != nil {
		r := *stored.Spec.Rebalance
		d.Spec.Rebalance = &r
	}
}

// SpreadBoards returns, sorted, the names of the boards pods of template t
// are spread over by a rebalance: Ready, not cordoned, agent not down,
// matching t's node selector, able to enforce its limits and having its
// devices (the scheduler's filters that do not depend on what else runs
// there).
func SpreadBoards(nodes []*Node, t *PodTemplate) []string {
	var out []string
	for _, n := range nodes {
		if n == nil || n.Status.Phase != NodeReady || n.Spec.Unschedulable || agentDown(n) {
			continue
		}
		if !n.MatchesNodeSelector(t.NodeSelector) || n.Status.UnenforcedLimit(t.Resources) != "" || n.Status.MissingDevice(t.Devices) != "" {
			continue
		}
		out = append(out, n.Metadata.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func agentDown(n *Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionAgentDown && c.Status == ConditionTrue {
			return true
		}
	}
	return false
}

// PlanRebalance returns what a rebalance of d would do now: the boards
// its pods are spread over (SpreadBoards), how many of its pods each holds
// (SpreadCounts) and the moves (PlanSpread). The pods counted are d's live
// pods of its current template revision, as the deployment controller
// counts them; herdctl rebalance --dry-run prints this.
func PlanRebalance(d *Deployment, nodes []*Node, pods []*Pod) (boards []string, counts []int, moves []Move) {
	owner := OwnerRef{Kind: KindDeployment, Name: d.Metadata.Name}
	rev := CurrentRevision(d.Spec.Template, d.Status.Revision)
	var mine []*Pod
	for _, p := range pods {
		if p != nil && p.Spec.Owner == owner && p.Spec.Revision == rev && !p.Status.Phase.Terminal() {
			mine = append(mine, p)
		}
	}
	boards = SpreadBoards(nodes, &d.Spec.Template)
	return boards, SpreadCounts(boards, mine), PlanSpread(boards, mine)
}

// Move is one step of a plan: pod Pod leaves board From for board To.
type Move struct {
	Pod  string `json:"pod"`
	From string `json:"from"`
	To   string `json:"to"`
}

// PlanSpread returns the fewest moves that spread pods (one owner's) evenly
// over boards: afterwards the counts on the boards differ by at most one.
// Only pods bound to one of boards count (others are neither counted nor
// moved). With n pods on k boards every board ends with n/k or n/k+1; the
// n%k boards that keep the extra pod are the fullest ones (then by name),
// which makes the number of moves the least possible. From a board with
// too many, the pods that are not Running and ready leave first, then the
// newest, then by name (descending), as the deployment deletes them; each
// goes to the emptiest board still short (then by name). The plan depends
// only on its inputs, never on their order.
func PlanSpread(boards []string, pods []*Pod) []Move {
	if len(boards) == 0 {
		return nil
	}
	onBoard := make(map[string][]*Pod, len(boards))
	for _, b := range boards {
		onBoard[b] = nil
	}
	total := 0
	for _, p := range pods {
		if p == nil {
			continue
		}
		if _, ok := onBoard[p.Spec.Node]; ok {
			onBoard[p.Spec.Node] = append(onBoard[p.Spec.Node], p)
			total++
		}
	}
	names := make([]string, 0, len(onBoard))
	for b := range onBoard {
		names = append(names, b)
	}
	slices.SortFunc(names, func(a, b string) int { // fullest first, then by name
		if c := cmp.Compare(len(onBoard[b]), len(onBoard[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	base, extra := total/len(names), total%len(names)
	target := make(map[string]int, len(names))
	count := make(map[string]int, len(names))
	var leaving []*Pod
	for i, b := range names {
		target[b] = base
		if i < extra {
			target[b]++
		}
		count[b] = len(onBoard[b])
		if surplus := count[b] - target[b]; surplus > 0 {
			ps := slices.Clone(onBoard[b])
			slices.SortFunc(ps, compareForMove)
			leaving = append(leaving, ps[:surplus]...)
		}
	}
	var moves []Move
	for _, p := range leaving {
		to := ""
		for _, b := range names {
			if count[b] >= target[b] {
				continue
			}
			if to == "" || count[b] < count[to] || (count[b] == count[to] && b < to) {
				to = b
			}
		}
		count[to]++
		moves = append(moves, Move{Pod: p.Metadata.Name, From: p.Spec.Node, To: to})
	}
	return moves
}

// compareForMove orders one board's pods by how willingly they move: not
// Running and ready first, then the newest, then by name descending.
func compareForMove(a, b *Pod) int {
	ra, rb := a.Status.Phase == PodRunning && a.Status.Ready, b.Status.Phase == PodRunning && b.Status.Ready
	if ra != rb {
		if rb {
			return -1
		}
		return 1
	}
	if c := b.Metadata.Created.Compare(a.Metadata.Created); c != 0 {
		return c
	}
	return cmp.Compare(b.Metadata.Name, a.Metadata.Name)
}

// SpreadCounts returns how many of pods are bound to each of boards, in
// the order of boards: what `herdctl rebalance` shows before and after.
func SpreadCounts(boards []string, pods []*Pod) []int {
	idx := make(map[string]int, len(boards))
	for i, b := range boards {
		idx[b] = i
	}
	out := make([]int, len(boards))
	for _, p := range pods {
		if p == nil {
			continue
		}
		if i, ok := idx[p.Spec.Node]; ok {
			out[i]++
		}
	}
	return out
}

// validRequestID reports whether s is 1 to 64 characters of
// [A-Za-z0-9_-] (the Herd-Request-Id alphabet).
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// nodeSpec checks a node's spec: a drain request needs the cordon.
func (v *validator) nodeSpec(p fieldPath, s *NodeSpec) {
	if s.Drain != nil && !s.Unschedulable {
		v.addf(p.field("drain", "-"), "a board being drained must be cordoned: set spec.unschedulable too (herdctl drain does both; herdctl uncordon clears both)")
	}
}

// rebalance checks a deployment's rebalance request.
func (v *validator) rebalance(p fieldPath, r *RebalanceRequest) {
	if r != nil && !validRequestID(r.ID) {
		if r.ID == "" {
			v.addf(p.field("rebalance", "-").field("id", "-"), "required")
			return
		}
		v.addf(p.field("rebalance", "-").field("id", "-"), "%q: want 1 to 64 characters of [A-Za-z0-9_-]", r.ID)
	}
}

// replaces checks a pod's spec.replaces: a pod name.
func (v *validator) replaces(p fieldPath, s *PodSpec) {
	if s.Replaces == "" {
		return
	}
	if msg := nameProblem(s.Replaces); msg != "" {
		v.addf(p.field("replaces", "-"), "%q is not a valid pod name: %s", s.Replaces, msg)
	}
}
