package cli

import (
	"testing"

	"github.com/herd-dev/herd/api"
)

func TestNodeStatusShowsAgentDown(t *testing.T) {
	n := &api.Node{Status: api.NodeStatus{Phase: api.NodeReady}}
	if got := nodeStatus(n); got != "Ready" {
		t.Errorf("plain: %q, want Ready", got)
	}
	n.Status.Conditions = []api.Condition{{Type: "AgentDown", Status: api.ConditionTrue, Reason: "MemberDead"}}
	n.Spec.Unschedulable = true
	if got := nodeStatus(n); got != "Ready,AgentDown,SchedulingDisabled" {
		t.Errorf("agent down and cordoned: %q, want Ready,AgentDown,SchedulingDisabled", got)
	}
	n.Status.Conditions[0].Status = api.ConditionFalse
	n.Spec.Unschedulable = false
	if got := nodeStatus(n); got != "Ready" {
		t.Errorf("AgentDown=False: %q, want Ready", got)
	}
}
