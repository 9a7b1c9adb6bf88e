package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// webRollout is deployment web at generation 2 (3 replicas) whose status
// still shows generation 1.
func webRollout() *api.Deployment {
	return &api.Deployment{Kind: api.KindDeployment,
		Metadata: api.ObjectMeta{Name: "web", Generation: 2},
		Spec:     api.DeploymentSpec{Replicas: intp(3), Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
		Status:   api.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 0, AvailableReplicas: 3},
	}
}

// putWebRollout stores webRollout as the store makes it: created at
// generation 1, then its template changed (generation 2).
func putWebRollout(h *harness) {
	h.t.Helper()
	d := webRollout()
	d.Spec.Template.Exec = []string{"/bin/web", "--old"}
	h.put(d)
	h.put(webRollout())
	if g := h.getTyped(api.KindDeployment, "web").GetMeta().Generation; g != 2 {
		h.t.Fatalf("generation %d, want 2", g)
	}
}

// setStatus returns d with the status counts replicas, updated, available
// observed at d's generation.
func setStatus(d *api.Deployment, replicas, updated, available int, conds ...api.Condition) *api.Deployment {
	d.Status = api.DeploymentStatus{ObservedGeneration: d.Metadata.Generation, Replicas: replicas,
		UpdatedReplicas: updated, ReadyReplicas: available, AvailableReplicas: available, Conditions: conds}
	return d
}

func TestRolloutStatusCommand(t *testing.T) {
	h := newHarness(t)
	putWebRollout(h)
	unsched := api.Condition{Type: api.ConditionReplicaFailure, Status: api.ConditionTrue, Reason: "Unschedulable",
		Message: "1 pods cannot be scheduled; web-x: no node has 64Mi free"}
	// A controller standing in: once herdctl watches, walk the rollout
	// through its stages; one stage only adds a condition, one repeats a
	// state (a labels-only change: an event, the same rollout state).
	relabelled := setStatus(webRollout(), 4, 1, 3, unsched)
	relabelled.Metadata.Labels = map[string]string{"team": "web"}
	h.setOnWatch(func(n int) {
		if n != 1 {
			return
		}
		for _, d := range []*api.Deployment{
			setStatus(webRollout(), 4, 1, 3),
			setStatus(webRollout(), 4, 1, 3, unsched),
			relabelled,
			setStatus(webRollout(), 5, 3, 2),
			setStatus(webRollout(), 3, 3, 2),
			setStatus(webRollout(), 3, 3, 3),
		} {
			h.put(d)
		}
	})
	out, errOut := h.mustRun(0, "rollout", "status", "deployment", "web")
	golden(t, "rollout_status.golden", out)
	if want := "warning: deployment/web: Unschedulable: 1 pods cannot be scheduled; web-x: no node has 64Mi free\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	// putWebRollout's two writes are resourceVersions 1 and 2.
	want := []string{"get deployments/web", "list deployments", "watch deployments from 2"}
	if diff := cmp.Diff(want, h.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestRolloutStatusDone(t *testing.T) {
	h := newHarness(t)
	putWebRollout(h)
	h.put(setStatus(webRollout(), 3, 3, 3))
	for _, args := range [][]string{{"rollout", "status", "deployment/web"}, {"rollout", "status", "deploy", "web"}} {
		out, _ := h.mustRun(0, args...)
		if out != "deployment \"web\" successfully rolled out\n" {
			t.Errorf("%v: %q", args, out)
		}
	}
	for _, c := range h.Calls() {
		if strings.HasPrefix(c, "watch") {
			t.Errorf("watched a finished rollout: %v", h.Calls())
		}
	}
}

func TestRolloutStatusDaemon(t *testing.T) {
	h := newHarness(t)
	ds := func(gen, obs int64, desired, current, ready int) *api.Daemon {
		return &api.Daemon{Kind: api.KindDaemon, Metadata: api.ObjectMeta{Name: "exporter", Generation: gen},
			Spec:   api.DaemonSpec{Template: api.PodTemplate{Exec: []string{"/bin/exporter"}}},
			Status: api.DaemonStatus{ObservedGeneration: obs, Desired: desired, Current: current, Ready: ready}}
	}
	// Created: generation 1, not observed yet.
	h.put(ds(1, 0, 3, 3, 3))
	h.setOnWatch(func(int) {
		h.put(ds(1, 1, 3, 2, 2))
		h.put(ds(1, 1, 3, 4, 3))
		h.put(ds(1, 1, 3, 3, 2))
		h.put(ds(1, 1, 3, 3, 3))
	})
	out, _ := h.mustRun(0, "rollout", "status", "ds", "exporter")
	want := `Waiting for daemon "exporter" spec update to be observed...
Waiting for daemon "exporter" rollout to finish: 2 out of 3 pods have been placed...
Waiting for daemon "exporter" rollout to finish: 1 old pods are pending termination...
Waiting for daemon "exporter" rollout to finish: 2 of 3 pods are ready...
daemon "exporter" successfully rolled out
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestRolloutStatusFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t)
		putWebRollout(h)
		h.put(setStatus(webRollout(), 3, 3, 1))
		out, errOut := h.mustRun(1, "rollout", "status", "deploy", "web", "--timeout", "1s")
		if out != "Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...\n" {
			t.Errorf("stdout %q", out)
		}
		if want := "error: timed out after 1s waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available\n"; errOut != want {
			t.Errorf("stderr %q, want %q", errOut, want)
		}
	})
	t.Run("not found", func(t *testing.T) {
		h := newHarness(t)
		_, errOut := h.mustRun(1, "rollout", "status", "daemon", "nope")
		if errOut != "error: not found: daemons/nope\n" {
			t.Errorf("stderr %q", errOut)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		h := newHarness(t)
		putWebRollout(h)
		h.setOnWatch(func(int) { h.remove(api.KindDeployment, "web") })
		_, errOut := h.mustRun(1, "rollout", "status", "deploy", "web")
		if !strings.Contains(errOut, "deployment/web was deleted while waiting") {
			t.Errorf("stderr %q", errOut)
		}
	})
	usage := []struct {
		args []string
		err  string
	}{
		{[]string{"rollout", "status", "pod", "web-1"}, "only deployments and daemons have rollouts, not pods"},
		{[]string{"rollout", "status", "deploy"}, "rollout status: missing NAME"},
		{[]string{"rollout", "status"}, "missing arguments"},
		{[]string{"rollout", "history", "pod", "web-1"}, "rollout history: only deployments and daemons have rollouts, not pods"},
		{[]string{"rollout", "undo", "deploy"}, "rollout undo: missing NAME"},
		{[]string{"rollout", "undo", "deploy", "web", "--to-revision", "0"}, "--to-revision must be at least 1"},
		{[]string{"rollout", "undo", "deploy", "web", "--dry-run", "--wait"}, "--wait and --dry-run exclude each other"},
		{[]string{"rollout", "history", "deploy", "web", "--revision", "-2"}, "--revision must be at least 1"},
		{[]string{"rollout", "frobnicate", "deploy", "web"}, `unknown command "frobnicate" for "herdctl rollout"`},
	}
	for _, u := range usage {
		t.Run(strings.Join(u.args, " "), func(t *testing.T) {
			h := newHarness(t)
			_, errOut := h.mustRun(2, u.args...)
			if !strings.Contains(errOut, u.err) {
				t.Errorf("stderr %q does not contain %q", errOut, u.err)
			}
		})
	}
}

func TestStatusLines(t *testing.T) {
	dep := func(gen, obs int64, want, total, upd, avail int) rolloutProgress {
		return rolloutProgress{kind: api.KindDeployment, name: "web", gen: gen, observed: obs, want: want, total: total, updated: upd, available: avail}
	}
	tests := []struct {
		name string
		p    rolloutProgress
		done bool
		line string
	}{
		{"not observed", dep(2, 1, 3, 3, 3, 3), false, `Waiting for deployment "web" spec update to be observed...`},
		{"updating", dep(2, 2, 3, 4, 1, 3), false, `Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...`},
		{"old pods left", dep(2, 2, 3, 4, 3, 3), false, `Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...`},
		{"not available", dep(2, 2, 3, 3, 3, 1), false, `Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available...`},
		{"done", dep(2, 2, 3, 3, 3, 3), true, `deployment "web" successfully rolled out`},
		{"scaled to zero", dep(4, 4, 0, 0, 0, 0), true, `deployment "web" successfully rolled out`},
		{"scaling to zero", dep(4, 4, 0, 2, 0, 2), false, `Waiting for deployment "web" rollout to finish: 2 old replicas are pending termination...`},
		{"observed ahead", dep(2, 3, 1, 1, 1, 1), true, `deployment "web" successfully rolled out`},
		{"daemon placing", rolloutProgress{kind: api.KindDaemon, name: "x", gen: 1, observed: 1, want: 2, total: 1, updated: 1, available: 1}, false,
			`Waiting for daemon "x" rollout to finish: 1 out of 2 pods have been placed...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.statusLine(); got != tt.line || tt.p.done() != tt.done {
				t.Errorf("statusLine() = %q, done %v; want %q, %v", got, tt.p.done(), tt.line, tt.done)
			}
		})
	}
}

func TestRolloutStatusHTTP(t *testing.T) {
	h := newHarness(t)
	url := startAgent(t, h)
	putWebRollout(h)
	h.setOnWatch(func(int) { h.put(setStatus(webRollout(), 3, 3, 3)) })
	out, _ := h.mustRun(0, "--addr", url, "rollout", "status", "deploy", "web")
	want := "Waiting for deployment \"web\" spec update to be observed...\ndeployment \"web\" successfully rolled out\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestRolloutAndLogsCompletion(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "rollout", ""}, []string{"history", "status", "undo"}},
		{[]string{"__complete", "rollout", "undo", "ds", ""}, []string{"node-exporter"}},
		{[]string{"__complete", "rollout", "history", ""}, []string{"deployments", "daemons"}},
		{[]string{"__complete", "rollout", "status", ""}, []string{"deployments", "daemons"}},
		{[]string{"__complete", "rollout", "status", "ds", ""}, []string{"node-exporter"}},
		{[]string{"__complete", "rollout", "status", "pods", ""}, nil},
		{[]string{"__complete", "logs", ""}, []string{"web-7x2kq", "web-b9d4m", "web-zz81p"}},
		{[]string{"__complete", "logs", "web-7x2kq", ""}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			out, _ := h.mustRun(0, tt.args...)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
					got = append(got, strings.SplitN(l, "\t", 2)[0])
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nraw:\n%s", diff, out)
			}
		})
	}
}
