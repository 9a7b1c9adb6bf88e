package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// observeHistory plays the controller's part in the history: it records
// kind/name's stored template with api.RecordRevision at time at, and marks
// its generation observed.
func observeHistory(h *harness, kind api.Kind, name string, at time.Time) {
	h.t.Helper()
	switch o := h.getTyped(kind, name).(type) {
	case *api.Deployment:
		o.Status.History = api.RecordRevision(o.Status.History, o.Spec.Template, api.TemplateHash(o.Spec.Template), o.Metadata.Generation, at)
		o.Status.ObservedGeneration = o.Metadata.Generation
		h.put(o)
	case *api.Daemon:
		o.Status.History = api.RecordRevision(o.Status.History, o.Spec.Template, api.TemplateHash(o.Spec.Template), o.Metadata.Generation, at)
		o.Status.ObservedGeneration = o.Metadata.Generation
		h.put(o)
	default:
		h.t.Fatalf("%s/%s: %T", kind, name, o)
	}
}

// webTOML is deployment web whose exec is /bin/web plus args.
func webTOML(args ...string) string {
	exec := `"/bin/web"`
	for _, a := range args {
		exec += fmt.Sprintf(", %q", a)
	}
	return fmt.Sprintf("[[deployment]]\nname = \"web\"\n[deployment.template]\nlabels = { app = \"web\" }\nexec = [%s]\n", exec)
}

// storedHash is the hash of kind/name's stored template.
func storedHash(h *harness, kind api.Kind, name string) string {
	h.t.Helper()
	switch o := h.getTyped(kind, name).(type) {
	case *api.Deployment:
		return api.TemplateHash(o.Spec.Template)
	case *api.Daemon:
		return api.TemplateHash(o.Spec.Template)
	}
	h.t.Fatalf("%s/%s not stored", kind, name)
	return ""
}

// twoRevisions applies web with exec /bin/web (observed 30 minutes
// before testNow) then /bin/web --v2 (10 minutes before) and returns the
// two templates' hashes.
func twoRevisions(h *harness) (h1, h2 string) {
	h.t.Helper()
	h.stdin = webTOML()
	h.mustRun(0, "apply", "-f", "-")
	observeHistory(h, api.KindDeployment, "web", testNow.Add(-30*time.Minute))
	h1 = storedHash(h, api.KindDeployment, "web")
	h.stdin = webTOML("--v2")
	h.mustRun(0, "apply", "-f", "-")
	observeHistory(h, api.KindDeployment, "web", testNow.Add(-10*time.Minute))
	return h1, storedHash(h, api.KindDeployment, "web")
}

func TestRolloutHistoryAndUndo(t *testing.T) {
	h := newHarness(t)
	if _, errOut := h.mustRun(1, "rollout", "history", "deployment", "web"); errOut != "error: not found: deployments/web\n" {
		t.Errorf("history of a missing deployment: %q", errOut)
	}
	h.stdin = webTOML()
	h.mustRun(0, "apply", "-f", "-")
	if out, _ := h.mustRun(0, "rollout", "history", "deploy", "web"); out != "deployment/web has no rollout history yet\n" {
		t.Errorf("history before the controller observed it: %q", out)
	}
	h = newHarness(t)
	h1, h2 := twoRevisions(h)

	out, _ := h.mustRun(0, "rollout", "history", "deploy", "web")
	want := fmt.Sprintf(`REVISION   HASH         GENERATION   APPLIED   CHANGE
1          %s   1            30m       (oldest kept)
2          %s   2            10m       + exec[1]: "--v2"
`, h1, h2)
	if out != want {
		t.Errorf("history:\n%s\nwant:\n%s", out, want)
	}

	out, _ = h.mustRun(0, "rollout", "history", "deploy/web", "--revision", "1")
	if !strings.HasPrefix(out, "# deployment/web revision 1: template "+h1+", generation 1, applied 2025-06-01T11:30:00Z\n[[deployment]]\n") ||
		!strings.Contains(out, "exec = [\"/bin/web\"]\n") {
		t.Errorf("history --revision 1:\n%s", out)
	}
	// What --revision prints is a manifest of that revision: it decodes.
	if _, err := api.DecodeManifest("rev1.toml", []byte(out)); err != nil {
		t.Errorf("history --revision 1 is not a manifest: %v\n%s", err, out)
	}

	// A dry run shows the diff and changes nothing.
	h.calls = nil
	out, _ = h.mustRun(0, "rollout", "undo", "deploy", "web", "--dry-run")
	if want := "deployment/web would roll back to revision 1 (template " + h1 + ") (dry run)\n  - spec.template.exec[1]: \"--v2\"\n"; out != want {
		t.Errorf("undo --dry-run:\n%q\nwant:\n%q", out, want)
	}
	if diff := cmp.Diff([]string{"get deployments/web"}, h.Calls()); diff != "" || storedHash(h, api.KindDeployment, "web") != h2 {
		t.Errorf("undo --dry-run wrote (-want +got calls):\n%s", diff)
	}

	// The undo: a new generation with revision 1's template.
	h.calls = nil
	out, _ = h.mustRun(0, "rollout", "undo", "deploy", "web")
	if want := "deployment/web rolled back to revision 1 (template " + h1 + "): generation 3\nfollow it with: herdctl rollout status deployment web\n"; out != want {
		t.Errorf("undo:\n%q\nwant:\n%q", out, want)
	}
	if diff := cmp.Diff([]string{"get deployments/web", "update deployments/web"}, h.Calls()); diff != "" {
		t.Errorf("undo calls (-want +got):\n%s", diff)
	}
	d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
	if got := api.TemplateHash(d.Spec.Template); got != h1 || d.Metadata.Generation != 3 {
		t.Errorf("after undo: template %s generation %d, want %s and 3", got, d.Metadata.Generation, h1)
	}
	// The controller records it: revision 1's entry moves to the front as 3.
	observeHistory(h, api.KindDeployment, "web", testNow)
	out, _ = h.mustRun(0, "rollout", "history", "deploy", "web")
	want = fmt.Sprintf(`REVISION   HASH         GENERATION   APPLIED   CHANGE
2          %s   2            10m       (oldest kept)
3          %s   3            0s        - exec[1]: "--v2"
`, h2, h1)
	if out != want {
		t.Errorf("history after undo:\n%s\nwant:\n%s", out, want)
	}
	// Undo again goes forward to revision 2's template (as kubectl's does).
	h.mustRun(0, "rollout", "undo", "deploy", "web")
	if got := storedHash(h, api.KindDeployment, "web"); got != h2 {
		t.Errorf("second undo: template %s, want %s", got, h2)
	}
	observeHistory(h, api.KindDeployment, "web", testNow)

	refusals := []struct {
		args []string
		err  string
	}{
		{[]string{"--to-revision", "4"}, "error: deployment/web: revision 4 (" + h2 + ") is the current template: nothing to undo\n"},
		{[]string{"--to-revision", "1"}, "error: deployment/web: revision 1 not found in the history (revisions 3, 4)\n"},
		{[]string{"--to-revision", "1", "--dry-run"}, "error: deployment/web: revision 1 not found in the history (revisions 3, 4)\n"},
	}
	for _, r := range refusals {
		h.calls = nil
		_, errOut := h.mustRun(1, append([]string{"rollout", "undo", "deploy", "web"}, r.args...)...)
		if errOut != r.err {
			t.Errorf("undo %v: stderr %q, want %q", r.args, errOut, r.err)
		}
		if diff := cmp.Diff([]string{"get deployments/web"}, h.Calls()); diff != "" {
			t.Errorf("undo %v wrote (-want +got calls):\n%s", r.args, diff)
		}
	}
	if _, errOut := h.mustRun(1, "rollout", "history", "deploy", "web", "--revision", "7"); !strings.Contains(errOut, "revision 7 not found in the history (revisions 3, 4)") {
		t.Errorf("history --revision 7: %q", errOut)
	}
	if _, errOut := h.mustRun(1, "rollout", "undo", "deploy", "nope"); errOut != "error: not found: deployments/nope\n" {
		t.Errorf("undo of a missing deployment: %q", errOut)
	}
}

// TestRolloutUndoConflict: another writer changes the deployment between
// undo's read and its write; the compare-and-swap fails, undo reads again
// and writes once more, with the same target.
func TestRolloutUndoConflict(t *testing.T) {
	h := newHarness(t)
	h1, _ := twoRevisions(h)
	h.setOnUpdate(func(n int) {
		if n == 1 {
			d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
			d.Metadata.Labels = map[string]string{"team": "web"}
			h.put(d)
		}
	})
	h.calls = nil
	out, _ := h.mustRun(0, "rollout", "undo", "deploy", "web")
	if !strings.HasPrefix(out, "deployment/web rolled back to revision 1 (template "+h1+"): generation 3\n") {
		t.Errorf("undo: %q", out)
	}
	want := []string{"get deployments/web", "update deployments/web", "get deployments/web", "update deployments/web"}
	if diff := cmp.Diff(want, h.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
	if api.TemplateHash(d.Spec.Template) != h1 || d.Metadata.Labels["team"] != "web" {
		t.Errorf("after undo: template %s labels %v; want %s and the other writer's label", api.TemplateHash(d.Spec.Template), d.Metadata.Labels, h1)
	}

	// The other writer made the same undo: nothing left to write.
	h = newHarness(t)
	h1, _ = twoRevisions(h)
	h.setOnUpdate(func(n int) {
		if n == 1 {
			h.stdin = webTOML()
			h.mustRun(0, "apply", "-f", "-")
		}
	})
	out, _ = h.mustRun(0, "rollout", "undo", "deploy", "web")
	if want := "deployment/web: revision 1's template (" + h1 + ") was made current by another writer meanwhile\n"; !strings.HasPrefix(out, want) {
		t.Errorf("undo raced by the same undo: %q, want %q", out, want)
	}

	// A writer that never stops: bounded attempts, then an error.
	h = newHarness(t)
	twoRevisions(h)
	h.setOnUpdate(func(n int) {
		d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
		d.Metadata.Labels = map[string]string{"n": fmt.Sprint(n)}
		h.put(d)
	})
	_, errOut := h.mustRun(1, "rollout", "undo", "deploy", "web")
	if !strings.Contains(errOut, "deployment/web: still changing after 5 attempts") {
		t.Errorf("undo against a busy writer: %q", errOut)
	}
}

func TestRolloutUndoWaitAndDaemon(t *testing.T) {
	h := newHarness(t)
	h.stdin = "[[daemon]]\nname = \"exporter\"\n[daemon.template]\nexec = [\"/bin/exporter\"]\n"
	h.mustRun(0, "apply", "-f", "-")
	observeHistory(h, api.KindDaemon, "exporter", testNow.Add(-time.Hour))
	h1 := storedHash(h, api.KindDaemon, "exporter")
	h.stdin = "[[daemon]]\nname = \"exporter\"\n[daemon.template]\nexec = [\"/bin/exporter\", \"--bad\"]\n"
	h.mustRun(0, "apply", "-f", "-")
	observeHistory(h, api.KindDaemon, "exporter", testNow.Add(-time.Minute))

	out, _ := h.mustRun(0, "rollout", "history", "ds", "exporter")
	if !strings.Contains(out, "2          ") || !strings.Contains(out, `+ exec[1]: "--bad"`) {
		t.Errorf("daemon history:\n%s", out)
	}
	// A controller standing in: once herdctl watches, the daemon's pods
	// are replaced and ready.
	h.setOnWatch(func(int) {
		ds := h.getTyped(api.KindDaemon, "exporter").(*api.Daemon)
		ds.Status.ObservedGeneration = ds.Metadata.Generation
		ds.Status.Desired, ds.Status.Current, ds.Status.Ready = 2, 2, 2
		h.put(ds)
	})
	out, _ = h.mustRun(0, "rollout", "undo", "daemon/exporter", "--to-revision", "1", "--wait")
	want := "daemon/exporter rolled back to revision 1 (template " + h1 + "): generation 3\n" +
		"daemon/exporter: waiting for generation 3 to be observed (observed 2)\n" +
		"daemon/exporter: rolled out: 2 of 2 ready\n"
	if out != want {
		t.Errorf("undo --wait:\n%s\nwant:\n%s", out, want)
	}
	if got := storedHash(h, api.KindDaemon, "exporter"); got != h1 {
		t.Errorf("daemon template %s, want %s", got, h1)
	}
}

func TestChangeSummary(t *testing.T) {
	rev := func(mut func(*api.PodTemplate)) *api.TemplateRevision {
		tp := api.PodTemplate{Exec: []string{"/bin/web"}, Files: []api.File{{Path: "/srv/index.html", Content: "<h1>a</h1>"}}}
		if mut != nil {
			mut(&tp)
		}
		return &api.TemplateRevision{Template: &tp}
	}
	base := rev(nil)
	tests := []struct {
		name       string
		older, cur *api.TemplateRevision
		want       string
	}{
		{"oldest", nil, base, "(oldest kept)"},
		{"not kept", &api.TemplateRevision{}, base, "(template not kept)"},
		{"same", base, rev(nil), "(no template change)"},
		{"html kept as written", base, rev(func(tp *api.PodTemplate) { tp.Files[0].Content = "<h1>b</h1>" }),
			`~ files[0].content: "<h1>a</h1>" -> "<h1>b</h1>"`},
		{"first two, then a count", base, rev(func(tp *api.PodTemplate) {
			tp.Exec = append(tp.Exec, "-v")
			tp.Env = map[string]string{"A": "1", "B": "2"}
			tp.User = "web"
		}), `+ env.A: "1"; + env.B: "2"; 2 more`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changeSummary(tt.older, tt.cur); got != tt.want {
				t.Errorf("changeSummary = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRolloutUndoWithSecrets: a template naming a secret has a revision
// per secret version, entries with the same template; undo goes back to
// the previous template (not to the current template under an older
// secret, which cannot bring the old value back) and history says what
// changed.
func TestRolloutUndoWithSecrets(t *testing.T) {
	h := newHarness(t)
	// The controller's part, with secret versions folded in: revision
	// 1 is /bin/web with secret version v1, 2 is /bin/web --v2 with v1,
	// 3 is /bin/web --v2 with v2.
	record := func(version string, at time.Time) {
		d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
		rev, _ := api.PodRevision(d.Spec.Template, map[string]*api.Secret{"db": {Spec: api.SecretSpec{Data: map[string]api.SealedValue{"pw": {Hash: version}}}}})
		d.Status.History = api.RecordRevision(d.Status.History, d.Spec.Template, rev, d.Metadata.Generation, at)
		d.Status.Revision, d.Status.ObservedGeneration = rev, d.Metadata.Generation
		h.put(d)
	}
	h.stdin = webTOML() + "secrets = [\"db\"]\n"
	h.mustRun(0, "apply", "-f", "-")
	record("v1", testNow.Add(-30*time.Minute))
	h.stdin = webTOML("--v2") + "secrets = [\"db\"]\n"
	h.mustRun(0, "apply", "-f", "-")
	record("v1", testNow.Add(-20*time.Minute))
	record("v2", testNow.Add(-10*time.Minute))

	out, _ := h.mustRun(0, "rollout", "history", "deploy", "web")
	if !strings.Contains(out, "(no template change: a secret it names changed)") {
		t.Errorf("history:\n%s", out)
	}
	if _, errOut := h.mustRun(1, "rollout", "undo", "deploy", "web", "--to-revision", "2"); !strings.Contains(errOut, "is the current template: nothing to undo") {
		t.Errorf("undo to the current template under an older secret: %q", errOut)
	}
	out, _ = h.mustRun(0, "rollout", "undo", "deploy", "web")
	if !strings.HasPrefix(out, "deployment/web rolled back to revision 1 ") {
		t.Errorf("undo: %q", out)
	}
	d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
	if len(d.Spec.Template.Exec) != 1 {
		t.Errorf("after undo: exec %v, want revision 1's", d.Spec.Template.Exec)
	}
}
