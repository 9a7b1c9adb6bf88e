package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// testNow is the fixed "now" of every test.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// harness runs herdctl in-process against a fakeStore.
type harness struct {
	t      *testing.T
	store  *fakeStore
	env    map[string]string
	stdin  string
	ctx    context.Context
	cancel context.CancelFunc
	// targets records every target a client was made for.
	targets []target
	api     apiFuncs
	// realClient makes herdctl use package client (see startAgent).
	realClient bool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	home := t.TempDir()
	h := &harness{
		t:      t,
		store:  newFakeStore(testNow.Add(-time.Hour)),
		env:    map[string]string{"HOME": home},
		ctx:    ctx,
		cancel: cancel,
		api:    defaultAPIFuncs(),
	}
	// The fake decoder's objects are skeletons: real validation is tested
	// with real manifests in TestRealManifests.
	h.api.decodeManifests = fakeDecode
	h.api.validate = func(api.Object) []api.FieldError { return nil }
	return h
}

// run runs herdctl with args and returns its exit code, stdout and stderr.
func (h *harness) run(args ...string) (int, string, string) {
	h.t.Helper()
	var stdout, stderr syncBuffer
	code := h.runTo(&stdout, &stderr, args...)
	return code, stdout.String(), stderr.String()
}

func (h *harness) runTo(stdout, stderr *syncBuffer, args ...string) int {
	e := env{
		ctx:    h.ctx,
		stdin:  strings.NewReader(h.stdin),
		stdout: stdout,
		stderr: stderr,
		getenv: func(k string) string { return h.env[k] },
		now:    func() time.Time { return testNow },
		newClient: func(t target, timeout time.Duration) (apiClient, error) {
			h.targets = append(h.targets, t)
			if h.realClient {
				return newClient(t, timeout)
			}
			return h.store, nil
		},
		api:        h.api,
		watchRetry: 0,
	}
	return run(args, e)
}

// mustRun runs args and fails the test unless the exit code is want.
func (h *harness) mustRun(want int, args ...string) (string, string) {
	h.t.Helper()
	code, out, errOut := h.run(args...)
	if code != want {
		h.t.Fatalf("herdctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out, errOut
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Until(t, 10*time.Second, what, cond)
}

func intp(n int) *int { return &n }

// fixtures returns one object of every kind in several states, created at
// fixed times before testNow.
func fixtures() map[api.Kind][]api.Object {
	ago := func(d time.Duration) time.Time { return testNow.Add(-d) }
	cond := func(typ string, st api.ConditionStatus, reason, msg string, at time.Duration) api.Condition {
		return api.Condition{Type: typ, Status: st, Reason: reason, Message: msg, LastTransitionTime: ago(at)}
	}
	web := &api.Deployment{Kind: api.KindDeployment,
		Metadata: api.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}, Generation: 3, ResourceVersion: 42, Created: ago(50 * time.Hour)},
		Spec: api.DeploymentSpec{Replicas: intp(3), Selector: map[string]string{"app": "web"},
			Template: api.PodTemplate{
				Labels:     map[string]string{"app": "web"},
				Exec:       []string{"/usr/bin/web", "--listen", ":$PORT", "--motd", "hello world"},
				Env:        map[string]string{"LOG_LEVEL": "info", "GREETING": "hi \"there\""},
				WorkingDir: "/srv/web",
				User:       "web",
				Files:      []api.File{{Path: "/etc/web.conf", Content: "a=1\n"}},
				Ports:      []api.Port{{Name: "http", Port: 8080}, {Name: "metrics", Port: 0, Protocol: "tcp"}},
				Resources:  api.Resources{MemoryLimit: "64M", CPULimit: "50%"},
				Readiness:  &api.Probe{HTTP: "/healthz", HTTPPort: "http"},
				NodeSelector: map[string]string{
					"herd.dev/arch": "arm64",
				},
			}},
		Status: api.DeploymentStatus{ObservedGeneration: 3, Revision: "5f3a9c", Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []api.Condition{
				cond(api.ConditionAvailable, api.ConditionFalse, "MinimumReplicasUnavailable", "2 of 3 available", 90*time.Second),
				cond(api.ConditionProgressing, api.ConditionTrue, "NewReplicaSetAvailable", "", 3*time.Hour),
			}},
	}
	api2 := &api.Deployment{Kind: api.KindDeployment,
		Metadata: api.ObjectMeta{Name: "api-server-with-a-long-name", Generation: 1, Created: ago(5 * time.Second)},
		Spec:     api.DeploymentSpec{Template: api.PodTemplate{Exec: []string{"/usr/local/bin/api"}}},
	}
	exporter := &api.Daemon{Kind: api.KindDaemon,
		Metadata: api.ObjectMeta{Name: "node-exporter", Labels: map[string]string{"app": "node-exporter"}, Generation: 2, ResourceVersion: 17, Created: ago(400 * 24 * time.Hour)},
		Spec: api.DaemonSpec{Template: api.PodTemplate{
			Exec:          []string{"/usr/bin/prometheus-node-exporter"},
			Ports:         []api.Port{{Name: "metrics", Port: 9100}},
			RestartPolicy: api.RestartOnFailure,
			Readiness:     &api.Probe{TCP: "metrics", PeriodSeconds: 10},
			NodeSelector:  map[string]string{"arch": "arm64"},
		}},
		Status: api.DaemonStatus{ObservedGeneration: 2, Revision: "77aa01", Desired: 3, Current: 3, Ready: 3},
	}
	pod := func(name, node string, phase api.PodPhase, restarts int, created time.Duration) *api.Pod {
		p := &api.Pod{Kind: api.KindPod,
			Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}, ResourceVersion: 40, Created: ago(created)},
			Spec: api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "web"}, Template: web.Spec.Template,
				Revision: "5f3a9c", Node: node},
			Status: api.PodStatus{Phase: phase, Restarts: restarts},
		}
		if node != "" {
			p.Spec.HostPorts = map[string]int{"http": 8080, "metrics": 31007}
			p.Status.Unit = "herd-" + name + ".service"
			p.Status.IP = map[string]string{"pi1": "10.0.0.11", "pi2": "10.0.0.12"}[node]
			p.Status.StartedAt = ago(created - time.Minute)
		}
		if phase == api.PodRunning {
			p.Status.Ready = true
			p.Status.Conditions = []api.Condition{cond(api.ConditionReady, api.ConditionTrue, "ProbeSucceeded", "", 20*time.Minute)}
		}
		return p
	}
	pods := []api.Object{
		pod("web-7x2kq", "pi1", api.PodRunning, 0, 2*time.Hour),
		pod("web-b9d4m", "pi2", api.PodRunning, 3, 2*time.Hour),
		pod("web-zz81p", "", api.PodPending, 0, 30*time.Second),
	}
	pods[2].(*api.Pod).Status.Message = "no node fits: 2 nodes lack 64Mi free memory"
	svc := &api.Service{Kind: api.KindService,
		Metadata: api.ObjectMeta{Name: "web", Created: ago(7 * time.Minute)},
		Spec:     api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Name: "http", Target: "http"}}},
		Status: api.ServiceStatus{Endpoints: []api.Endpoint{
			{Port: "http", Pod: "web-7x2kq", Node: "pi1", Address: "10.0.0.11:8080"},
			{Port: "http", Pod: "web-b9d4m", Node: "pi2", Address: "10.0.0.12:8080"},
			{Port: "http", Pod: "web-c1", Node: "pi3", Address: "10.0.0.13:8080"},
			{Port: "http", Pod: "web-c2", Node: "pi4", Address: "10.0.0.14:8080"},
		}},
	}
	empty := &api.Service{Kind: api.KindService,
		Metadata: api.ObjectMeta{Name: "db", Created: ago(3 * 24 * time.Hour)},
		Spec:     api.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []api.ServicePort{{Target: "5432"}}},
	}
	node := func(name, addr string, server bool, phase api.NodePhase) *api.Node {
		return &api.Node{Kind: api.KindNode,
			Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"herd.dev/arch": "arm64"}, Created: ago(10 * 24 * time.Hour)},
			Status: api.NodeStatus{Phase: phase, Since: ago(4 * time.Minute), Fenced: true, Address: addr, SSHAddress: addr + ":22",
				Arch: "arm64", Model: "Raspberry Pi 4 Model B", MemoryBytes: 4 << 30, CPUs: 4, Version: "v0.1.0", Server: server,
				RaftAddress: map[bool]string{true: addr + ":7949"}[server],
				HostKey:     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl pi@" + name,
				Conditions:  []api.Condition{cond(api.ConditionReady, api.ConditionStatus(map[api.NodePhase]string{api.NodeReady: "True", api.NodeNotReady: "False"}[phase]), "Gossip", "member "+strings.ToLower(string(phase)), 4*time.Minute)},
			}}
	}
	pi2 := node("pi2", "10.0.0.12", false, api.NodeNotReady)
	pi2.Spec.Unschedulable = true
	pi2.Status.MemoryBytes = 1536 << 20
	return map[api.Kind][]api.Object{
		api.KindDeployment: {api2, web},
		api.KindDaemon:     {exporter},
		api.KindPod:        pods,
		api.KindService:    {empty, svc},
		api.KindNode:       {node("pi1", "10.0.0.11", true, api.NodeReady), pi2},
	}
}

// loadFixtures puts every fixture into the store.
func (h *harness) loadFixtures() {
	for _, k := range api.Kinds {
		for _, o := range fixtures()[k] {
			h.store.put(o)
		}
	}
}

// deploymentTOML is a small real manifest of deployment name with the given
// labels (TOML inline-table body, as `app = "web"`; "" for none).
func deploymentTOML(name, labels string) string {
	return fmt.Sprintf("[[deployment]]\nname = %q\nlabels = { %s }\n[deployment.template]\nlabels = { app = %q }\nexec = [\"/bin/%s\"]\n\n", name, labels, name, name)
}

// daemonTOML is a small real manifest of daemon name.
func daemonTOML(name string) string {
	return fmt.Sprintf("[[daemon]]\nname = %q\n[daemon.template]\nexec = [\"/bin/%s\"]\n\n", name, name)
}

// serviceTOML is a small real manifest of service name selecting app=name,
// whose one port targets target.
func serviceTOML(name, target string) string {
	return fmt.Sprintf("[[service]]\nname = %q\nselector = { app = %q }\n[[service.ports]]\ntarget = %q\n\n", name, name, target)
}
