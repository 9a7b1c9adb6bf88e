package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// bigTemplate returns a template that api.TemplateBytes counts as exactly
// budget bytes, made as costly to store as possible: long labels (copied
// into the pod's metadata), many dynamic ports with long names (each gets
// a host port), and file content of '<', which JSON writes as six bytes.
func bigTemplate(t *testing.T, budget int) api.PodTemplate {
	t.Helper()
	tmpl := api.PodTemplate{
		Labels:  map[string]string{},
		Exec:    []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
		Sandbox: api.SandboxDefault,
	}
	for i := range 16 {
		tmpl.Labels[fmt.Sprintf("%s%02d", strings.Repeat("k", 61), i)] = strings.Repeat("v", 63)
	}
	for i := range 40 {
		tmpl.Ports = append(tmpl.Ports, api.Port{Name: fmt.Sprintf("%s%02d", strings.Repeat("p", 61), i), Protocol: "tcp"})
	}
	tmpl.Files = []api.File{{Path: "/srv/web/index.html", Mode: "0644"}}
	dp := &api.Pod{Spec: api.PodSpec{Template: tmpl}}
	api.SetDefaults(dp)
	tmpl = dp.Spec.Template
	left := budget - api.TemplateBytes(&tmpl)
	if left < 6 {
		t.Fatalf("the template's fixed part already takes %d of %d bytes", api.TemplateBytes(&tmpl), budget)
	}
	tmpl.Files[0].Content = strings.Repeat("<", left/6) + strings.Repeat("a", left%6)
	if got := api.TemplateBytes(&tmpl); got != budget {
		t.Fatalf("TemplateBytes = %d, want %d", got, budget)
	}
	return tmpl
}

// bindTxnBytes encodes a bind as the agent's Writer does: one raftstore
// transaction of the spec update and the status update.
func bindTxnBytes(t *testing.T, a Action) int {
	t.Helper()
	raw, err := api.ToRaw(a.Object)
	if err != nil {
		t.Fatal(err)
	}
	status := raw
	status.Metadata.ResourceVersion = 0
	b, err := json.Marshal([]raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}, {Type: raftstore.OpUpdateStatus, Object: status}})
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestTemplateBudgetFitsBind: a template admission accepts at the very
// top of its budget makes a pod whose bind fits in one Raft transaction,
// and one byte more is refused at admission with the numbers.
func TestTemplateBudgetFitsBind(t *testing.T) {
	if limit := raftstore.DefaultConfig().MaxTxnBytes; limit != api.MaxBindTxnBytes {
		t.Fatalf("raftstore's MaxTxnBytes is %d, api's template budget assumes %d", limit, api.MaxBindTxnBytes)
	}
	tmpl := bigTemplate(t, api.MaxTemplateBytes)
	d := &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: strings.Repeat("d", 63)},
		Spec: api.DeploymentSpec{Replicas: intp(1), Template: tmpl}}
	api.SetDefaults(d)
	if err := api.Validate(d); err != nil {
		t.Fatalf("admission refuses a template at its budget: %v", err)
	}
	nodeName := strings.Repeat("n", 250)
	pod := newPod(strings.Repeat("d", 57)+"-bcdfg", api.OwnerRef{Kind: api.KindDeployment, Name: d.Metadata.Name}, d.Spec.Template, api.TemplateHash(d.Spec.Template), nil)
	pod.Metadata.Created, pod.Metadata.ResourceVersion, pod.Metadata.Generation = t0, 1<<62, 1<<62
	// A long Scheduled=False explanation from earlier passes.
	pod.Status.Conditions = []api.Condition{{Type: api.ConditionScheduled, Status: api.ConditionFalse,
		Reason: reasonUnschedulable, Message: strings.Repeat("0/100 boards: 100 not ready; ", 40), LastTransitionTime: t0}}
	node := readyNode(nodeName)
	node.Status.Address = "fdaa:bbbb:cccc:dddd:eeee:ffff:1111:2222"
	acts := ScheduleWith(scheduler.DefaultConfig(), t0, &scheduler.Snapshot{Nodes: []*api.Node{node}, Pods: []*api.Pod{pod}}, []*api.Pod{pod})
	if len(acts) != 1 || acts[0].Type != ActionBind {
		t.Fatalf("ScheduleWith = %v, want one bind", acts)
	}
	if n := bindTxnBytes(t, acts[0]); n > api.MaxBindTxnBytes {
		t.Errorf("the bind of a pod at the template budget is %d bytes, more than the %d a transaction holds", n, api.MaxBindTxnBytes)
	} else {
		t.Logf("bind of a pod at the template budget: %d of %d bytes", n, api.MaxBindTxnBytes)
	}

	over := bigTemplate(t, api.MaxTemplateBytes+1)
	d.Spec.Template = over
	err := api.Validate(d)
	if err == nil {
		t.Fatal("admission accepts a template over its budget")
	}
	for _, want := range []string{"spec.template", fmt.Sprint(api.MaxTemplateBytes + 1), fmt.Sprint(api.MaxTemplateBytes), fmt.Sprint(api.MaxBindTxnBytes)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestScheduleInvalidPodGetsCondition: a pod stored around admission (or
// before a rule existed) that could not be bound or rendered is not bound:
// it gets Scheduled=False, reason InvalidPod, once, and nothing retries it.
func TestScheduleInvalidPodGetsCondition(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *api.Pod)
		want string
	}{
		{"over the template budget", func(p *api.Pod) { p.Spec.Template = bigTemplate(t, api.MaxTemplateBytes+100) }, "Raft transaction"},
		{"unrenderable exec", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/opt/$APP/bin"} }, "spec.template.exec[0]"},
		{"setuid file", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/opt/x", Mode: "4755"}} }, "allow_setid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("web-bcdfg", api.OwnerRef{Kind: api.KindDeployment, Name: "web"}, webTemplate(), "r1", nil)
			tc.edit(pod)
			snap := &scheduler.Snapshot{Nodes: []*api.Node{readyNode("a")}, Pods: []*api.Pod{pod}}
			acts := ScheduleWith(scheduler.DefaultConfig(), t0, snap, []*api.Pod{pod})
			if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
				t.Fatalf("ScheduleWith = %v, want one status update", acts)
			}
			np := acts[0].Object.(*api.Pod)
			c := api.FindCondition(np.Status.Conditions, api.ConditionScheduled)
			if c == nil || c.Status != api.ConditionFalse || c.Reason != "InvalidPod" || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("condition = %+v, want Scheduled=False InvalidPod naming %q", c, tc.want)
			}
			if np.Spec.Node != "" {
				t.Errorf("pod bound to %q", np.Spec.Node)
			}
			// Written once: the next pass, seeing the condition, does nothing.
			snap.Pods = []*api.Pod{np}
			if again := ScheduleWith(scheduler.DefaultConfig(), t0, snap, []*api.Pod{np}); len(again) != 0 {
				t.Errorf("second pass = %v, want nothing", again)
			}
		})
	}
}
