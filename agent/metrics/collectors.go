package metrics

import (
	"encoding/json"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/internal/promtext"
	"github.com/herd-dev/herd/raftstore"
)

// RaftSource is what the raft collector reads at scrape time;
// *raftstore.Store is one. Stats must be cheap and safe for concurrent use.
type RaftSource interface {
	Stats() raftstore.Stats
}

// GossipSource is what the gossip collector reads at scrape time;
// *gossip.Gossip is one.
type GossipSource interface {
	Members() []gossip.Member
	Stats() gossip.Stats
}

// StateSource is this server's copy of the store, read at scrape time
// without a read barrier (the local copy, as ?stale reads it);
// *raftstore.Store is one.
type StateSource interface {
	List(kind api.Kind) ([]api.RawObject, uint64, error)
}

// AddRaft adds the herd_raft_* gauges, read from src at scrape time.
func (r *Registry) AddRaft(src RaftSource) {
	c := &raftCollector{src: src}
	r.reg.Collect(c.collect, raftLeaderDesc, raftStateDesc, raftTermDesc, raftCommitDesc, raftAppliedDesc,
		raftLastLogDesc, raftSnapshotDesc, raftLastContactDesc, raftObjectsDesc, raftSuspicionsDesc, raftSilencesHeldDesc)
}

// AddGossip adds the herd_gossip_* metrics, read from src at scrape time.
func (r *Registry) AddGossip(src GossipSource) {
	c := &gossipCollector{src: src}
	r.reg.Collect(c.collect, gossipMembersDesc, gossipProbesDesc, gossipRTTDesc, gossipEventsDesc, gossipHealthDesc)
}

// AddState adds herd_pods and herd_nodes, counted in src at scrape time.
func (r *Registry) AddState(src StateSource) {
	c := &stateCollector{src: src}
	r.reg.Collect(c.collect, podsDesc, nodesDesc, nodeConditionsDesc, stateErrorsDesc)
}

var (
	raftLeaderDesc       = desc("herd_raft_leader", "1 while this server is the Raft leader, else 0.")
	raftStateDesc        = desc("herd_raft_state", "1 for this server's Raft state (Follower, Candidate, Leader, Shutdown), 0 for the others.", "state")
	raftTermDesc         = desc("herd_raft_term", "The current Raft term.")
	raftCommitDesc       = desc("herd_raft_commit_index", "The last Raft log index known committed.")
	raftAppliedDesc      = desc("herd_raft_applied_index", "The last Raft log index applied on this server.")
	raftLastLogDesc      = desc("herd_raft_last_log_index", "The last index in this server's Raft log.")
	raftSnapshotDesc     = desc("herd_raft_last_snapshot_index", "The Raft log index of this server's latest snapshot.")
	raftLastContactDesc  = desc("herd_raft_last_contact_seconds", "Seconds since this follower last heard from the leader (0 on the leader; absent before any contact).")
	raftObjectsDesc      = desc("herd_raft_objects", "Objects in this server's copy of the store.")
	raftSuspicionsDesc   = counterDesc("herd_raft_leader_silences_total", "Silences of the Raft leader after which this server started an election of its own watch: leader losses, or on a lossy link false alarms the others refuse.")
	raftSilencesHeldDesc = counterDesc("herd_raft_leader_silences_held_total", "Silences of the Raft leader after which a second opinion (a gossip ping of the leader) found it answering, so this server held its election back.")
	raftStates           = []string{"Follower", "Candidate", "Leader", "Shutdown"}
)

// raftCollector reads raftstore.Stats at scrape time.
type raftCollector struct {
	src RaftSource
}

func (c *raftCollector) collect(out *promtext.Sink) {
	st := c.src.Stats()
	gauge := out.Add
	leader := st.State == "Leader"
	gauge(raftLeaderDesc, b2f(leader))
	for _, s := range raftStates {
		gauge(raftStateDesc, b2f(st.State == s), s)
	}
	gauge(raftTermDesc, float64(st.Term))
	gauge(raftCommitDesc, float64(st.CommitIndex))
	gauge(raftAppliedDesc, float64(st.AppliedIndex))
	gauge(raftLastLogDesc, float64(st.LastLogIndex))
	gauge(raftSnapshotDesc, float64(st.LastSnapshotIndex))
	gauge(raftObjectsDesc, float64(st.Objects))
	out.Add(raftSuspicionsDesc, float64(st.Suspicions))
	out.Add(raftSilencesHeldDesc, float64(st.SilencesHeld))
	switch {
	case leader:
		gauge(raftLastContactDesc, 0)
	case !st.LastContact.IsZero():
		// A reading, not a decision: the real clock.
		gauge(raftLastContactDesc, max(0, time.Since(st.LastContact).Seconds()))
	}
}

var (
	gossipMembersDesc  = desc("herd_gossip_members", "Gossip members as this agent sees them, by state (alive, dead, left; memberlist does not expose suspicion).", "state")
	gossipProbesDesc   = counterDesc("herd_gossip_probe_acks_total", "Direct gossip probes of other members that were acknowledged.")
	gossipRTTDesc      = counterDesc("herd_gossip_probe_rtt_seconds_total", "Sum of the round-trip times of the acknowledged direct probes.")
	gossipEventsDesc   = counterDesc("herd_gossip_member_events_total", "Membership events this agent saw, by type: join (or came back), leave (graceful), fail (declared dead).", "type")
	gossipHealthDesc   = desc("herd_gossip_health_score", "memberlist's local health (Lifeguard awareness): 0 is healthy, higher means probes of others are late here.")
	gossipMemberStates = []api.MemberState{api.MemberAlive, api.MemberDead, api.MemberLeft}
)

// gossipCollector reads gossip.Members and gossip.Stats at scrape time.
type gossipCollector struct{ src GossipSource }

func (c *gossipCollector) collect(out *promtext.Sink) {
	count := map[api.MemberState]int{}
	for _, m := range c.src.Members() {
		count[m.State]++
	}
	for _, s := range gossipMemberStates {
		out.Add(gossipMembersDesc, float64(count[s]), string(s))
	}
	st := c.src.Stats()
	out.Add(gossipProbesDesc, float64(st.ProbeAcks))
	out.Add(gossipRTTDesc, st.ProbeRTT.Seconds())
	for typ, n := range map[string]uint64{"join": st.Joins, "leave": st.Leaves, "fail": st.Failures} {
		out.Add(gossipEventsDesc, float64(n), typ)
	}
	out.Add(gossipHealthDesc, float64(st.HealthScore))
}

var (
	podsDesc           = desc("herd_pods", "Pods in this server's copy of the store, by phase (every phase, 0 included).", "phase")
	nodesDesc          = desc("herd_nodes", "Nodes in this server's copy of the store, by phase (Ready, NotReady, Left).", "phase")
	nodeConditionsDesc = desc("herd_node_conditions", "Nodes whose condition is True, by condition (Ready, Fencing, AgentDown), and cordoned nodes (condition Unschedulable).", "condition")
	stateErrorsDesc    = desc("herd_state_read_errors", "1 when the last scrape could not read this server's store (herd_pods and herd_nodes are then absent).")
	podPhases          = []api.PodPhase{api.PodPending, api.PodScheduled, api.PodStarting, api.PodRunning, api.PodFailed, api.PodLost, api.PodSucceeded}
	nodePhases         = []api.NodePhase{api.NodeReady, api.NodeNotReady, api.NodeLeft}
	nodeConditions     = []string{api.ConditionReady, controller.ConditionFencing, controller.ConditionAgentDown, "Unschedulable"}
)

// stateCollector counts pods and nodes in the local store at scrape time.
type stateCollector struct{ src StateSource }

// statusOf is the part of a pod's or node's status the collector reads.
type statusOf struct {
	Phase      string          `json:"phase"`
	Conditions []api.Condition `json:"conditions"`
}

// specOf is the part of a node's spec the collector reads.
type specOf struct {
	Unschedulable bool `json:"unschedulable"`
}

func (c *stateCollector) collect(out *promtext.Sink) {
	pods, _, perr := c.src.List(api.KindPod)
	nodes, _, nerr := c.src.List(api.KindNode)
	if perr != nil || nerr != nil {
		out.Add(stateErrorsDesc, 1)
		return
	}
	out.Add(stateErrorsDesc, 0)
	byPhase := map[string]int{}
	for _, p := range pods {
		var st statusOf
		_ = json.Unmarshal(p.Status, &st) // an unreadable status counts as no phase
		byPhase[st.Phase]++
	}
	for _, ph := range podPhases {
		out.Add(podsDesc, float64(byPhase[string(ph)]), string(ph))
	}
	nodePhase, conds := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		var st statusOf
		var sp specOf
		_ = json.Unmarshal(n.Status, &st)
		_ = json.Unmarshal(n.Spec, &sp)
		nodePhase[st.Phase]++
		for _, cd := range st.Conditions {
			if cd.Status == api.ConditionTrue {
				conds[cd.Type]++
			}
		}
		if sp.Unschedulable {
			conds["Unschedulable"]++
		}
	}
	for _, ph := range nodePhases {
		out.Add(nodesDesc, float64(nodePhase[string(ph)]), string(ph))
	}
	for _, cd := range nodeConditions {
		out.Add(nodeConditionsDesc, float64(conds[cd]), cd)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
