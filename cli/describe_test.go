package cli

import (
	"testing"

	"github.com/herd-dev/herd/api"
)

func TestDescribeGolden(t *testing.T) {
	fx := fixtures()
	var pods []*api.Pod
	for _, o := range fx[api.KindPod] {
		pods = append(pods, o.(*api.Pod))
	}
	tests := []struct {
		name string
		obj  api.Object
		pods []*api.Pod
	}{
		{"deployment", fx[api.KindDeployment][1], pods},
		{"deployment_bare", fx[api.KindDeployment][0], nil},
		{"daemon", fx[api.KindDaemon][0], nil},
		{"pod_running", fx[api.KindPod][0], nil},
		{"pod_pending", fx[api.KindPod][2], nil},
		{"service", fx[api.KindService][1], nil},
		{"service_no_endpoints", fx[api.KindService][0], nil},
		{"node", fx[api.KindNode][0], pods[:1]},
		{"node_cordoned", fx[api.KindNode][1], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := printer{Now: testNow, FormatLabels: defaultAPIFuncs().formatLabels}
			golden(t, "describe_"+tt.name+".golden", p.describe(tt.obj, tt.pods))
		})
	}
}
