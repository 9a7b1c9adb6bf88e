package placer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

func filesCond(p *api.Pod) *api.Condition {
	i := slices.IndexFunc(p.Status.Conditions, func(c api.Condition) bool { return c.Type == ConditionFilesWritten })
	if i < 0 {
		return nil
	}
	return &p.Status.Conditions[i]
}

func TestPassWritesEnvFilePrivately(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := webPod("web-1", "n1")
	pod.Spec.Template.Env = map[string]string{"TOKEN": "s3cret"}
	h.st.putPod(pod)
	b := h.fleet.Board("n1")
	if res := h.pass(h.p.newWorker("n1")); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	env := units.EnvFilePath("herd-web-1.service")
	got, ok := b.File(env)
	if !ok || !strings.Contains(string(got), "s3cret") {
		t.Fatalf("env file %s = %q, %v; want the pod's environment", env, got, ok)
	}
	if m, _ := b.FileMode(env); m != 0o600 {
		t.Errorf("env file mode = %v, want 0600", m)
	}
	if m, _ := b.DirMode(units.EnvDir); m != 0o700 {
		t.Errorf("env dir mode = %v, want 0700", m)
	}
}

func TestPassRefusesFileThroughSymlink(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := webPod("web-1", "n1")
	pod.Spec.Template.User = "nobody"
	pod.Spec.Template.Files = []api.File{{Path: "/srv/web/conf/app.conf", Content: "x", Mode: "0644"}}
	h.st.putPod(pod)
	b := h.fleet.Board("n1")
	// The pod's user, owning /srv/web, swapped conf for a link to /etc.
	b.Symlink("/srv/web/conf", "/etc")
	w := h.p.newWorker("n1")

	res := h.pass(w)
	if res.err != nil {
		t.Fatalf("pass = %v, want no error: a refusal is the pod's condition, not a failed pass", res.err)
	}
	// The env file written first is removed again: no secrets stay behind
	// for a unit that was never written.
	wantCalls(t, b, "ShowUnits", "PutFile "+units.EnvDir+"/herd-web-1.env", "PutFile /srv/web/conf/app.conf",
		"Remove "+units.EnvDir+"/herd-web-1.env", "ShowUnits")
	if got := b.Files(); len(got) != 0 {
		t.Errorf("files written: %v, want none", got)
	}
	if u := b.ActiveUnits(); len(u) != 0 {
		t.Errorf("active units %v, want none", u)
	}
	c := filesCond(h.st.pod("web-1"))
	if c == nil || c.Status != api.ConditionFalse || c.Reason != ReasonFileRefused || !strings.Contains(c.Message, "/srv/web/conf is a symbolic link") {
		t.Fatalf("FilesWritten condition = %+v, want False/%s naming the link", c, ReasonFileRefused)
	}

	// No retry loop: within ObserveInterval the write is not tried again.
	b.ResetCalls()
	if res := h.pass(w); res.err != nil {
		t.Fatalf("second pass: %v", res.err)
	}
	if n := b.CallCount("PutFile"); n != 0 {
		t.Errorf("%d PutFile calls right after a refusal, want 0", n)
	}

	// The link is gone and the interval is over: the pod comes up and the
	// condition is removed.
	if err := h.fleet.Remove(t.Context(), "n1", "/srv/web/conf"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(h.p.cfg.ObserveInterval)
	if res := h.pass(w); res.err != nil {
		t.Fatalf("third pass: %v", res.err)
	}
	if d := cmp.Diff([]string{"herd-web-1.service"}, b.ActiveUnits()); d != "" {
		t.Errorf("active units (-want +got):\n%s", d)
	}
	if c := filesCond(h.st.pod("web-1")); c != nil {
		t.Errorf("FilesWritten condition still set: %+v", c)
	}
}

func TestPassRefusesSetIDWithoutOptIn(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := webPod("web-1", "n1")
	pod.Spec.Template.Files = []api.File{{Path: "/usr/local/bin/tool", Content: "x", Mode: "4755"}}
	h.st.putPod(pod)
	b := h.fleet.Board("n1")
	if res := h.pass(h.p.newWorker("n1")); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	wantCalls(t, b, "ShowUnits")
	// The renderer (api's rule) refuses it before any file is written; the
	// pod says why.
	p := h.st.pod("web-1")
	i := slices.IndexFunc(p.Status.Conditions, func(c api.Condition) bool { return c.Type == ConditionRenderable })
	if i < 0 || p.Status.Conditions[i].Reason != ReasonInvalidPod || !strings.Contains(p.Status.Conditions[i].Message, "setuid") {
		t.Fatalf("conditions = %+v, want Renderable=False InvalidPod naming setuid", p.Status.Conditions)
	}
}

func TestRefusedRemovalDoesNotBlockFencing(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	old := webPod("old-1", "n1")
	old.Spec.Template.Files = []api.File{{Path: "/srv/old/data/f", Content: "x"}}
	b := h.fleet.Board("n1")
	b.Install("herd-old-1.service", render(t, old))
	b.Symlink("/srv/old/data", "/etc")
	b.WriteFile("/etc/f", []byte("precious"), 0o644)
	if res := h.pass(h.p.newWorker("n1")); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	if _, ok := b.Unit("herd-old-1.service"); ok {
		t.Errorf("stale unit still there")
	}
	if got, ok := b.File("/etc/f"); !ok || string(got) != "precious" {
		t.Errorf("/etc/f = %q, %v; want it untouched", got, ok)
	}
}

func TestFilesConditionKeepsTransitionTime(t *testing.T) {
	h := newHarness(t)
	w := h.p.newWorker("n1")
	pod := webPod("web-1", "n1")
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.fileRefused["web-1"] = fileRefusal{msg: "a"}
	acts := w.filesCondition(t1, pod, nil)
	if len(acts) != 1 {
		t.Fatalf("got %d actions, want 1", len(acts))
	}
	set := acts[0].Object.(*api.Pod)
	if again := w.filesCondition(t1.Add(time.Hour), set, nil); len(again) != 0 {
		t.Errorf("same refusal rewrote status: %v", again)
	}
	delete(w.fileRefused, "web-1")
	cleared := w.filesCondition(t1, set, nil)
	if len(cleared) != 1 || filesCond(cleared[0].Object.(*api.Pod)) != nil {
		t.Errorf("cleared = %v, want one write without the condition", cleared)
	}
}

// TestExecuteWriteEnvAction: Plan's write-env action (units' contract)
// writes the env file privately before the unit; when the pod's files are
// then refused, the fresh env file is removed again and nothing else runs.
// The plans are written out by hand: execute carries out what they say.
func TestExecuteWriteEnvAction(t *testing.T) {
	h := newHarness(t)
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	pod := webPod("web-1", "n1")
	h.st.putPod(pod)
	pod = h.st.pod("web-1")
	b := h.fleet.Board("n1")
	w := h.p.newWorker("n1")
	unit := "herd-web-1.service"
	acts := []units.Action{
		{Type: units.ActionWriteEnv, Unit: unit, Content: []byte("A='1'\n"), Path: units.EnvFilePath(unit), Mode: units.EnvFileMode},
		{Type: units.ActionWrite, Unit: unit, Content: render(t, pod), Files: podFiles(pod)},
		{Type: units.ActionDaemonReload},
		{Type: units.ActionEnable, Unit: unit},
		{Type: units.ActionStart, Unit: unit},
	}
	n, err := w.execute(t.Context(), acts)
	if err != nil || n != 5 {
		t.Fatalf("execute = %d, %v; want 5, nil", n, err)
	}
	wantCalls(t, b,
		"PutFile "+units.EnvDir+"/herd-web-1.env",
		"PutFile /etc/web/web-1.conf",
		"PutFile "+unitDir+"herd-web-1.service",
		"systemctl daemon-reload",
		"systemctl enable herd-web-1.service",
		"systemctl start herd-web-1.service",
	)
	if got, _ := b.File(units.EnvDir + "/herd-web-1.env"); string(got) != "A='1'\n" {
		t.Errorf("env file = %q", got)
	}

	// Same plan on a fresh board whose pod file path holds a link.
	b2 := h.fleet.Board("n2")
	h.st.putNode(readyNode("n2", "127.0.0.2"))
	pod2 := webPod("web-2", "n2")
	h.st.putPod(pod2)
	pod2 = h.st.pod("web-2")
	b2.Symlink("/etc/web", "/root")
	w2 := h.p.newWorker("n2")
	unit2 := "herd-web-2.service"
	acts2 := []units.Action{
		{Type: units.ActionWriteEnv, Unit: unit2, Content: []byte("A='1'\n"), Path: units.EnvFilePath(unit2), Mode: units.EnvFileMode},
		{Type: units.ActionWrite, Unit: unit2, Content: render(t, pod2), Files: podFiles(pod2)},
		{Type: units.ActionDaemonReload},
		{Type: units.ActionEnable, Unit: unit2},
		{Type: units.ActionStart, Unit: unit2},
	}
	if _, err := w2.execute(t.Context(), acts2); err != nil {
		t.Fatalf("execute: %v", err)
	}
	wantCalls(t, b2,
		"PutFile "+units.EnvDir+"/herd-web-2.env",
		"PutFile /etc/web/web-2.conf",
		"Remove "+units.EnvDir+"/herd-web-2.env",
	)
	if got := b2.Files(); len(got) != 0 {
		t.Errorf("files left on the board: %v", got)
	}
}

// podFiles returns the files of webPod as a write action carries them.
func podFiles(p *api.Pod) []units.PodFile {
	var out []units.PodFile
	for _, f := range p.Spec.Template.Files {
		mode, _ := f.Perm()
		out = append(out, units.PodFile{Path: f.Path, Content: []byte(f.Content), Mode: mode})
	}
	return out
}
