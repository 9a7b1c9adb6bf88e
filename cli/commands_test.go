package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string // in stderr
	}{
		{"no arguments prints help", nil, 0, ""},
		{"help flag", []string{"--help"}, 0, ""},
		{"subcommand help", []string{"get", "-h"}, 0, ""},
		{"help command", []string{"help", "apply"}, 0, ""},
		{"unknown command", []string{"gte", "pods"}, 2, `error: unknown command "gte" for "herdctl" (did you mean "get"?)`},
		{"unknown subcommand", []string{"config", "nope"}, 2, `unknown command "nope" for "herdctl config"`},
		{"unknown flag", []string{"get", "pods", "--nope"}, 2, "error: unknown flag: --nope"},
		{"unknown global flag", []string{"--nope", "status"}, 2, "unknown flag: --nope"},
		{"bad flag value", []string{"--timeout", "soon", "status"}, 2, `invalid argument "soon"`},
		{"missing kind", []string{"get"}, 2, "herdctl get: missing arguments: want KIND [NAME]"},
		{"too many args", []string{"get", "pods", "a", "b"}, 2, "too many arguments"},
		{"unknown kind", []string{"get", "widgets"}, 2, `unknown kind "widgets"`},
		{"bad output", []string{"get", "pods", "-o", "xml"}, 2, `-o "xml": want table, wide, json or name`},
		{"yaml output", []string{"get", "pods", "-o", "yaml"}, 2, "-o yaml is not supported"},
		{"bad selector", []string{"get", "pods", "-l", "novalue"}, 2, "-l:"},
		{"apply without -f", []string{"apply"}, 2, "no manifests"},
		{"apply with arguments", []string{"apply", "x.toml"}, 2, "too many arguments"},
		{"apply --wait --dry-run", []string{"apply", "-f", "x", "--wait", "--dry-run"}, 2, "exclude each other"},
		{"apply missing file", []string{"apply", "-f", "/nonexistent/x.toml"}, 1, "no such file"},
		{"describe without name", []string{"describe", "pods"}, 2, "missing NAME"},
		{"delete without name", []string{"delete", "pods"}, 2, "missing NAME"},
		{"delete names and -f", []string{"delete", "pods", "x", "-f", "y"}, 2, "not both"},
		{"delete mixed kinds", []string{"delete", "pod/a", "svc/b"}, 2, "all objects must be of one kind"},
		{"scale without --replicas", []string{"scale", "deploy", "web"}, 2, "--replicas is required"},
		{"scale a pod", []string{"scale", "pod", "web", "--replicas", "1"}, 2, "only deployments"},
		{"scale negative", []string{"scale", "deploy/web", "--replicas", "-1"}, 2, "must be 0 or more"},
		{"completion without shell", []string{"completion"}, 2, "missing arguments"},
		{"completion unknown shell", []string{"completion", "tcsh"}, 2, `unknown shell "tcsh"`},
		{"not found is an error", []string{"get", "deploy", "nope"}, 1, "error: not found: deployments/nope"},
		{"bad address", []string{"--addr", "ftp://x", "status"}, 1, `scheme "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			code, out, errOut := h.run(tt.args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.want, out, errOut)
			}
			if tt.wantErr != "" && !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.wantErr)
			}
			if tt.want == 2 && !strings.Contains(errOut, "--help' for usage") {
				t.Errorf("usage error without a hint: %q", errOut)
			}
			if tt.want == 0 && (tt.args == nil || strings.Contains(strings.Join(tt.args, " "), "h")) && !strings.Contains(out, "Usage:") {
				t.Errorf("help not printed to stdout: %q", out)
			}
		})
	}
}

func TestGet(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"deployments", []string{"get", "deployments"}, "get_deployments.golden"},
		{"alias and wide", []string{"get", "po", "-o", "wide"}, "get_pods_wide.golden"},
		{"singular", []string{"get", "node"}, "get_nodes.golden"},
		{"short alias", []string{"get", "svc"}, "get_services.golden"},
		{"daemons ds", []string{"get", "ds"}, "get_daemons.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := h.mustRun(0, tt.args...)
			golden(t, tt.golden, out)
		})
	}
	t.Run("one by name", func(t *testing.T) {
		out, _ := h.mustRun(0, "get", "deploy", "web")
		want := "NAME   READY   UP-TO-DATE   AVAILABLE   AGE\nweb    2/3     3            2           2d\n"
		if out != want {
			t.Errorf("got\n%s\nwant\n%s", out, want)
		}
		out2, _ := h.mustRun(0, "get", "deployment/web")
		if out2 != out {
			t.Errorf("kind/name form differs:\n%s", out2)
		}
	})
	t.Run("selector", func(t *testing.T) {
		out, _ := h.mustRun(0, "get", "deploy", "-l", "tier=front", "-o", "name")
		if out != "deployment/web\n" {
			t.Errorf("got %q", out)
		}
	})
	t.Run("name output", func(t *testing.T) {
		out, _ := h.mustRun(0, "get", "nodes", "-o", "name")
		if out != "node/pi1\nnode/pi2\n" {
			t.Errorf("got %q", out)
		}
	})
	t.Run("json list", func(t *testing.T) {
		out, _ := h.mustRun(0, "get", "svc", "-o", "json")
		var l struct{ Items []api.Service }
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 || l.Items[1].Metadata.Name != "web" || len(l.Items[1].Status.Endpoints) != 4 {
			t.Errorf("got %+v", l.Items)
		}
	})
	t.Run("json one", func(t *testing.T) {
		out, _ := h.mustRun(0, "get", "node", "pi1", "-o", "json")
		var n api.Node
		if err := json.Unmarshal([]byte(out), &n); err != nil {
			t.Fatal(err)
		}
		if n.Metadata.Name != "pi1" || n.Status.CPUs != 4 {
			t.Errorf("got %+v", n)
		}
	})
	t.Run("empty", func(t *testing.T) {
		out, errOut := h.mustRun(0, "get", "pods", "-l", "app=none")
		if out != "" || errOut != "No resources found.\n" {
			t.Errorf("stdout %q stderr %q", out, errOut)
		}
		out, _ = h.mustRun(0, "get", "pods", "-l", "app=none", "-o", "json")
		if strings.TrimSpace(out) != "{\n  \"items\": []\n}" {
			t.Errorf("json: %q", out)
		}
	})
}

func TestDescribe(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	// A pod of another deployment must not be listed.
	h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "other-1"},
		Spec: api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "other"}, Node: "pi1"}})
	out, _ := h.mustRun(0, "describe", "deploy", "web")
	for _, want := range []string{"Name:                 web\n", "Resource Version:", "  web-7x2kq   pi1 ", "  web-zz81p   <none>", "Available     False"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "other-1") {
		t.Errorf("describe lists another deployment's pod:\n%s", out)
	}
	out, _ = h.mustRun(0, "describe", "node/pi1")
	if !strings.Contains(out, "other-1") || !strings.Contains(out, "web-7x2kq") || strings.Contains(out, "web-b9d4m") {
		t.Errorf("node pods wrong:\n%s", out)
	}
	_, errOut := h.mustRun(1, "describe", "svc", "nope")
	if !strings.Contains(errOut, "not found") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestApply(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"m/web.toml": deploymentTOML("web", `app = "web"`) + serviceTOML("web", "http"),
		"m/x.toml":   daemonTOML("exporter"),
	})
	out, _ := h.mustRun(0, "apply", "-f", filepath.Join(dir, "m"))
	want := "deployment/web created\nservice/web created\ndaemon/exporter created\n"
	if out != want {
		t.Errorf("first apply:\n%s\nwant\n%s", out, want)
	}
	out, _ = h.mustRun(0, "apply", "-f", filepath.Join(dir, "m"))
	if want := "deployment/web unchanged\nservice/web unchanged\ndaemon/exporter unchanged\n"; out != want {
		t.Errorf("second apply:\n%s", out)
	}
	// stdin, and a dry run changes nothing.
	h.stdin = deploymentTOML("web", `app = "web", tier = "front"`)
	out, _ = h.mustRun(0, "apply", "-f", "-", "--dry-run")
	if out != "deployment/web configured (server dry run)\n" {
		t.Errorf("dry run: %q", out)
	}
	if l := h.getTyped(api.KindDeployment, "web").GetMeta().Labels; l["tier"] != "" {
		t.Errorf("dry run changed the store: %v", l)
	}
	out, _ = h.mustRun(0, "apply", "-f", "-")
	if out != "deployment/web configured\n" {
		t.Errorf("apply stdin: %q", out)
	}
	// A labels-only change is a change, but not of the spec: the
	// generation stays.
	if d := h.getTyped(api.KindDeployment, "web").(*api.Deployment); d.Metadata.Labels["tier"] != "front" || d.Metadata.Generation != 1 || *d.Spec.Replicas != 1 {
		t.Errorf("stored %+v", d)
	}
}

func TestApplyValidationErrorsSendNothing(t *testing.T) {
	h := newHarness(t)
	// Decoded fine, invalid to package api's validation: exec empty, a
	// port out of range, a service without a selector.
	h.stdin = deploymentTOML("good", "") + `[[deployment]]
name = "bad1"
[deployment.template]
exec = []
[[deployment.template.ports]]
name = "http"
port = 70000

[[service]]
name = "bad2"
[[service.ports]]
target = "http"
`
	_, errOut := h.mustRun(1, "apply", "-f", "-")
	want := `error: <stdin>:11:1: deployment "bad1": template.exec: required: the command to run, as an argv array such as ["/usr/bin/python3", "-m", "http.server"]
error: <stdin>:14:1: deployment "bad1": template.ports[0].port: must be between 1 and 65535, or 0 to let herd pick a free port, got 70000
error: <stdin>:16:1: service "bad2": selector: required: the labels of the pods behind this service
`
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("the server was called: %v", calls)
	}
}

func TestApplyDecodeErrorsSendNothing(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.toml": deploymentTOML("a", "") + "[[deployment]]\nname = \"b\"\nreplica = 3\n",
		"b.toml": "[[service]\n",
	})
	_, errOut := h.mustRun(1, "apply", "-f", dir)
	want := "error: " + filepath.Join(dir, "a.toml") + `:10:1: deployment "b": unknown key "replica" (did you mean "replicas"?)` + "\n" +
		"error: " + filepath.Join(dir, "b.toml") + ":2:10: invalid TOML: expected end of table array name delimiter ']', but got '\\n' instead\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("the server was called: %v", calls)
	}
}

// TestApplyServerFieldErrors: the server's 422 is printed one field error
// a line. Local decoding and validation are stubbed out here, unavoidably:
// they are the same rules as the server's admission and would stop these
// objects before they are sent.
func TestApplyServerFieldErrors(t *testing.T) {
	h := newHarness(t)
	h.api.decodeManifests = func([]api.ManifestFile) ([]api.Object, error) {
		return []api.Object{
			&api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web"},
				Spec: api.DeploymentSpec{Replicas: intp(-1), Template: api.PodTemplate{Labels: map[string]string{"app": "web"}, Exec: []string{"/bin/web"},
					Ports: []api.Port{{Name: "http", Port: 70000}}}}},
			&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
				Spec: api.ServiceSpec{Ports: []api.ServicePort{{Target: "http"}}}},
		}, nil
	}
	h.api.validate = func(api.Object) []api.FieldError { return nil }
	h.stdin = "ignored by the stub"
	_, errOut := h.mustRun(1, "apply", "-f", "-")
	want := `error: deployments/web: spec.replicas: must be between 0 and 1000, got -1
error: deployments/web: spec.template.ports[0].port: must be between 1 and 65535, or 0 to let herd pick a free port, got 70000
error: services/web: spec.selector: required: the labels of the pods behind this service
`
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
	if got := h.getTyped(api.KindDeployment, "web"); got != nil {
		t.Errorf("stored %+v after a refused apply", got)
	}
}

// rolledOut returns d with a status that counts as rolled out.
func rolledOut(d *api.Deployment, available int) *api.Deployment {
	d.Status.ObservedGeneration = d.Metadata.Generation
	d.Status.Replicas = available
	d.Status.UpdatedReplicas = available
	d.Status.AvailableReplicas = available
	d.Status.ReadyReplicas = available
	return d
}

func TestApplyWait(t *testing.T) {
	h := newHarness(t)
	h.stdin = deploymentTOML("web", "") + daemonTOML("exporter") + serviceTOML("web", "http")
	// A controller standing in: once herdctl watches, make progress, end
	// the watch (as a snapshot restore does), then finish on the second
	// watch.
	h.setOnWatch(func(n int) {
		switch n {
		case 1:
			d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
			d.Status.ObservedGeneration = d.Metadata.Generation
			h.put(d)
			ds := h.getTyped(api.KindDaemon, "exporter").(*api.Daemon)
			ds.Status = api.DaemonStatus{ObservedGeneration: 1, Desired: 2, Current: 2, Ready: 2}
			h.put(ds)
			h.store.EndWatches()
		case 2:
			d := h.getTyped(api.KindDeployment, "web").(*api.Deployment)
			h.put(rolledOut(d, 1))
		}
	})
	out, _ := h.mustRun(0, "apply", "-f", "-", "--wait")
	want := `deployment/web created
daemon/exporter created
service/web created
deployment/web: waiting for generation 1 to be observed (observed 0)
daemon/exporter: waiting for generation 1 to be observed (observed 0)
deployment/web: 0 of 1 replicas available (0 updated)
daemon/exporter: rolled out: 2 of 2 ready
deployment/web: rolled out: 1 of 1 replicas available
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestApplyWaitTimeout(t *testing.T) {
	h := newHarness(t)
	h.stdin = deploymentTOML("web", "")
	// Nothing ever sets status: the wait must end at --timeout with a
	// clear message.
	out, errOut := h.mustRun(1, "apply", "-f", "-", "--wait", "--timeout", "1s")
	if !strings.HasPrefix(out, "deployment/web created\n") {
		t.Errorf("stdout %q", out)
	}
	want := "error: timed out after 1s waiting for deployment/web: waiting for generation 1 to be observed (observed 0)\n"
	if errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
}

func TestApplyWaitDeleted(t *testing.T) {
	h := newHarness(t)
	h.stdin = deploymentTOML("web", "")
	h.setOnWatch(func(int) { h.remove(api.KindDeployment, "web") })
	_, errOut := h.mustRun(1, "apply", "-f", "-", "--wait")
	if !strings.Contains(errOut, "deployment/web was deleted while waiting") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestRolloutStatus(t *testing.T) {
	dep := func(gen, obs int64, want, avail, upd int) *api.Deployment {
		return &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Generation: gen},
			Spec:   api.DeploymentSpec{Replicas: intp(want)},
			Status: api.DeploymentStatus{ObservedGeneration: obs, Replicas: max(avail, upd), AvailableReplicas: avail, UpdatedReplicas: upd}}
	}
	tests := []struct {
		name string
		obj  api.Object
		done bool
		msg  string
	}{
		{"not observed", dep(2, 1, 3, 3, 3), false, "waiting for generation 2 to be observed (observed 1)"},
		{"partly available", dep(2, 2, 3, 1, 2), false, "1 of 3 replicas available (2 updated)"},
		{"surge", dep(2, 2, 3, 4, 3), false, "4 replicas available, want 3: waiting for old replicas to stop"},
		{"done", dep(2, 2, 3, 3, 3), true, "rolled out: 3 of 3 replicas available"},
		{"scaled to zero", dep(1, 1, 0, 0, 0), true, "rolled out: 0 of 0 replicas available"},
		{"daemon not ready", &api.Daemon{Metadata: api.ObjectMeta{Generation: 1}, Status: api.DaemonStatus{ObservedGeneration: 1, Desired: 3, Current: 3, Ready: 2}}, false, "2 of 3 ready"},
		{"daemon done", &api.Daemon{Metadata: api.ObjectMeta{Generation: 1}, Status: api.DaemonStatus{ObservedGeneration: 1, Desired: 3, Current: 3, Ready: 3}}, true, "rolled out: 3 of 3 ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, msg := rolloutStatus(tt.obj)
			if done != tt.done || msg != tt.msg {
				t.Errorf("got %v %q, want %v %q", done, msg, tt.done, tt.msg)
			}
		})
	}
}

func TestGetWatch(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	h.setOnWatch(func(n int) {
		switch n {
		case 1:
			// Not shown: another kind, and a pod outside the selector.
			h.put(&api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "x"}})
			h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "db-1", Labels: map[string]string{"app": "db"}}})
			// Placed (spec) and started (status): one event each.
			p := h.getTyped(api.KindPod, "web-zz81p").(*api.Pod)
			p.Spec.Node, p.Status.Phase = "pi1", api.PodRunning
			h.put(p)
		case 2:
			h.remove(api.KindPod, "web-b9d4m")
		}
	})
	h.setOnList(func(n int) {
		if n == 2 {
			// Changed while herdctl was between watches: found by the re-list.
			h.remove(api.KindPod, "web-7x2kq")
			h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-a-new-pod-with-a-long-name", Labels: map[string]string{"app": "web"}},
				Spec: api.PodSpec{Node: "pi2"}, Status: api.PodStatus{Phase: api.PodStarting}})
		}
	})
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- h.runTo(&stdout, &stderr, "get", "pods", "-l", "app=web", "-w") }()
	// The first watch delivered the placed pod: end it, as a snapshot
	// restore does, so herdctl lists again.
	testutil.Until(t, 10*time.Second, "the started pod's row", func() bool { return strings.Contains(stdout.String(), "web-zz81p   pi1      Running") })
	h.store.EndWatches()
	testutil.Until(t, 10*time.Second, "the deleted pod's row", func() bool { return strings.Count(stdout.String(), "web-b9d4m") == 2 })
	h.cancel() // Ctrl-C
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	golden(t, "get_pods_watch.golden", stdout.String())
	// Fourteen fixtures are resourceVersions 1-14; the store's writes
	// during the first watch take 15-19.
	want := []string{"list pods", "watch pods from 14", "list pods", "watch pods from 19"}
	calls := h.Calls()
	if diff := cmp.Diff(want, calls[:len(want)]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestGetWatchJSON(t *testing.T) {
	h := newHarness(t)
	h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi1"}})
	h.setOnWatch(func(int) {
		h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi1"}, Status: api.NodeStatus{Phase: api.NodeReady}})
		h.cancel()
	})
	var stdout, stderr syncBuffer
	code := h.runTo(&stdout, &stderr, "get", "nodes", "-w", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var types []api.EventType
	for _, l := range lines {
		var ev api.WatchEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, ev.Type)
	}
	// The cancellation may race the second event: the first is certain.
	if len(types) == 0 || types[0] != api.EventAdded {
		t.Errorf("events %v", types)
	}
}

func TestDelete(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	out, _ := h.mustRun(0, "delete", "po", "web-7x2kq", "web-b9d4m")
	if out != "pod/web-7x2kq deleted\npod/web-b9d4m deleted\n" {
		t.Errorf("stdout %q", out)
	}
	out, errOut := h.mustRun(1, "delete", "pod/nope", "pod/web-zz81p")
	if out != "pod/web-zz81p deleted\n" || errOut != "error: pod/nope not found\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"m.toml": deploymentTOML("web", "") + serviceTOML("gone", "http") + serviceTOML("web", "http")})
	out, errOut = h.mustRun(0, "delete", "-f", filepath.Join(dir, "m.toml"), "--ignore-not-found")
	if out != "deployment/web deleted\nservice/web deleted\n" || errOut != "service/gone not found\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
}

func TestScale(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	for _, args := range [][]string{{"scale", "deploy", "web", "--replicas", "5"}, {"scale", "deployment/web", "--replicas=0"}} {
		out, _ := h.mustRun(0, args...)
		if !strings.HasPrefix(out, "deployment/web scaled to ") {
			t.Errorf("stdout %q", out)
		}
	}
	if d := h.getTyped(api.KindDeployment, "web").(*api.Deployment); *d.Spec.Replicas != 0 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	_, errOut := h.mustRun(1, "scale", "deploy", "nope", "--replicas", "1")
	if !strings.Contains(errOut, "not found") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestStatusAndVersion(t *testing.T) {
	h := newHarness(t)
	h.setStatus(api.ClusterStatus{Node: "pi1", Leader: "pi1", Version: "v0.2.0",
		Servers: []api.RaftServer{{ID: "pi1", Address: "10.0.0.11:7949", Suffrage: "voter", Leader: true}, {ID: "pi2", Address: "10.0.0.12:7949", Suffrage: "voter"}},
		Members: []api.GossipMember{{Name: "pi1", Addr: "10.0.0.11:7946", State: "alive", Server: true}, {Name: "pi3", Addr: "10.0.0.13:7946", State: "suspect"}},
	})
	out, _ := h.mustRun(0, "status")
	golden(t, "status.golden", out)

	h.setStatus(api.ClusterStatus{})
	out, _ = h.mustRun(0, "status")
	if !strings.Contains(out, "Leader:   <none> (no leader") {
		t.Errorf("no leader: %q", out)
	}

	h.setStatus(api.ClusterStatus{Version: "v0.2.0"})
	out, _ = h.mustRun(0, "version")
	if out != "Client Version: dev\nServer Version: v0.2.0\n" {
		t.Errorf("version: %q", out)
	}
	n := len(h.Calls())
	out, _ = h.mustRun(0, "version", "--client")
	if out != "Client Version: dev\n" || len(h.Calls()) != n {
		t.Errorf("version --client: %q, calls %v", out, h.Calls()[n:])
	}
}

func TestDiffCommand(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	h.stdin = deploymentTOML("web", `app = "web"`) + serviceTOML("web", "8080") + daemonTOML("new")
	out, _ := h.mustRun(0, "diff", "-f", "-")
	golden(t, "diff.golden", out)
	if calls := h.Calls(); !contains(calls, "apply-dry") || contains(calls, "apply") {
		t.Errorf("calls %v: want a dry run only", calls)
	}
	h.stdin = serviceTOML("web", "8080")
	h.mustRun(0, "apply", "-f", "-")
	out, _ = h.mustRun(0, "diff", "-f", "-")
	if out != "No changes.\n" {
		t.Errorf("no changes: %q", out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCompletion(t *testing.T) {
	h := newHarness(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _ := h.mustRun(0, "completion", sh)
		if !strings.Contains(out, "herdctl") || len(out) < 500 {
			t.Errorf("%s completion looks wrong: %.200q", sh, out)
		}
	}
	h.loadFixtures()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"kinds", []string{"__complete", "get", ""}, []string{"nodes", "deployments", "daemons", "pods", "services", "secrets", "jobs"}},
		{"names", []string{"__complete", "get", "deploy", ""}, []string{"api-server-with-a-long-name", "web"}},
		{"no second name for get", []string{"__complete", "get", "deploy", "web", ""}, nil},
		{"delete excludes chosen names", []string{"__complete", "delete", "nodes", "pi1", ""}, []string{"pi2"}},
		{"scale", []string{"__complete", "scale", "deployment", ""}, []string{"api-server-with-a-long-name", "web"}},
		{"output flag", []string{"__complete", "get", "pods", "-o", ""}, []string{"table", "wide", "json", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := h.mustRun(0, tt.args...)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
					got = append(got, l)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nraw:\n%s", diff, out)
			}
		})
	}
}

// TestWatchTimeout: get -w with --timeout ends normally when the time is up.
func TestWatchTimeout(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures()
	out, _ := h.mustRun(0, "get", "nodes", "-w", "--timeout", "1s")
	golden(t, "get_nodes.golden", out)
}

func TestCordon(t *testing.T) {
	h := newHarness(t)
	h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi1"}, Status: api.NodeStatus{Phase: api.NodeReady}})
	out, _ := h.mustRun(0, "cordon", "pi1")
	if out != "node/pi1 cordoned\n" {
		t.Errorf("stdout %q", out)
	}
	if n := h.getTyped(api.KindNode, "pi1").(*api.Node); !n.Spec.Unschedulable {
		t.Error("pi1 not cordoned")
	}
	out, _ = h.mustRun(0, "cordon", "node/pi1")
	if out != "node/pi1 already cordoned\n" {
		t.Errorf("stdout %q", out)
	}
	h.mustRun(0, "uncordon", "pi1")
	if n := h.getTyped(api.KindNode, "pi1").(*api.Node); n.Spec.Unschedulable {
		t.Error("pi1 still cordoned")
	}
	_, errOut := h.mustRun(1, "cordon", "nope")
	if !strings.Contains(errOut, "node/nope") || !strings.Contains(errOut, "not found") {
		t.Errorf("stderr %q", errOut)
	}
	h.mustRun(2, "cordon")
}
