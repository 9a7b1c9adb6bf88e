package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// moveFleet stores boards pi1..pi3 (Ready), deployment web and, for each
// name in pods, a Running ready pod of web's current revision on the
// board named after the colon ("web-a:pi1").
func moveFleet(t *testing.T, h *harness, pods ...string) *api.Deployment {
	t.Helper()
	for _, b := range []string{"pi1", "pi2", "pi3"} {
		h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: b}, Status: api.NodeStatus{Phase: api.NodeReady}})
	}
	h.stdin = deploymentTOML("web", "")
	h.mustRun(0, "apply", "-f", "-")
	d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
	for _, s := range pods {
		name, board, _ := strings.Cut(s, ":")
		h.put(movePod(d, name, board))
	}
	return d
}

func movePod(d *api.Deployment, name, board string) *api.Pod {
	return &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: name},
		Spec: api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: d.Metadata.Name}, Template: d.Spec.Template,
			Revision: api.TemplateHash(d.Spec.Template), Node: board},
		Status: api.PodStatus{Phase: api.PodRunning, Ready: true}}
}

func TestDrain(t *testing.T) {
	h := newHarness(t)
	d := moveFleet(t, h, "web-a:pi1", "web-c:pi2")
	h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "exp-a"},
		Spec:   api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}, Node: "pi1"},
		Status: api.PodStatus{Phase: api.PodRunning, Ready: true}})
	// The deployment controller standing in: the replacement is created
	// Pending, starts on pi3, then the old pod goes.
	h.setOnWatch(func(n int) {
		if n != 1 {
			return
		}
		if nd := h.getTyped(api.KindNode, "pi1").(*api.Node); !nd.Spec.Unschedulable || !nd.Draining() {
			t.Errorf("while draining: pi1 spec %+v, want cordoned with a drain request", nd.Spec)
		}
		q := movePod(d, "web-b", "pi3")
		q.Spec.Replaces = "web-a"
		q.Status = api.PodStatus{Phase: api.PodPending}
		h.put(q)
		q.Status = api.PodStatus{Phase: api.PodRunning, Ready: true}
		h.put(q)
		h.remove(api.KindPod, "web-a")
	})
	out, _ := h.mustRun(0, "drain", "pi1")
	want := `node/pi1 cordoned, draining
node/pi1: 1 pod left: web-a
node/pi1: 1 pod left: web-a (replacement web-b Pending on pi3)
node/pi1: 1 pod left: web-a (replacement web-b Running on pi3)
node/pi1: no pods left
node/pi1 drained
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("drain output (-want +got):\n%s", diff)
	}
	n := h.getTyped(api.KindNode, "pi1").(*api.Node)
	if !n.Spec.Unschedulable || n.Spec.Drain == nil || n.Spec.Drain.Daemons {
		t.Errorf("after drain: spec %+v, want cordoned, drain without daemons", n.Spec)
	}
	out, _ = h.mustRun(0, "uncordon", "pi1")
	if out != "node/pi1 uncordoned\n" {
		t.Errorf("uncordon stdout %q", out)
	}
	if n := h.getTyped(api.KindNode, "pi1").(*api.Node); n.Spec.Unschedulable || n.Spec.Drain != nil {
		t.Errorf("after uncordon: spec %+v, want neither cordon nor drain", n.Spec)
	}
}

func TestDrainDaemonsCountsDaemonPods(t *testing.T) {
	h := newHarness(t)
	moveFleet(t, h)
	h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "exp-a"},
		Spec:   api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}, Node: "pi1"},
		Status: api.PodStatus{Phase: api.PodRunning, Ready: true}})
	h.setOnWatch(func(n int) {
		if n == 1 {
			h.remove(api.KindPod, "exp-a")
		}
	})
	out, _ := h.mustRun(0, "drain", "node/pi1", "--daemons")
	if !strings.Contains(out, "node/pi1: 1 pod left: exp-a\n") || !strings.HasSuffix(out, "node/pi1 drained\n") {
		t.Errorf("stdout %q", out)
	}
	if n := h.getTyped(api.KindNode, "pi1").(*api.Node); !n.DrainsDaemons() {
		t.Errorf("spec %+v, want a drain with daemons", n.Spec)
	}
}

// TestDrainTimeoutWithdraws: when nothing can move, drain ends at its
// limit, says what is left and withdraws the request; the cordon stays.
func TestDrainTimeoutWithdraws(t *testing.T) {
	h := newHarness(t)
	moveFleet(t, h, "web-a:pi1")
	_, errOut := h.mustRun(1, "drain", "pi1", "--timeout", "1s")
	want := "error: timed out after 1s draining node/pi1, 1 pod left: web-a; the drain request was withdrawn and the board stays cordoned (herdctl drain to try again, herdctl uncordon to undo)\n"
	if errOut != want {
		t.Errorf("stderr %q\nwant   %q", errOut, want)
	}
	n := h.getTyped(api.KindNode, "pi1").(*api.Node)
	if !n.Spec.Unschedulable || n.Spec.Drain != nil {
		t.Errorf("after the timeout: spec %+v, want cordoned without a drain request", n.Spec)
	}
}

func TestDrainNoWaitAndErrors(t *testing.T) {
	h := newHarness(t)
	moveFleet(t, h, "web-a:pi1")
	out, _ := h.mustRun(0, "drain", "pi1", "--wait=false")
	if out != "node/pi1 cordoned, draining\n" {
		t.Errorf("stdout %q", out)
	}
	if n := h.getTyped(api.KindNode, "pi1").(*api.Node); !n.Draining() {
		t.Errorf("spec %+v, want a drain request", n.Spec)
	}
	_, errOut := h.mustRun(1, "drain", "nope")
	if !strings.Contains(errOut, "node/nope") || !strings.Contains(errOut, "not found") {
		t.Errorf("stderr %q", errOut)
	}
	h.mustRun(2, "drain")
	h.mustRun(2, "drain", "pi1", "pi2")
}

func TestRebalanceDryRun(t *testing.T) {
	h := newHarness(t)
	moveFleet(t, h, "web-a:pi1", "web-b:pi1", "web-c:pi1", "web-d:pi2")
	out, _ := h.mustRun(0, "rebalance", "--dry-run")
	want := `deployment/web: 1 moves (now pi1=3 pi2=1 pi3=0)
  pod/web-c: pi1 -> pi3
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if d := h.getTyped(api.KindDeployment, "web").(*api.Deployment); d.Spec.Rebalance != nil {
		t.Errorf("dry run stored rebalance %+v", d.Spec.Rebalance)
	}
}

func TestRebalance(t *testing.T) {
	h := newHarness(t)
	moveFleet(t, h, "web-a:pi1", "web-b:pi1")
	h.setOnWatch(func(n int) {
		if n != 1 {
			return
		}
		d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
		if d.Spec.Rebalance == nil {
			t.Fatal("no rebalance request stored")
		}
		d.Status.Rebalance = &api.RebalanceStatus{ID: d.Spec.Rebalance.ID, Message: "1 moves left, spread pi1=2 pi2=0 pi3=0"}
		h.put(d)
		d.Status.Rebalance = &api.RebalanceStatus{ID: d.Spec.Rebalance.ID, Done: true, Message: "spread over pi1=1 pi2=1 pi3=0"}
		h.put(d)
	})
	out, _ := h.mustRun(0, "rebalance", "deployment", "web")
	want := `deployment/web: rebalance requested
deployment/web: 1 moves left, spread pi1=2 pi2=0 pi3=0
deployment/web: spread over pi1=1 pi2=1 pi3=0
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("rebalance (-want +got):\n%s", diff)
	}
	_, errOut := h.mustRun(1, "rebalance", "deploy/nope")
	if !strings.Contains(errOut, "deployment/nope: not found") {
		t.Errorf("stderr %q", errOut)
	}
	h.mustRun(2, "rebalance", "service", "web")
}
