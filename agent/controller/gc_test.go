package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/scheduler"
	"github.com/herd-dev/herd/api"
)

func TestOwnerDeletedPodsCollected(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := newWorld(t)
	d := deployment("web", 2)
	w.add(readyNode("b1"), readyNode("b2"),
		deployPod(d, "web-aaaaa", "b1", api.PodRunning),
		deployPod(d, "web-bbbbb", "b2", api.PodRunning))
	// The deployment itself is gone (never added): its pods are orphans.
	ix := NewIndex(w.cluster())
	if got := ix.Keys(); !contains(got, KeyOf(api.KindDeployment, "web")) {
		t.Fatalf("keys %v lack the deleted owner's key", got)
	}
	acts := ix.Reconcile(now, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web"))
	want := []string{"delete pods/web-aaaaa", "delete pods/web-bbbbb"}
	if diff := cmp.Diff(want, summary(acts)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	w.apply(acts)
	if n := len(w.podList()); n != 0 {
		t.Errorf("%d pods left", n)
	}
	ix = NewIndex(w.cluster())
	if got := ix.Keys(); contains(got, KeyOf(api.KindDeployment, "web")) {
		t.Errorf("keys %v still name the collected owner", got)
	}
	if acts := ix.Reconcile(now, scheduler.DefaultConfig(), KeyOf(api.KindDeployment, "web")); len(acts) != 0 {
		t.Errorf("second pass not empty:\n%s", fmtActions(acts))
	}
}

func contains(keys []Key, k Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
