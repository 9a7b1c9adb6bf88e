package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/herd-dev/herd/api"
)

const webManifest = `[[deployment]]
name = "web"
[deployment.template]
labels = { app = "web" }
exec = ["/usr/bin/python3", "-m", "http.server", "${PORT}"]
[[deployment.template.ports]]
name = "http"
port = 0

[[service]]
name = "web"
selector = { app = "web" }
[[service.ports]]
target = "http"
`

// TestRealManifests runs apply and diff with package api's decoder and
// validation, on real TOML.
func TestRealManifests(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"ok/web.toml": webManifest,
		"bad/a.toml": `[[deployment]]
name = "web"
replica = 3
[deployment.template]
exec = ["/bin/web"]
`,
		"bad/b.toml": `[[service]]
name = "web"
selector = { app = "web" }
[[service.ports]]
target = "70000"
`,
		"dup/one.toml": webManifest,
		"dup/two.toml": "[[service]]\nname = \"web\"\nselector = { app = \"web\" }\n[[service.ports]]\ntarget = \"http\"\n",
	})

	out, _ := h.mustRun(0, "apply", "-f", filepath.Join(dir, "ok"))
	if out != "deployment/web created\nservice/web created\n" {
		t.Errorf("apply: %q", out)
	}
	d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Template.Exec[3] != "${PORT}" {
		t.Errorf("stored %+v", d.Spec)
	}

	// Every problem of every file, with file:line:col, and nothing sent.
	n := len(h.Calls())
	_, errOut := h.mustRun(1, "apply", "-f", filepath.Join(dir, "bad"))
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "error: "+filepath.Join(dir, "bad", "a.toml")+":3:1: ") || !strings.Contains(lines[0], "replica") ||
		!strings.HasPrefix(lines[1], "error: "+filepath.Join(dir, "bad", "b.toml")+":5:") || !strings.Contains(lines[1], "70000") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if calls := h.Calls()[n:]; len(calls) != 0 {
		t.Errorf("the server was called: %v", calls)
	}

	_, errOut = h.mustRun(1, "apply", "-f", filepath.Join(dir, "dup"))
	if !strings.Contains(errOut, "two.toml:2:") || !strings.Contains(errOut, "declared twice") {
		t.Errorf("duplicate across files: %q", errOut)
	}

	h.stdin = strings.Replace(webManifest, `name = "web"`+"\n[deployment.template]", `name = "web"`+"\nreplicas = 4\n[deployment.template]", 1)
	out, _ = h.mustRun(0, "diff", "-f", "-")
	if out != "deployment/web configured\n  ~ spec.replicas: 1 -> 4\n" {
		t.Errorf("diff:\n%s", out)
	}
}
