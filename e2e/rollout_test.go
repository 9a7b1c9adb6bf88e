//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// webDeployment reads deployment web through via.
func webDeployment(ctx context.Context, t *testing.T, via string) api.Deployment {
	t.Helper()
	ds, err := list[api.Deployment](ctx, fleet, via, api.KindDeployment)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Metadata.Name == "web" {
			return d
		}
	}
	t.Fatal("deployment web not found")
	return api.Deployment{}
}

// liveRevisions is the spec.revision of every live web pod, counted.
func liveRevisions(s Snapshot) map[string]int {
	revs := map[string]int{}
	for _, p := range Web.Live(s) {
		revs[p.Spec.Revision]++
	}
	return revs
}

// testRolloutUndo rolls web forward to a changed page, then back with
// herdctl rollout undo: every pod ends on the first revision again, and
// the history numbers it anew.
func testRolloutUndo(t *testing.T) {
	restoreLab(t)
	converge(t)
	ctx := testCtx(t, 4*time.Minute)
	via := viaExcept()
	before := webDeployment(ctx, t, via)
	r1 := api.TemplateHash(before.Spec.Template)
	if h := before.Status.History; len(h) == 0 || h[0].Hash != r1 {
		t.Fatalf("history before the change: %+v, want %s first", h, r1)
	}
	n1 := before.Status.History[0].Revision

	manifest, err := os.ReadFile(webManifest())
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(manifest), "hello from a herd board", "hello from revision two", 1)
	if changed == string(manifest) {
		t.Fatal("examples/web.toml no longer says hello from a herd board")
	}
	if out, err := fleet.Herdctl(ctx, via, changed, "apply", "-f", "-", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("apply the changed page: %v\n%s", err, out)
	}
	s, _, err := fleet.WaitConverged(ctx, via, Web)
	if err != nil {
		t.Fatal(err)
	}
	r2 := api.TemplateHash(webDeployment(ctx, t, via).Spec.Template)
	if got := liveRevisions(s); r2 == r1 || got[r2] != Web.Replicas {
		t.Fatalf("after the change: pods by revision %v, want %d of %s (not %s)", got, Web.Replicas, r2, r1)
	}

	t0 := time.Now()
	out, err := fleet.Herdctl(ctx, "", "", "rollout", "undo", "deployment", "web", "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("rollout undo: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("deployment/web rolled back to revision %d (template %s)", n1, r1); !strings.Contains(string(out), want) {
		t.Errorf("rollout undo said:\n%s\nwant %q", out, want)
	}
	s, _, err = fleet.WaitConverged(ctx, via, Web)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("undo converged in %.1fs: %s", time.Since(t0).Seconds(), podsByBoard(s))
	if got := liveRevisions(s); got[r1] != Web.Replicas {
		t.Errorf("after undo: pods by revision %v, want %d of %s", got, Web.Replicas, r1)
	}
	after := webDeployment(ctx, t, via)
	if h := after.Status.History; len(h) < 2 || h[0].Hash != r1 || h[0].Revision <= n1+1 || h[1].Hash != r2 {
		t.Errorf("history after undo: %+v; want %s first with a new number, then %s", h, r1, r2)
	}
	hist, err := fleet.Herdctl(ctx, via, "", "rollout", "history", "deployment", "web")
	if err != nil || !strings.Contains(string(hist), r1) || !strings.Contains(string(hist), r2) {
		t.Errorf("rollout history: %v\n%s", err, hist)
	}
	t.Logf("rollout history:\n%s", hist)
}
