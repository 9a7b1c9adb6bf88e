package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func TestDeriveEvents(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	owner := api.OwnerRef{Kind: api.KindDeployment, Name: "web"}
	pod := func(node string, phase api.PodPhase, ready bool, restarts int) *api.Pod {
		return &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-abcde"},
			Spec:   api.PodSpec{Owner: owner, Node: node},
			Status: api.PodStatus{Phase: phase, Ready: ready, Restarts: restarts, Unit: "herd-web-abcde.service"}}
	}
	unschedulable := pod("", api.PodPending, false, 0)
	unschedulable.Status.Conditions = []api.Condition{{Type: api.ConditionScheduled, Status: api.ConditionFalse, Reason: "Unschedulable", Message: "no node has 512Mi free"}}
	node := func(phase api.NodePhase, reason, msg string, cordoned, fenced bool) *api.Node {
		return &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b2"}, Spec: api.NodeSpec{Unschedulable: cordoned},
			Status: api.NodeStatus{Phase: phase, Fenced: fenced, Conditions: []api.Condition{{Type: api.ConditionReady, Reason: reason, Message: msg}}}}
	}
	svc := func(eps ...api.Endpoint) *api.Service {
		return &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Status: api.ServiceStatus{Endpoints: eps}}
	}
	ep := func(pod, node string) api.Endpoint {
		return api.Endpoint{Port: "http", Pod: pod, Node: node, Address: "10.0.0.1:8080"}
	}
	type ev struct{ Reason, Type, Node, Message string }
	tests := []struct {
		name     string
		old, cur api.Object
		want     []ev
	}{
		{"pod created", nil, pod("", api.PodPending, false, 0), []ev{{api.ReasonCreated, api.EventNormal, "", "created by deployment/web"}}},
		{"pod bound", pod("", api.PodPending, false, 0), pod("b4", api.PodScheduled, false, 0), []ev{{api.ReasonBound, api.EventNormal, "b4", "bound to b4"}}},
		{"unit started", pod("b4", api.PodStarting, false, 0), pod("b4", api.PodRunning, false, 0),
			[]ev{{api.ReasonStarted, api.EventNormal, "b4", "herd-web-abcde.service active on b4"}}},
		{"ready", pod("b4", api.PodRunning, false, 0), pod("b4", api.PodRunning, true, 0), []ev{{api.ReasonReady, api.EventNormal, "b4", "ready on b4"}}},
		{"lost", pod("b2", api.PodRunning, true, 0), pod("b2", api.PodLost, false, 0), []ev{{api.ReasonLost, api.EventWarning, "b2", "lost with b2"}}},
		{"restarted", pod("b4", api.PodRunning, true, 0), pod("b4", api.PodRunning, true, 2),
			[]ev{{api.ReasonRestarted, api.EventWarning, "b4", "systemd restarted herd-web-abcde.service (2 restarts)"}}},
		{"scheduling failure once", pod("", api.PodPending, false, 0), unschedulable, []ev{{api.ReasonFailedScheduling, api.EventWarning, "", "no node has 512Mi free"}}},
		{"same scheduling failure again", unschedulable, unschedulable, nil},
		{"pod deleted", pod("b4", api.PodRunning, true, 0), nil, []ev{{api.ReasonDeleted, api.EventNormal, "", "deleted"}}},
		{"node dead", node(api.NodeReady, "MemberAlive", "", false, true), node(api.NodeNotReady, reasonMemberDead, "gossip declared the board dead", false, false),
			[]ev{{api.ReasonNodeDead, api.EventWarning, "b2", "b2 is NotReady: gossip declared the board dead"}}},
		{"node back and fenced", node(api.NodeNotReady, reasonFencing, "", false, false), node(api.NodeReady, reasonMemberAlive, "fenced: no stale units", false, true),
			[]ev{{api.ReasonNodeReady, api.EventNormal, "b2", "b2 is Ready: fenced: no stale units"}, {api.ReasonFenced, api.EventNormal, "b2", "b2 fenced: fenced: no stale units"}}},
		{"cordoned", node(api.NodeReady, "", "", false, true), node(api.NodeReady, "", "", true, true),
			[]ev{{api.ReasonNodeCordoned, api.EventNormal, "b2", "b2 cordoned: no new pods are placed there"}}},
		{"drain", node(api.NodeReady, "", "", true, true), draining(node(api.NodeReady, "", "", true, true)),
			[]ev{{api.ReasonNodeDraining, api.EventNormal, "b2", "b2 draining: its deployments' pods move off, one at a time"}}},
		{"drain withdrawn", draining(node(api.NodeReady, "", "", true, true)), node(api.NodeReady, "", "", true, true),
			[]ev{{api.ReasonNodeDrainEnded, api.EventNormal, "b2", "b2: drain request ended"}}},
		{"facts refreshed: nothing", node(api.NodeReady, "", "", false, true), node(api.NodeReady, "", "", false, true), nil},
		{"endpoints", svc(ep("web-a", "b1"), ep("web-b", "b2")), svc(ep("web-a", "b1"), ep("web-c", "b4")),
			[]ev{{api.ReasonEndpointsUpdated, api.EventNormal, "", "2 endpoints: web-a@b1, web-c@b4"}}},
		{"no endpoints", svc(ep("web-a", "b1")), svc(), []ev{{api.ReasonEndpointsUpdated, api.EventWarning, "", "no ready endpoints"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ev
			for _, s := range DeriveEvents(tt.old, tt.cur, now) {
				if !s.Time.Equal(now) {
					t.Errorf("event time %v, want %v", s.Time, now)
				}
				got = append(got, ev{s.Reason, s.Type, s.Node, s.Message})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func draining(n *api.Node) *api.Node {
	n.Spec.Drain = &api.NodeDrain{}
	return n
}
