package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// writerOn returns a clusterState writing to a one-server raftstore (its
// Apply needs no gossip).
func writerOn(t *testing.T) (*clusterState, *raftstore.Store) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a raft server")
	}
	rc := raftstore.NewTestCluster(t, 1)
	st := rc.Stores[rc.Leader()]
	s := &clusterState{store: st}
	s.gen.Store(1)
	return s, st
}

func storeCreate(t *testing.T, st *raftstore.Store, objs ...api.Object) {
	t.Helper()
	for _, o := range objs {
		raw, err := api.ToRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			t.Fatalf("create %s/%s: %v", o.GetKind(), o.GetMeta().Name, err)
		}
	}
}

// stored reads the store into a controller.Cluster.
func stored(t *testing.T, st *raftstore.Store) *controller.Cluster {
	t.Helper()
	raws, _, err := st.List("")
	if err != nil {
		t.Fatal(err)
	}
	c := &controller.Cluster{}
	for _, r := range raws {
		o, err := api.FromRaw(r)
		if err != nil {
			t.Fatal(err)
		}
		c.Add(o)
	}
	return c
}

func podNamesOf(ps []*api.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Metadata.Name)
	}
	return out
}

func createdBy(acts []controller.Action) []string {
	var out []string
	for _, a := range acts {
		if a.Type == controller.ActionCreate {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return out
}

func testDeployment(replicas int, tmpl api.PodTemplate) *api.Deployment {
	tmpl.Labels = map[string]string{"app": "web"}
	return &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.DeploymentSpec{Replicas: &replicas, Selector: map[string]string{"app": "web"}, Template: tmpl}}
}

// TestApplyCountsCreatesInTheSameTxn: a deployment's pass commits its pod
// creates and the status write advancing podsCreated in one raftstore
// transaction (same resourceVersion), or nothing at all when the
// deployment changed under it, and the retry asks for the same names.
func TestApplyCountsCreatesInTheSameTxn(t *testing.T) {
	s, st := writerOn(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	storeCreate(t, st, testDeployment(3, api.PodTemplate{Exec: []string{"/bin/sleep", "infinity"}}))
	c := stored(t, st)
	stale := controller.ReconcileDeployment(now, c.Deployments[0], c.Pods, c.Nodes)
	if len(createdBy(stale)) != 3 {
		t.Fatalf("first pass: %v", stale)
	}

	// A user's write moves the deployment before the pass is applied.
	raw, err := st.Get(api.KindDeployment, "web")
	if err != nil {
		t.Fatal(err)
	}
	raw.Metadata.Labels = map[string]string{"team": "a"}
	if _, err := st.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}); err != nil {
		t.Fatal(err)
	}
	err = s.Apply(ctx, stale)
	if !errors.Is(err, raftstore.ErrConflict) || errors.Is(err, controller.ErrTerminal) {
		t.Fatalf("stale pass: %v, want a conflict to retry", err)
	}
	c = stored(t, st)
	if len(c.Pods) != 0 || c.Deployments[0].Status.PodsCreated != 0 {
		t.Fatalf("the failed pass left pods %v, podsCreated %d", podNamesOf(c.Pods), c.Deployments[0].Status.PodsCreated)
	}

	retry := controller.ReconcileDeployment(now, c.Deployments[0], c.Pods, c.Nodes)
	if got, want := createdBy(retry), createdBy(stale); !slices.Equal(got, want) {
		t.Fatalf("the retry creates %v, the failed pass %v", got, want)
	}
	if err := s.Apply(ctx, retry); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	d := c.Deployments[0]
	if d.Status.PodsCreated != 3 || !slices.Equal(podNamesOf(c.Pods), createdBy(stale)) {
		t.Fatalf("after the retry: pods %v, podsCreated %d", podNamesOf(c.Pods), d.Status.PodsCreated)
	}
	for _, p := range c.Pods {
		if p.Metadata.ResourceVersion != d.Metadata.ResourceVersion {
			t.Errorf("pod %s written at %d, the counter at %d: not one transaction", p.Metadata.Name, p.Metadata.ResourceVersion, d.Metadata.ResourceVersion)
		}
	}

	// A lost pod: its delete, the replacement and the counter commit
	// together, and the replacement's name is new.
	lost := c.Pods[0]
	lostRaw, _ := api.ToRaw(lost)
	lostRaw.Status = []byte(`{"phase":"Lost"}`)
	if _, err := st.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: lostRaw}}); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	acts := controller.ReconcileDeployment(now, c.Deployments[0], c.Pods, c.Nodes)
	if err := s.Apply(ctx, acts); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	d = c.Deployments[0]
	names := podNamesOf(c.Pods)
	if len(names) != 3 || slices.Contains(names, lost.Metadata.Name) || d.Status.PodsCreated != 4 {
		t.Fatalf("after replacing %s: pods %v, podsCreated %d", lost.Metadata.Name, names, d.Status.PodsCreated)
	}
	for _, p := range c.Pods {
		if !slices.Contains(createdBy(stale), p.Metadata.Name) && p.Metadata.ResourceVersion != d.Metadata.ResourceVersion {
			t.Errorf("replacement %s written at %d, the counter at %d", p.Metadata.Name, p.Metadata.ResourceVersion, d.Metadata.ResourceVersion)
		}
	}
}

// TestApplyDaemonPassIsOneTxn: a daemon's pods on every node and its
// counter land together, and a replacement on the same node is a new name.
func TestApplyDaemonPassIsOneTxn(t *testing.T) {
	s, st := writerOn(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, n := range []string{"b1", "b2"} {
		storeCreate(t, st, &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: n}, Status: api.NodeStatus{Phase: api.NodeReady}})
	}
	storeCreate(t, st, &api.Daemon{Kind: api.KindDaemon, Metadata: api.ObjectMeta{Name: "exp"},
		Spec: api.DaemonSpec{Template: api.PodTemplate{Exec: []string{"/bin/sleep", "infinity"}}}})
	c := stored(t, st)
	if err := s.Apply(ctx, controller.ReconcileDaemon(now, c.Daemons[0], c.Pods, c.Nodes)); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	ds := c.Daemons[0]
	if len(c.Pods) != 2 || ds.Status.PodsCreated != 2 {
		t.Fatalf("pods %v, podsCreated %d", podNamesOf(c.Pods), ds.Status.PodsCreated)
	}
	for _, p := range c.Pods {
		if p.Metadata.ResourceVersion != ds.Metadata.ResourceVersion || !strings.HasPrefix(p.Metadata.Name, "exp-"+p.Spec.Node+"-") {
			t.Errorf("pod %s on %s written at %d, the counter at %d", p.Metadata.Name, p.Spec.Node, p.Metadata.ResourceVersion, ds.Metadata.ResourceVersion)
		}
	}
	failed, _ := api.ToRaw(c.Pods[0])
	failed.Status = []byte(`{"phase":"Failed"}`)
	if _, err := st.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: failed}}); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	if err := s.Apply(ctx, controller.ReconcileDaemon(now, c.Daemons[0], c.Pods, c.Nodes)); err != nil {
		t.Fatal(err)
	}
	c = stored(t, st)
	if len(c.Pods) != 2 || slices.Contains(podNamesOf(c.Pods), failed.Metadata.Name) || c.Daemons[0].Status.PodsCreated != 3 {
		t.Fatalf("after replacing %s: pods %v, podsCreated %d", failed.Metadata.Name, podNamesOf(c.Pods), c.Daemons[0].Status.PodsCreated)
	}
}

// TestApplyBigPassesFit: pods whose template is most of the budget are
// created a few per pass, and a pass deleting all of them at once fits
// too: deletes go out as names and resourceVersions only.
func TestApplyBigPassesFit(t *testing.T) {
	s, st := writerOn(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	big := api.PodTemplate{Exec: []string{"/bin/sleep", "infinity"},
		Files: []api.File{{Path: "/srv/blob", Content: strings.Repeat("x", api.MaxTemplateBytes-4096)}}}
	storeCreate(t, st, testDeployment(4, big))
	for pass := 0; ; pass++ {
		c := stored(t, st)
		if len(c.Pods) == 4 {
			break
		}
		if pass > 4 {
			t.Fatalf("%d pods after %d passes", len(c.Pods), pass)
		}
		if err := s.Apply(ctx, controller.ReconcileDeployment(now, c.Deployments[0], c.Pods, c.Nodes)); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	raw, err := st.Get(api.KindDeployment, "web")
	if err != nil {
		t.Fatal(err)
	}
	raw.Spec = []byte(strings.Replace(string(raw.Spec), `"replicas":4`, `"replicas":0`, 1))
	if _, err := st.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}); err != nil {
		t.Fatal(err)
	}
	c := stored(t, st)
	if r := c.Deployments[0].Spec.Replicas; r == nil || *r != 0 {
		t.Fatalf("replicas = %v after scaling to 0", r)
	}
	acts := controller.ReconcileDeployment(now, c.Deployments[0], c.Pods, c.Nodes)
	if err := s.Apply(ctx, acts); err != nil {
		t.Fatalf("deleting 4 pods of %d KiB each in one transaction: %v", api.MaxTemplateBytes>>10, err)
	}
	if c := stored(t, st); len(c.Pods) != 0 {
		t.Errorf("%d pods left", len(c.Pods))
	}
}

// TestSnapshotDecodesOnlyChangedObjects: a snapshot after one write shows
// the written object anew and shares the unchanged ones with the last.
func TestSnapshotDecodesOnlyChangedObjects(t *testing.T) {
	s, st := writerOn(t)
	tmpl := api.PodTemplate{Exec: []string{"/bin/true"}}
	storeCreate(t, st,
		&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "a"}, Spec: api.PodSpec{Template: tmpl}},
		&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "b"}, Spec: api.PodSpec{Template: tmpl}})
	s.mu.Lock()
	defer s.mu.Unlock()
	first, err := s.snapshotObjects()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.Get(api.KindPod, "b")
	if err != nil {
		t.Fatal(err)
	}
	raw.Metadata.Labels = map[string]string{"x": "1"}
	if _, err := st.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}); err != nil {
		t.Fatal(err)
	}
	second, err := s.snapshotObjects()
	if err != nil {
		t.Fatal(err)
	}
	byName := func(c *controller.Cluster) map[string]*api.Pod {
		m := map[string]*api.Pod{}
		for _, p := range c.Pods {
			m[p.Metadata.Name] = p
		}
		return m
	}
	p1, p2 := byName(first), byName(second)
	if p2["b"].Metadata.Labels["x"] != "1" || p1["b"].Metadata.Labels["x"] != "" {
		t.Errorf("pod b: labels %v then %v, want the write only in the second snapshot", p1["b"].Metadata.Labels, p2["b"].Metadata.Labels)
	}
	if p1["a"] != p2["a"] {
		t.Errorf("unchanged pod a was decoded again")
	}
	if len(second.Pods) != 2 {
		t.Errorf("%d pods in the second snapshot, want 2", len(second.Pods))
	}
}

// A witness recorded before the controllers watch (a new leader's placer
// can witness a dead board while the controllers make their first pass)
// wakes its node as soon as the watch begins, not a tick later.
func TestWatchReplaysEarlierWitnesses(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	a := f.agents[0].a
	s := newClusterState(a.store, a.gossip, newNotifier())
	// b9 is no gossip member: the periodic tick never wakes it.
	s.recordWitness("b9", controller.Witness{At: time.Now(), Err: "no answer"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for c := range ch {
		if c.Kind == api.KindNode && c.Name == "b9" {
			return
		}
	}
	t.Fatal("the watch ended without waking b9")
}
