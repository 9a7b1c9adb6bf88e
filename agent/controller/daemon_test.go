package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

func exporter(sel ...string) *api.Daemon {
	t := webTemplate()
	t.Labels = map[string]string{"app": "exporter"}
	t.Ports = []api.Port{{Name: "metrics", Port: 9100, Protocol: "tcp"}}
	if len(sel) > 0 {
		t.NodeSelector = map[string]string{sel[0]: sel[1]}
	}
	return &api.Daemon{Kind: api.KindDaemon, Metadata: api.ObjectMeta{Name: "exp"}, Spec: api.DaemonSpec{Template: t}}
}

// daemonPod returns a pod of ds on node named <daemon>-<node>, as herd
// named them before names carried a counter: a node's pod is found by
// owner and node, whatever its name.
func daemonPod(ds *api.Daemon, node string, ph api.PodPhase) *api.Pod {
	return ownedPod(ds.Metadata.Name+"-"+node, api.OwnerRef{Kind: api.KindDaemon, Name: ds.Metadata.Name}, ds.Spec.Template, node, ph)
}

// maskedSummary is summary with the suffix of every created pod's name
// replaced by "*" (checking that it is one).
func maskedSummary(t *testing.T, acts []Action) []string {
	t.Helper()
	out := summary(acts)
	for i, a := range acts {
		if a.Type != ActionCreate || a.Kind != api.KindPod {
			continue
		}
		n := a.Name
		if len(n) < suffixLen+2 || n[len(n)-suffixLen-1] != '-' || strings.Trim(n[len(n)-suffixLen:], suffixAlphabet) != "" {
			t.Errorf("created pod %q has no suffix", n)
			continue
		}
		out[i] = "create pods/" + n[:len(n)-suffixLen] + "*"
	}
	return out
}

func TestReconcileDaemon(t *testing.T) {
	ds := exporter("arch", "arm64")
	sensor := exporter("arch", "arm64")
	sensor.Spec.Template.Devices = []string{"/dev/i2c-1"}
	withDevices := func(names ...string) func(*api.Node) {
		return func(n *api.Node) { n.Status.Devices = names }
	}
	tests := []struct {
		name        string
		ds          *api.Daemon
		nodes       []*api.Node
		pods        []*api.Pod
		want        []string
		wantDesired int
	}{
		{
			name:        "one pod per ready matching node",
			ds:          ds,
			nodes:       []*api.Node{readyNode("a"), readyNode("b"), readyNode("x86", func(n *api.Node) { n.Status.Arch = "amd64" }), readyNode("down", withPhase(api.NodeNotReady)), readyNode("cordoned", func(n *api.Node) { n.Spec.Unschedulable = true })},
			want:        []string{"create pods/exp-a-*", "create pods/exp-b-*", "updateStatus daemons/exp"},
			wantDesired: 2,
		},
		{
			name:        "devices: one pod per ready matching node that has them",
			ds:          sensor,
			nodes:       []*api.Node{readyNode("a", withDevices("gpiochip0", "i2c-1")), readyNode("b", withDevices("gpiochip0")), readyNode("c")},
			want:        []string{"create pods/exp-a-*", "updateStatus daemons/exp"},
			wantDesired: 1,
		},
		{
			name:  "devices: a board that no longer has them loses its pod",
			ds:    sensor,
			nodes: []*api.Node{readyNode("a", withDevices("i2c-1")), readyNode("b")},
			pods:  []*api.Pod{daemonPod(sensor, "a", api.PodRunning), daemonPod(sensor, "b", api.PodRunning)},
			want:  []string{"delete pods/exp-b", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "node no longer matches",
			ds:    ds,
			nodes: []*api.Node{readyNode("a"), readyNode("b", func(n *api.Node) { n.Status.Arch = "amd64" })},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning), daemonPod(ds, "b", api.PodRunning)},
			want:  []string{"delete pods/exp-b", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "node gone or left",
			ds:    ds,
			nodes: []*api.Node{readyNode("a"), readyNode("left", withPhase(api.NodeLeft))},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning), daemonPod(ds, "left", api.PodRunning), daemonPod(ds, "deleted", api.PodRunning)},
			want:  []string{"delete pods/exp-deleted", "delete pods/exp-left", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "lost pod on a down node deleted, not replaced",
			ds:    ds,
			nodes: []*api.Node{readyNode("a"), readyNode("down", withPhase(api.NodeNotReady))},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning), daemonPod(ds, "down", api.PodLost)},
			want:  []string{"delete pods/exp-down", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "lost pod on a node ready again replaced under a new name",
			ds:    ds,
			nodes: []*api.Node{readyNode("a"), readyNode("back")},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning), daemonPod(ds, "back", api.PodLost)},
			want:  []string{"delete pods/exp-back", "create pods/exp-back-*", "updateStatus daemons/exp"}, wantDesired: 2,
		},
		{
			name:  "cordoned node keeps its pod",
			ds:    ds,
			nodes: []*api.Node{readyNode("a", func(n *api.Node) { n.Spec.Unschedulable = true })},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning)},
			want:  []string{"updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "second pod on a node deleted, the older kept",
			ds:    ds,
			nodes: []*api.Node{readyNode("a")},
			pods: []*api.Pod{daemonPod(ds, "a", api.PodRunning),
				ownedPod("exp-0", api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}, ds.Spec.Template, "a", api.PodRunning)},
			want: []string{"delete pods/exp-0", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "second pod on a node deleted, the available one kept",
			ds:    ds,
			nodes: []*api.Node{readyNode("a")},
			pods: []*api.Pod{daemonPod(ds, "a", api.PodStarting),
				ownedPod("exp-0", api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}, ds.Spec.Template, "a", api.PodRunning)},
			want: []string{"delete pods/exp-a", "updateStatus daemons/exp"}, wantDesired: 1,
		},
		{
			name:  "a node's pod is found by node, whatever its name",
			ds:    ds,
			nodes: []*api.Node{readyNode("a"), readyNode("b")},
			pods: []*api.Pod{ownedPod("anything", api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}, ds.Spec.Template, "a", api.PodRunning),
				daemonPod(ds, "b", api.PodRunning)},
			want: []string{"updateStatus daemons/exp"}, wantDesired: 2,
		},
		{
			name:  "other owners ignored",
			ds:    ds,
			nodes: []*api.Node{readyNode("a")},
			pods:  []*api.Pod{daemonPod(ds, "a", api.PodRunning), deployPod(deployment("web", 1), "web-1", "a", api.PodRunning)},
			want:  []string{"updateStatus daemons/exp"}, wantDesired: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.add(tt.ds)
			for _, n := range tt.nodes {
				w.add(n)
			}
			for _, p := range tt.pods {
				w.add(p)
			}
			before := w.daemons["exp"].Status.PodsCreated
			acts := ReconcileDaemon(t0, w.daemons["exp"], w.podList(), w.nodeList())
			if diff := cmp.Diff(tt.want, maskedSummary(t, acts)); diff != "" {
				t.Fatalf("actions (-want +got):\n%s%s", diff, fmtActions(acts))
			}
			creates := 0
			for _, a := range acts {
				if a.Txn != KeyOf(api.KindDaemon, "exp") {
					t.Errorf("%v: Txn %q, want the daemon's key", a, a.Txn)
				}
				if p, ok := a.Object.(*api.Pod); ok && a.Type == ActionCreate {
					if p.Spec.Node == "" || p.Status.Phase != api.PodPending || p.Metadata.Name != daemonPodName("exp", w.daemons["exp"].Metadata.Created, p.Spec.Node, before+int64(creates)) ||
						p.Spec.Owner != (api.OwnerRef{Kind: api.KindDaemon, Name: "exp"}) {
						t.Errorf("bad daemon pod %+v", p)
					}
					creates++
				}
			}
			w.apply(acts)
			if got := w.daemons["exp"].Status.Desired; got != tt.wantDesired {
				t.Errorf("desired = %d, want %d", got, tt.wantDesired)
			}
			if got := w.daemons["exp"].Status.PodsCreated; got != before+int64(creates) {
				t.Errorf("podsCreated = %d after %d creates, want %d", got, creates, before+int64(creates))
			}
			if again := ReconcileDaemon(t0.Add(time.Minute), w.daemons["exp"], w.podList(), w.nodeList()); len(again) != 0 {
				t.Errorf("second pass not empty:%s", fmtActions(again))
			}
		})
	}
}

func TestDaemonPodName(t *testing.T) {
	if got := daemonPodName("exp", t0, "pi-1", 0); !strings.HasPrefix(got, "exp-pi-1-") || len(got) != len("exp-pi-1-")+suffixLen || !podNameRE.MatchString(got) {
		t.Errorf("short name = %q, want exp-pi-1-<%d chars>", got, suffixLen)
	}
	if daemonPodName("exp", t0, "pi-1", 0) == daemonPodName("exp", t0, "pi-1", 1) {
		t.Error("pods 0 and 1 on one node share a name")
	}
	if daemonPodName("exp", t0, "pi-1", 0) == daemonPodName("exp", t0.Add(time.Nanosecond), "pi-1", 0) {
		t.Error("a daemon created again reuses its predecessor's first name")
	}
	long1 := daemonPodName(strings.Repeat("d", 40), t0, strings.Repeat("n", 30)+"1", 7)
	long2 := daemonPodName(strings.Repeat("d", 40), t0, strings.Repeat("n", 30)+"2", 7)
	if len(long1) > maxNameLen || !podNameRE.MatchString(long1) || long1 == long2 {
		t.Errorf("long names %q, %q: want distinct DNS labels of at most 63", long1, long2)
	}
	if longest := daemonPodName(strings.Repeat("d", 63), t0, strings.Repeat("n", 63), 0); len(longest) != maxNameLen || !podNameRE.MatchString(longest) {
		t.Errorf("longest name %q (%d): want a 63-character DNS label", longest, len(longest))
	}
}

// TestDaemonRollingUpdate replaces pods board by board: never more than
// max_unavailable (default 1) boards without an available pod, as many as
// that at some moment, and every pod ends on the new revision.
func TestDaemonRollingUpdate(t *testing.T) {
	for _, m := range []*int{nil, intp(2), intp(3)} {
		want := 1
		if m != nil {
			want = *m
		}
		t.Run(fmt.Sprintf("max_unavailable %d", want), func(t *testing.T) { testDaemonRollingUpdate(t, m, want) })
	}
}

func testDaemonRollingUpdate(t *testing.T, maxUnavailable *int, want int) {
	w := newWorld(t)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		w.add(readyNode(n))
	}
	w.add(exporter())
	converge := func() {
		for range 10 {
			w.apply(ReconcileDaemon(w.now, w.daemons["exp"], w.podList(), w.nodeList()))
			w.apply(SchedulePending(w.now, w.snapshot(), w.podList()))
			w.runPods(-1)
		}
	}
	converge()
	if st := w.daemons["exp"].Status; st.Ready != 5 || st.Desired != 5 {
		t.Fatalf("initial rollout: %+v", st)
	}
	nd := *w.daemons["exp"]
	nd.Spec.Template = nd.Spec.Template.DeepCopy()
	nd.Spec.Template.Exec = append(nd.Spec.Template.Exec, "--v2")
	nd.Spec.Strategy.MaxUnavailable = maxUnavailable
	w.apply([]Action{newAction(ActionUpdate, &nd, "user")})
	rev := api.TemplateHash(nd.Spec.Template)

	most := 0
	w.afterEach = func(a Action) {
		unavailable := 5
		for _, p := range w.podList() {
			if available(p, nil) {
				unavailable--
			}
		}
		most = max(most, unavailable)
		if unavailable > want {
			t.Fatalf("after %v: %d pods unavailable, max_unavailable %d", a, unavailable, want)
		}
	}
	for step := 0; ; step++ {
		if step > 30 {
			t.Fatalf("rollout did not finish: %+v", w.daemons["exp"].Status)
		}
		acts := ReconcileDaemon(w.now, w.daemons["exp"], w.podList(), w.nodeList())
		w.apply(acts)
		if again := ReconcileDaemon(w.now, w.daemons["exp"], w.podList(), w.nodeList()); len(again) != 0 {
			t.Fatalf("second pass not empty:%s", fmtActions(again))
		}
		w.apply(SchedulePending(w.now, w.snapshot(), w.podList()))
		if len(acts) == 0 && w.runPods(-1) == 0 {
			break
		}
	}
	if most != want {
		t.Errorf("at most %d boards unavailable at once, want %d (max_unavailable)", most, want)
	}
	for _, p := range w.podList() {
		if p.Spec.Revision != rev || p.Status.Phase != api.PodRunning {
			t.Errorf("pod %s: revision %s phase %s", p.Metadata.Name, p.Spec.Revision, p.Status.Phase)
		}
	}
}
