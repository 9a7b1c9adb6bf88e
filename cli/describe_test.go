package cli

import (
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

func TestDescribeGolden(t *testing.T) {
	fx := fixtures()
	var pods []*api.Pod
	for _, o := range fx[api.KindPod] {
		pods = append(pods, o.(*api.Pod))
	}
	lost := &api.Event{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: api.EventName(40, 0)}, Spec: api.EventSpec{
		Time: testNow.Add(-90 * time.Second), Object: api.OwnerRef{Kind: api.KindPod, Name: "web-1"},
		Reason: api.ReasonLost, Type: api.EventWarning, Node: "pi2", Message: "lost with pi2: gossip declared the board dead"}}
	bound := &api.Event{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: api.EventName(41, 0)}, Spec: api.EventSpec{
		Time: testNow.Add(-89 * time.Second), Object: api.OwnerRef{Kind: api.KindPod, Name: "web-1"},
		Reason: api.ReasonBound, Type: api.EventNormal, Node: "pi3", Message: "bound to pi3"}}
	tests := []struct {
		name   string
		obj    api.Object
		pods   []*api.Pod
		events []*api.Event
	}{
		{"deployment", fx[api.KindDeployment][1], pods, nil},
		{"deployment_bare", fx[api.KindDeployment][0], nil, nil},
		{"daemon", fx[api.KindDaemon][0], nil, nil},
		{"pod_running", fx[api.KindPod][0], nil, []*api.Event{lost, bound}},
		{"pod_pending", fx[api.KindPod][2], nil, nil},
		{"service", fx[api.KindService][1], nil, nil},
		{"service_no_endpoints", fx[api.KindService][0], nil, nil},
		{"node", fx[api.KindNode][0], pods[:1], nil},
		{"node_cordoned", fx[api.KindNode][1], nil, nil},
		{"job_scheduled", fx[api.KindJob][0], nil, nil},
		{"job_failed", fx[api.KindJob][1], nil, nil},
		{"job_allow", fx[api.KindJob][2], nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := printer{Now: testNow, FormatLabels: defaultAPIFuncs().formatLabels}
			golden(t, "describe_"+tt.name+".golden", p.describe(tt.obj, tt.pods, tt.events))
		})
	}
}
