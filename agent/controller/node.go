package controller

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// MemberInfo is what gossip knows about one board.
type MemberInfo struct {
	// Name is the member (node) name; empty when gossip has no record.
	Name string
	// Addr is the board's IP address (the gossip advertise address).
	Addr string
	// State is the member's liveness.
	State api.MemberState
	// Facts ride in the member metadata.
	Facts NodeFacts
	// DownSince is when the leader first knew the member as not alive: the
	// later of when gossip declared it so and when this leader started
	// watching. Zero while alive; zero for a member that is not alive means
	// "long ago" (no witness is waited for).
	DownSince time.Time
	// Witness is the leader's latest check of the board over SSH (zero
	// if none was made).
	Witness Witness
}

// Witness is the leader's second opinion on a board gossip does not call
// alive: a check of the board's sshd and systemd over the leader's pooled
// SSH connection, with a short deadline (the placer makes it).
type Witness struct {
	// At is when the check ended; zero if no check was made.
	At time.Time
	// Err is why it failed; empty if the board's sshd and systemd
	// answered.
	Err string
	// OKAt is when a check last succeeded (At itself when Err is empty);
	// zero if none did.
	OKAt time.Time
}

// WitnessGrace bounds how long the node controller trusts or waits for a
// witness. A board gossip calls dead stays Ready with no witness taken
// since for at most this long (a board with no SSH address, or a checker
// that is stuck, cannot hold its pods forever); and a successful witness
// older than this no longer counts. Once a board was seen agent down, a
// failed check flips it to dead only when no check has succeeded for this
// long either (one slow answer does not restart its workloads). The placer
// checks about every second.
const WitnessGrace = 3 * time.Second

// NodeFacts are the node facts a board gossips about itself.
type NodeFacts struct {
	// BoardFacts land in api.NodeStatus as they are.
	api.BoardFacts
	RaftAddress string
	SSHAddress  string
	HostKey     string
	Version     string
	Server      bool
	// Labels are the board's user labels (agent configuration); the node
	// controller owns the Node's labels and copies these.
	Labels map[string]string
}

// UnitObservation is what the executor saw of one unit on a board
// (systemctl show).
type UnitObservation struct {
	// Unit is the unit name, herd-<pod>.service.
	Unit string
	// Found is false when systemd does not know the unit (LoadState
	// not-found).
	Found bool
	// ActiveState and SubState are systemd's (active/running,
	// activating/auto-restart, failed/failed, inactive/dead...).
	ActiveState string
	SubState    string
	// NRestarts is systemd's restart count for the unit.
	NRestarts int
	// ExecMainStatus is the exit status of the main process.
	ExecMainStatus int
	// StoppedOnDisconnect is true when the board's own agent stopped the
	// unit while the board was cut off from the servers (the template's
	// on_disconnect; units.UnitState.StoppedOnDisconnect): not a crash, not
	// an exit, and the placer starts it again.
	StoppedOnDisconnect bool
	// Ready is the readiness check's last result; nil when the pod has no
	// readiness check.
	Ready *bool
	// ArtifactReason and ArtifactMessage describe the unit's last artifact
	// fetch failure on the board (reason ArtifactMismatch,
	// ArtifactUnreachable, ...); both "" when none is on record.
	ArtifactReason, ArtifactMessage string
	// ExecMainStartTimestamp, ExecMainExitTimestamp and Result describe
	// the main process's last run as systemd prints them (the listing
	// runs systemctl with TZ=UTC): what a job's run record is made of.
	ExecMainStartTimestamp, ExecMainExitTimestamp, Result string
	// ExecMainStartMonotonic and ExecMainExitMonotonic are the same times
	// on the board's monotonic clock in microseconds (0: unknown), for the
	// run's exact duration.
	ExecMainStartMonotonic, ExecMainExitMonotonic int64
	// TimerActiveState is the ActiveState of a scheduled job's timer, ""
	// when the board has none.
	TimerActiveState string
	// Instances are the instances of the unit's template the board
	// shows (the runs of a job with concurrency allow), each observed
	// like a unit (Unit is herd-<pod>@<id>.service).
	Instances []UnitObservation
}

// Node condition types, besides api.ConditionReady.
const (
	// ConditionFencing is True on an alive board that is not Ready yet
	// because units it may still run were not confirmed stopped.
	ConditionFencing = "Fencing"
	// ConditionAgentDown is True on a Ready board whose agent gossip
	// declared dead while the board itself still answers over SSH (its
	// sshd and systemd): its pods keep running and the placer keeps
	// observing them, but no new pod is scheduled there.
	ConditionAgentDown = api.ConditionAgentDown
)

// Reasons of the node Ready condition.
const (
	reasonMemberAlive   = "MemberAlive"
	reasonMemberDead    = "MemberDead"
	reasonMemberLeft    = "MemberLeft"
	reasonMemberUnknown = "MemberUnknown"
	reasonFencing       = "Fencing"
)

// ReconcileNode keeps the Node object of one board in line with gossip and
// marks the pods of a board that is down as Lost. node is the stored Node
// (nil if none), m what gossip knows (State empty if nothing), pods the pods
// bound to the board (others are ignored).
//
// Phases:
//   - alive: a Ready node stays Ready. Any other node (new, NotReady or
//     Left) becomes NotReady with Fenced false and a Fencing condition: it
//     turns Ready only through ObservedUnits, once the executor has shown
//     that no unit placed elsewhere still runs there. A node is never
//     created for a member that is not alive.
//     A Ready node loses its AgentDown condition.
//   - suspect: nothing changes (a suspect board keeps its phase).
//   - dead, node Ready: two witnesses decide. With m.Witness taken since
//     m.DownSince that succeeded (and is at most WitnessGrace old) the
//     board is only "agent down": it stays Ready, with condition
//     AgentDown=True (reason MemberDead) naming both witnesses, and its
//     pods are kept. With one that failed it becomes NotReady, the SSH
//     error in the message. With none yet nothing changes, until
//     WitnessGrace has passed since m.DownSince (or since the last
//     successful witness): then NotReady too.
//   - dead (node not Ready), or unknown to gossip: NotReady (a Left node
//     stays Left).
//   - left: Left.
//
// Whenever the node is not Ready, every pod bound to it that is not yet
// terminal becomes Lost, so its owner replaces it. Facts and labels are
// copied from gossip whenever gossip knows the member. Status is written
// only when it changes; Since moves only with the phase.
func ReconcileNode(now time.Time, node *api.Node, m MemberInfo, pods []*api.Pod) []Action {
	name := m.Name
	if node != nil {
		name = node.Metadata.Name
	}
	if name == "" || (node == nil && m.State != api.MemberAlive) {
		return nil
	}
	known := m.Name != "" && m.State != ""

	var old api.NodeStatus
	var oldLabels map[string]string
	if node != nil {
		old, oldLabels = node.Status, node.Metadata.Labels
	}
	st := old
	if known {
		f := m.Facts
		st.Address, st.RaftAddress, st.SSHAddress, st.HostKey = m.Addr, f.RaftAddress, f.SSHAddress, f.HostKey
		st.BoardFacts = f.BoardFacts.Clone()
		st.Version, st.Server = f.Version, f.Server
	}

	switch {
	case m.State == api.MemberAlive && node != nil && old.Phase == api.NodeReady:
		// Stays Ready: conditions are ObservedUnits' business. Nothing
		// was lost while the agent was down, so nothing needs fencing.
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionAgentDown)
	case m.State == api.MemberAlive:
		st.Phase, st.Fenced = api.NodeNotReady, false
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionReady, Status: api.ConditionFalse,
			Reason: reasonFencing, Message: "waiting for the board's units to be checked"}, now)
		if api.FindCondition(st.Conditions, ConditionFencing) == nil {
			st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: ConditionFencing, Status: api.ConditionTrue,
				Reason: "StaleUnits", Message: "waiting for the executor to list the board's units"}, now)
		}
	case m.State == api.MemberSuspect:
		// Keep the phase; a suspect board is usually fine.
	case m.State == api.MemberLeft || (!known && old.Phase == api.NodeLeft):
		st.Phase, st.Fenced = api.NodeLeft, false
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionFencing)
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionAgentDown)
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionReady, Status: api.ConditionFalse,
			Reason: reasonMemberLeft, Message: "the board left the cluster"}, now)
	case m.State == api.MemberDead && node != nil && old.Phase == api.NodeReady && witnessVerdict(now, m, old) != verdictDead:
		// The second witness says the board runs (or has not spoken
		// yet): keep it Ready and its pods running.
		if witnessVerdict(now, m, old) == verdictAgentDown {
			st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: ConditionAgentDown, Status: api.ConditionTrue,
				Reason: reasonMemberDead, Message: "gossip declared the agent dead; the board's sshd and systemd answer the leader"}, now)
		}
	default: // dead or unknown
		reason, msg := reasonMemberDead, "gossip declared the board dead"
		if !known {
			reason, msg = reasonMemberUnknown, "gossip has no record of the board"
		} else if old.Phase == api.NodeReady {
			msg += " and " + witnessFailure(now, m)
		} else if c := api.FindCondition(old.Conditions, api.ConditionReady); old.Phase == api.NodeNotReady && c != nil && c.Reason == reasonMemberDead {
			msg = c.Message // keep the message the board went down with
		}
		st.Phase, st.Fenced = api.NodeNotReady, false
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionFencing)
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionAgentDown)
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionReady, Status: api.ConditionFalse,
			Reason: reason, Message: msg}, now)
	}
	if st.Phase != old.Phase || node == nil {
		st.Since = now
	}

	var acts []Action
	labels := oldLabels
	if known {
		labels = m.Facts.Labels
	}
	if node == nil {
		n := &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name, Labels: maps.Clone(labels)}, Status: st}
		acts = append(acts, newAction(ActionCreate, n, "board %s joined (%s)", name, m.Addr))
	} else {
		if !sameLabels(labels, oldLabels) {
			n := *node
			n.Metadata.Labels = maps.Clone(labels)
			acts = append(acts, newAction(ActionUpdate, &n, "board labels changed to %s", formatLabels(labels)))
		}
		if !reflect.DeepEqual(st, old) {
			n := *node
			n.Status = st
			acts = append(acts, newAction(ActionUpdateStatus, &n, "%s", nodeChangeReason(old, st, m)))
		}
	}
	if st.Phase != api.NodeReady {
		acts = append(acts, losePods(name, st, pods)...)
	}
	return acts
}

// Verdicts of the two witnesses on a board gossip calls dead.
type verdict int

const (
	verdictWait      verdict = iota // no witness yet: wait (bounded)
	verdictAgentDown                // SSH and systemd answer: only the agent is down
	verdictDead                     // SSH failed too, or no witness in time
)

// witnessVerdict judges m.Witness for a member gossip calls dead, whose
// node had status old. Only a witness taken at or after m.DownSince
// counts; a successful one counts for WitnessGrace. A failed one is death,
// except on a board already marked AgentDown that answered within
// WitnessGrace: it must keep failing that long.
func witnessVerdict(now time.Time, m MemberInfo, old api.NodeStatus) verdict {
	w := m.Witness
	if m.DownSince.IsZero() {
		return verdictDead
	}
	if !w.At.IsZero() && !w.At.Before(m.DownSince) {
		if w.Err != "" {
			if api.FindCondition(old.Conditions, ConditionAgentDown) != nil && !w.OKAt.Before(m.DownSince) &&
				now.Sub(w.OKAt) <= WitnessGrace {
				return verdictAgentDown
			}
			return verdictDead
		}
		if now.Sub(w.At) <= WitnessGrace {
			return verdictAgentDown
		}
		return verdictDead // the checker went quiet
	}
	if now.Sub(m.DownSince) > WitnessGrace {
		return verdictDead
	}
	return verdictWait
}

// witnessFailure says why the second witness did not save a dead board.
func witnessFailure(now time.Time, m MemberInfo) string {
	w := m.Witness
	switch {
	case m.DownSince.IsZero():
		return "it was already down"
	case !w.At.IsZero() && !w.At.Before(m.DownSince) && w.Err != "":
		return "SSH to it failed: " + w.Err
	case !w.At.IsZero() && !w.At.Before(m.DownSince):
		return fmt.Sprintf("SSH last answered %s ago", now.Sub(w.At).Round(time.Millisecond))
	}
	return fmt.Sprintf("no SSH check answered within %s", WitnessGrace)
}

func nodeChangeReason(old, st api.NodeStatus, m MemberInfo) string {
	if old.Phase == st.Phase {
		was, is := api.FindCondition(old.Conditions, ConditionAgentDown) != nil, api.FindCondition(st.Conditions, ConditionAgentDown) != nil
		switch {
		case is && !was:
			return "board's agent is down (gossip: member dead), its sshd and systemd answer: pods kept"
		case was && !is:
			return "board's agent is back (member alive)"
		}
		return "board facts changed"
	}
	state := string(m.State)
	if state == "" {
		state = "unknown to gossip"
	}
	return fmt.Sprintf("board is %s (member %s), was %s", st.Phase, state, orNone(string(old.Phase)))
}

// losePods marks every non-terminal pod bound to node as Lost.
func losePods(node string, st api.NodeStatus, pods []*api.Pod) []Action {
	var lost []*api.Pod
	for _, p := range pods {
		if p != nil && p.Spec.Node == node && !p.Status.Phase.Terminal() {
			lost = append(lost, p)
		}
	}
	slices.SortFunc(lost, compareByName)
	why := "NotReady"
	if c := api.FindCondition(st.Conditions, api.ConditionReady); c != nil && c.Message != "" {
		why = c.Message
	}
	var acts []Action
	for _, p := range lost {
		np := *p
		np.Status.Phase = api.PodLost
		np.Status.Ready = false
		np.Status.Message = fmt.Sprintf("board %s is %s: %s", node, st.Phase, why)
		acts = append(acts, newAction(ActionUpdateStatus, &np, "board %s is %s", node, st.Phase))
	}
	return acts
}

// ObservedUnits folds the executor's listing of the herd units on a board
// into the board's fencing. While the node is fencing (alive, NotReady,
// Fencing condition set by ReconcileNode), a unit is stale when it exists on
// the board but its pod is not bound to this board in a non-terminal phase;
// the executor stops and removes stale units. With no stale unit left the
// node becomes Ready and Fenced. Otherwise the Fencing condition lists the
// stale units (written only when the list changes). For any other node it
// returns nothing. pods may be every pod; units is the executor's complete
// listing of herd-*.service units on the board.
func ObservedUnits(now time.Time, node *api.Node, pods []*api.Pod, units []UnitObservation) []Action {
	if node == nil || node.Status.Phase != api.NodeNotReady || api.FindCondition(node.Status.Conditions, ConditionFencing) == nil {
		return nil
	}
	live := make(map[string]bool)
	for _, p := range pods {
		if p != nil && p.Spec.Node == node.Metadata.Name && !p.Status.Phase.Terminal() {
			live[p.Metadata.Name] = true
		}
	}
	var stale []string
	for _, u := range units {
		pod, ok := api.PodFromUnitName(u.Unit)
		if !ok || !u.Found || live[pod] {
			continue
		}
		stale = append(stale, u.Unit)
	}
	slices.Sort(stale)
	stale = slices.Compact(stale)

	st := node.Status
	var reason string
	if len(stale) == 0 {
		st.Phase, st.Fenced, st.Since = api.NodeReady, true, now
		st.Conditions, _ = api.RemoveCondition(st.Conditions, ConditionFencing)
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: api.ConditionReady, Status: api.ConditionTrue,
			Reason: reasonMemberAlive, Message: "fenced: no stale units"}, now)
		reason = "board fenced: no stale units left"
	} else {
		shown := stale
		if len(shown) > 5 {
			shown = shown[:5]
		}
		msg := fmt.Sprintf("%d stale units to stop: %s", len(stale), strings.Join(shown, ", "))
		if len(stale) > len(shown) {
			msg += ", ..."
		}
		st.Conditions, _ = api.SetCondition(st.Conditions, api.Condition{Type: ConditionFencing, Status: api.ConditionTrue,
			Reason: "StaleUnits", Message: msg}, now)
		reason = msg
	}
	if reflect.DeepEqual(st, node.Status) {
		return nil
	}
	n := *node
	n.Status = st
	return []Action{newAction(ActionUpdateStatus, &n, "%s", reason)}
}

// formatLabels renders labels as "a=b,c=d" sorted by key, "{}" when empty.
func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "{}"
	}
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
