package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func TestObservePod(t *testing.T) {
	yes, no := true, false
	web := deployment("web", 1)
	later := t0.Add(time.Minute)
	obs := func(active, sub string, exit, restarts int, ready *bool) UnitObservation {
		return UnitObservation{Unit: api.UnitName("p"), Found: true, ActiveState: active, SubState: sub, ExecMainStatus: exit, NRestarts: restarts, Ready: ready}
	}
	cut := func(o UnitObservation) UnitObservation { o.StoppedOnDisconnect = true; return o }
	tests := []struct {
		name      string
		phase     api.PodPhase
		policy    api.RestartPolicy
		obs       UnitObservation
		wantPhase api.PodPhase // "" = no action expected
		wantReady bool
		wantRest  int
	}{
		{name: "active no probe", phase: api.PodScheduled, obs: obs("active", "running", 0, 0, nil), wantPhase: api.PodRunning, wantReady: true},
		{name: "active probe passing", phase: api.PodStarting, obs: obs("active", "running", 0, 0, &yes), wantPhase: api.PodRunning, wantReady: true},
		{name: "active probe failing", phase: api.PodScheduled, obs: obs("active", "running", 0, 0, &no), wantPhase: api.PodRunning},
		{name: "running ready unchanged", phase: api.PodRunning, obs: obs("active", "running", 0, 0, nil)},
		{name: "running becomes unready", phase: api.PodRunning, obs: obs("active", "running", 0, 0, &no), wantPhase: api.PodRunning},
		{name: "activating", phase: api.PodScheduled, obs: obs("activating", "start", 0, 0, nil), wantPhase: api.PodStarting},
		{name: "crash loop counts restarts", phase: api.PodRunning, obs: obs("activating", "auto-restart", 1, 3, nil), wantPhase: api.PodStarting, wantRest: 3},
		{name: "failed gives up", phase: api.PodRunning, obs: obs("failed", "failed", 2, 5, nil), wantPhase: api.PodFailed, wantRest: 5},
		{name: "failed with never", phase: api.PodRunning, policy: api.RestartNever, obs: obs("failed", "failed", 1, 0, nil), wantPhase: api.PodFailed},
		{name: "exit 0 with never succeeds", phase: api.PodRunning, policy: api.RestartNever, obs: obs("inactive", "dead", 0, 0, nil), wantPhase: api.PodSucceeded},
		{name: "exit 0 with on-failure succeeds", phase: api.PodRunning, policy: api.RestartOnFailure, obs: obs("inactive", "dead", 0, 0, nil), wantPhase: api.PodSucceeded},
		{name: "inactive with always is stopped", phase: api.PodRunning, obs: obs("inactive", "dead", 0, 0, nil), wantPhase: api.PodScheduled},
		{name: "inactive non-zero fails", phase: api.PodRunning, policy: api.RestartNever, obs: obs("inactive", "dead", 3, 0, nil), wantPhase: api.PodFailed},
		// on_disconnect: the board stopped it; never Failed or Succeeded.
		{name: "stopped on disconnect, SIGTERM", phase: api.PodRunning, obs: cut(obs("inactive", "dead", 15, 0, nil)), wantPhase: api.PodScheduled},
		{name: "stopped on disconnect, never, exit 0", phase: api.PodRunning, policy: api.RestartNever, obs: cut(obs("inactive", "dead", 0, 0, nil)), wantPhase: api.PodScheduled},
		{name: "stopped on disconnect, on-failure, SIGTERM", phase: api.PodRunning, policy: api.RestartOnFailure, obs: cut(obs("inactive", "dead", 15, 0, nil)), wantPhase: api.PodScheduled},
		{name: "stopped on disconnect, failed with 143", phase: api.PodRunning, obs: cut(obs("failed", "failed", 143, 2, nil)), wantPhase: api.PodScheduled, wantRest: 2},
		{name: "stopped on disconnect, already Scheduled", phase: api.PodScheduled, obs: cut(obs("inactive", "dead", 15, 0, nil)), wantPhase: api.PodScheduled},
		{name: "stopped on disconnect, Lost stays Lost", phase: api.PodLost, obs: cut(obs("inactive", "dead", 15, 0, nil))},
		{name: "unit gone", phase: api.PodRunning, obs: UnitObservation{Unit: api.UnitName("p")}, wantPhase: api.PodScheduled},
		{name: "not yet written", phase: api.PodScheduled, obs: UnitObservation{Unit: api.UnitName("p")}},
		{name: "pending ignored", phase: api.PodPending, obs: obs("active", "running", 0, 0, nil)},
		{name: "lost not resurrected", phase: api.PodLost, obs: obs("active", "running", 0, 0, nil)},
		{name: "failed stays failed", phase: api.PodFailed, obs: obs("active", "running", 0, 0, nil)},
		{name: "unknown state ignored", phase: api.PodScheduled, obs: obs("maintenance", "", 0, 0, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := deployPod(web, "p", "a", tt.phase)
			p.Spec.Template.RestartPolicy = tt.policy
			w.add(p)
			acts := ObservePod(later, w.pods["p"], tt.obs)
			if tt.wantPhase == "" {
				if len(acts) != 0 {
					t.Fatalf("want no action, got%s", fmtActions(acts))
				}
				return
			}
			if len(acts) != 1 || acts[0].Type != ActionUpdateStatus {
				t.Fatalf("want one status update, got%s", fmtActions(acts))
			}
			w.apply(acts)
			got := w.pods["p"].Status
			if got.Phase != tt.wantPhase || got.Ready != tt.wantReady || got.Restarts != tt.wantRest {
				t.Errorf("status = %s ready=%v restarts=%d (%q); want %s ready=%v restarts=%d", got.Phase, got.Ready, got.Restarts, got.Message, tt.wantPhase, tt.wantReady, tt.wantRest)
			}
			if got.Phase == api.PodRunning && tt.phase != api.PodRunning && !got.StartedAt.Equal(later) {
				t.Errorf("StartedAt = %v, want %v", got.StartedAt, later)
			}
			if again := ObservePod(later.Add(time.Hour), w.pods["p"], tt.obs); len(again) != 0 {
				t.Errorf("same observation again:%s", fmtActions(again))
			}
		})
	}
}

func TestObservePodArtifactCondition(t *testing.T) {
	web := deployment("web", 1)
	later := t0.Add(time.Minute)
	failing := func(active, sub string) UnitObservation {
		return UnitObservation{Unit: api.UnitName("p"), Found: true, ActiveState: active, SubState: sub,
			ArtifactReason: "ArtifactMismatch", ArtifactMessage: "http://f/x: sha256 of the 3 bytes downloaded is abc, want def"}
	}
	cond := &api.Condition{Type: ConditionArtifactsFetched, Status: api.ConditionFalse, Reason: "ArtifactMismatch",
		Message: "http://f/x: sha256 of the 3 bytes downloaded is abc, want def", LastTransitionTime: later}
	tests := []struct {
		name     string
		phase    api.PodPhase
		policy   api.RestartPolicy
		had      bool // the pod has the condition already
		obs      UnitObservation
		want     *api.Condition
		wantMsg  string
		wantPhas api.PodPhase
	}{
		{name: "fetch step running", phase: api.PodScheduled, obs: failing("activating", "start-pre"),
			want: cond, wantMsg: "artifact: " + cond.Message, wantPhas: api.PodStarting},
		{name: "restarting", phase: api.PodStarting, obs: failing("activating", "auto-restart"),
			want: cond, wantMsg: "artifact: " + cond.Message, wantPhas: api.PodStarting},
		{name: "failed with never", phase: api.PodScheduled, policy: api.RestartNever, obs: failing("failed", "failed"),
			want: cond, wantMsg: "artifact: " + cond.Message, wantPhas: api.PodFailed},
		{name: "active clears it", phase: api.PodStarting, had: true, obs: failing("active", "running"),
			wantPhas: api.PodRunning},
		{name: "failure gone clears it", phase: api.PodStarting, had: true,
			obs: UnitObservation{Unit: api.UnitName("p"), Found: true, ActiveState: "activating", SubState: "start"}, wantPhas: api.PodStarting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := deployPod(web, "p", "a", tt.phase)
			p.Spec.Template.RestartPolicy = tt.policy
			if tt.had {
				p.Status.Conditions = []api.Condition{*cond}
			}
			w.add(p)
			acts := ObservePod(later, w.pods["p"], tt.obs)
			if len(acts) != 1 {
				t.Fatalf("want one status update, got%s", fmtActions(acts))
			}
			w.apply(acts)
			got := w.pods["p"].Status
			if diff := cmp.Diff(tt.want, api.FindCondition(got.Conditions, ConditionArtifactsFetched)); diff != "" {
				t.Errorf("ArtifactsFetched (-want +got):\n%s", diff)
			}
			if got.Phase != tt.wantPhas || tt.wantMsg != "" && got.Message != tt.wantMsg {
				t.Errorf("status %s %q, want %s %q", got.Phase, got.Message, tt.wantPhas, tt.wantMsg)
			}
			if again := ObservePod(later.Add(time.Hour), w.pods["p"], tt.obs); len(again) != 0 {
				t.Errorf("same observation again:%s", fmtActions(again))
			}
		})
	}
}
