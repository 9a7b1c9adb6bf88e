package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// testNow is the fixed "now" of every test.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// harness runs herdctl in-process against the agent's real HTTP API
// (httpapi over a raftstore.MemStore, served on loopback) through the real
// client, so every rule a test sees is the real one. herdctl's calls are
// recorded by a spy around the client (see recorder).
type harness struct {
	t       *testing.T
	store   *raftstore.MemStore
	url     string       // the API's address
	handler http.Handler // the API's handler, served at url
	env     map[string]string
	stdin   string
	ctx     context.Context
	cancel  context.CancelFunc
	// targets records every target a client was made for.
	targets []target
	api     apiFuncs
	// realClient makes herdctl connect to the target it chose (an address
	// the test set up) rather than to h.url.
	realClient bool

	mu     sync.Mutex
	calls  []string // herdctl's operations in order: "apply", "apply-dry", "delete pods/x", ...
	status api.ClusterStatus
	// onWatch, when set, runs after a watch of herdctl's is established
	// (the store delivers every later write to it), with the number of
	// watches so far; herdctl reads no event before it returns.
	onWatch func(n int)
	watches int
	// onList, when set, runs before each list of herdctl's is sent, with
	// the number of lists so far.
	onList func(n int)
	lists  int
	// onUpdate, when set, runs before each update of herdctl's is sent,
	// with the number of updates so far.
	onUpdate func(n int)
	updates  int
}

// harnessToken is the token the harness's API accepts and herdctl sends.
const harnessToken = "herdctl-test-token-0123456789"

// newHarness starts the API over an empty MemStore whose clock stands an
// hour before testNow; mutate adjusts the API's config (Logs, say).
func newHarness(t *testing.T, mutate ...func(*httpapi.Config)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	home := t.TempDir()
	created := testNow.Add(-time.Hour)
	h := &harness{
		t:      t,
		store:  raftstore.NewMemStore(clock.NowFunc(func() time.Time { return created })),
		env:    map[string]string{"HOME": home},
		ctx:    ctx,
		cancel: cancel,
		api:    defaultAPIFuncs(),
	}
	cfg := httpapi.DefaultConfig()
	cfg.Store = h.store
	cfg.Clock = clocktest.New(created)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = harnessToken
	cfg.Status = func(context.Context) api.ClusterStatus {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.status
	}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatalf("httpapi.New: %v", err)
	}
	h.handler = srv.Handler()
	hs := httptest.NewServer(h.handler)
	t.Cleanup(hs.Close)
	h.url = hs.URL
	return h
}

// withLogs serves pod logs with fn.
func withLogs(fn func(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error) func(*httpapi.Config) {
	return func(c *httpapi.Config) { c.Logs = fn }
}

// setStatus sets what GET /v1/status answers.
func (h *harness) setStatus(st api.ClusterStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = st
}

// Calls returns herdctl's recorded operations.
func (h *harness) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *harness) record(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf(format, args...))
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
		clock:  clock.NowFunc(func() time.Time { return testNow }),
		newClient: func(t target, timeout time.Duration) (apiClient, error) {
			h.targets = append(h.targets, t)
			if h.realClient {
				c, err := newClient(t, timeout)
				if err != nil {
					return nil, err
				}
				return &recorder{c: c, h: h}, nil
			}
			c, err := client.New([]string{h.url}, client.Options{Token: harnessToken, Timeout: timeout})
			if err != nil {
				return nil, err
			}
			return &recorder{c: c, h: h}, nil
		},
		api:        h.api,
		watchRetry: 0,
	}
	return run(args, e)
}

// recorder is a spy around the real client: it records each operation's
// name in h.calls and delegates it; it runs h.onList before a list and
// h.onWatch after a watch is established.
type recorder struct {
	c apiClient
	h *harness
}

var _ apiClient = (*recorder)(nil)

func (r *recorder) List(ctx context.Context, kind api.Kind) ([]api.RawObject, uint64, error) {
	r.h.record("list %s", kind)
	r.h.mu.Lock()
	r.h.lists++
	n, hook := r.h.lists, r.h.onList
	r.h.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return r.c.List(ctx, kind)
}

func (r *recorder) Get(ctx context.Context, kind api.Kind, name string) (api.RawObject, error) {
	r.h.record("get %s/%s", kind, name)
	return r.c.Get(ctx, kind, name)
}

func (r *recorder) Apply(ctx context.Context, objs []api.Object, dryRun bool) ([]api.ApplyResult, error) {
	if dryRun {
		r.h.record("apply-dry")
	} else {
		r.h.record("apply")
	}
	return r.c.Apply(ctx, objs, dryRun)
}

func (r *recorder) Delete(ctx context.Context, kind api.Kind, name string) error {
	r.h.record("delete %s/%s", kind, name)
	return r.c.Delete(ctx, kind, name)
}

func (r *recorder) Scale(ctx context.Context, name string, replicas int) (api.RawObject, error) {
	r.h.record("scale %s %d", name, replicas)
	return r.c.Scale(ctx, name, replicas)
}

func (r *recorder) PutSecret(ctx context.Context, req api.SecretRequest, overwrite bool) (api.RawObject, error) {
	r.h.record("put-secret %s overwrite=%v", req.Metadata.Name, overwrite)
	return r.c.PutSecret(ctx, req, overwrite)
}

func (r *recorder) Update(ctx context.Context, obj api.Object) (api.RawObject, error) {
	r.h.record("update %s/%s", obj.GetKind(), obj.GetMeta().Name)
	r.h.mu.Lock()
	r.h.updates++
	n, hook := r.h.updates, r.h.onUpdate
	r.h.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return r.c.Update(ctx, obj)
}

func (r *recorder) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	r.h.record("watch %s from %d", kind, fromRV)
	ch, err := r.c.Watch(ctx, kind, fromRV)
	if err != nil {
		return nil, err
	}
	r.h.mu.Lock()
	r.h.watches++
	n, hook := r.h.watches, r.h.onWatch
	r.h.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return ch, nil
}

func (r *recorder) Status(ctx context.Context) (api.ClusterStatus, error) {
	r.h.record("status")
	return r.c.Status(ctx)
}

func (r *recorder) Logs(ctx context.Context, name string, opts client.LogOptions, w io.Writer) error {
	r.h.record("logs %s follow=%v since=%q tail=%d", name, opts.Follow, opts.Since, opts.Tail)
	return r.c.Logs(ctx, name, opts, w)
}

// setOnWatch installs f as h.onWatch.
func (h *harness) setOnWatch(f func(n int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onWatch = f
}

// setOnUpdate installs f as h.onUpdate.
func (h *harness) setOnUpdate(f func(n int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onUpdate = f
}

// setOnList installs f as h.onList.
func (h *harness) setOnList(f func(n int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onList = f
}

// put writes o to the store as a controller would, through the store's
// own transaction rules: a create (status included) when o is new, else an
// update of its labels and spec and of its status in one transaction.
// o's resourceVersion is ignored (the store assigns it); its creation time
// is kept when set. An update that changes both spec and status is two watch events
// (one per op) at one resourceVersion.
func (h *harness) put(o api.Object) {
	h.t.Helper()
	r, err := api.ToRaw(o)
	if err != nil {
		h.t.Fatal(err)
	}
	r.Metadata.ResourceVersion = 0
	ops := []raftstore.Op{{Type: raftstore.OpCreate, Object: r}}
	if _, err := h.store.Get(r.Kind, r.Metadata.Name); err == nil {
		ops = []raftstore.Op{{Type: raftstore.OpUpdate, Object: r}, {Type: raftstore.OpUpdateStatus, Object: r}}
	}
	if _, err := h.store.Txn(context.Background(), ops); err != nil {
		h.t.Fatalf("put %s/%s: %v", r.Kind, r.Metadata.Name, err)
	}
}

// remove deletes kind/name from the store.
func (h *harness) remove(kind api.Kind, name string) {
	h.t.Helper()
	r := api.RawObject{Kind: kind, Metadata: api.ObjectMeta{Name: name}}
	if _, err := h.store.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpDelete, Object: r}}); err != nil {
		h.t.Fatalf("delete %s/%s: %v", kind, name, err)
	}
}

// getTyped returns a stored object, typed, or nil.
func (h *harness) getTyped(kind api.Kind, name string) api.Object {
	h.t.Helper()
	r, err := h.store.Get(kind, name)
	if errors.Is(err, raftstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	o, err := api.FromRaw(r)
	if err != nil {
		h.t.Fatal(err)
	}
	return o
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
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
				Artifacts: []api.Artifact{{URL: "http://files.lan/web-arm64", Path: "/usr/bin/web", Mode: "0755",
					SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
				Ports:     []api.Port{{Name: "http", Port: 8080}, {Name: "metrics", Port: 0, Protocol: "tcp"}},
				Resources: api.Resources{MemoryLimit: "64M", CPULimit: "50%"},
				Readiness: &api.Probe{HTTP: "/healthz", HTTPPort: "http"},
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
		Spec:     api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"}}},
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
			Status: api.NodeStatus{Phase: phase, Since: ago(4 * time.Minute), Fenced: true, Address: addr, SSHAddress: addr + ":22", BoardFacts: api.BoardFacts{Arch: "arm64", Model: "Raspberry Pi 4 Model B", MemoryBytes: 4 << 30, CPUs: 4}, Version: "v0.1.0", Server: server,
				RaftAddress: map[bool]string{true: addr + ":7949"}[server],
				HostKey:     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl pi@" + name,
				Conditions:  []api.Condition{cond(api.ConditionReady, api.ConditionStatus(map[api.NodePhase]string{api.NodeReady: "True", api.NodeNotReady: "False"}[phase]), "Gossip", "member "+strings.ToLower(string(phase)), 4*time.Minute)},
			}}
	}
	// pi1 runs a herd that reports board facts (stock Pi OS: memory
	// controller off); pi2 an older one that reports none.
	pi1 := node("pi1", "10.0.0.11", true, api.NodeReady)
	pi1.Status.Model = "Raspberry Pi 4 Model B Rev 1.4"
	pi1.Status.ArchVariant, pi1.Status.KernelArch = "arm64", "aarch64"
	pi1.Status.Kernel, pi1.Status.Systemd = "6.6.51+rpt-rpi-v8", "252.30"
	pi1.Status.Cgroup, pi1.Status.CgroupControllers = "v2", []string{"cpu", "cpuset", "io", "pids"}
	pi1.Status.Devices = []string{"gpiochip0", "gpiochip1", "i2c-1", "spidev0.0", "ttyUSB0"}
	pi2 := node("pi2", "10.0.0.12", false, api.NodeNotReady)
	pi2.Spec.Unschedulable = true
	pi2.Status.MemoryBytes = 1536 << 20
	backup := &api.Job{Kind: api.KindJob,
		Metadata: api.ObjectMeta{Name: "backup", Generation: 1, ResourceVersion: 60, Created: ago(26 * time.Hour)},
		Spec: api.JobSpec{Schedule: "*-*-* 03:00:00", Concurrency: api.ConcurrencyForbid, Retries: intp(3),
			Template: api.PodTemplate{Exec: []string{"/usr/bin/tar", "-czf", "/var/backups/etc.tgz", "/etc"}, RestartPolicy: api.RestartNever}},
		Status: api.JobStatus{ObservedGeneration: 1, Phase: api.JobScheduled, Pod: "backup-x2b4z", Node: "pi2", PodsCreated: 1,
			Runs: []api.JobRun{
				{Pod: "backup-x2b4z", Node: "pi2", Start: ago(3 * time.Hour), End: ago(3*time.Hour - 42*time.Second), ExitStatus: 0, Result: "success"},
				{Pod: "backup-x2b4z", Node: "pi2", Start: ago(27 * time.Hour), End: ago(27*time.Hour - 5*time.Second), ExitStatus: 2, Result: "exit-code"},
			}}}
	migrate := &api.Job{Kind: api.KindJob,
		Metadata: api.ObjectMeta{Name: "migrate", Generation: 1, ResourceVersion: 61, Created: ago(time.Hour)},
		Spec: api.JobSpec{Concurrency: api.ConcurrencyForbid, Retries: intp(1),
			Template: api.PodTemplate{Exec: []string{"/opt/app/migrate"}, RestartPolicy: api.RestartNever}},
		Status: api.JobStatus{ObservedGeneration: 1, Phase: api.JobFailed, Failures: 2, PodsCreated: 2, Message: "failed 2 times (retries 1)",
			Runs: []api.JobRun{
				{Pod: "migrate-b8c9d", Node: "pi1", Start: ago(50 * time.Minute), End: ago(50*time.Minute - 12*time.Millisecond), ExitStatus: 9, Result: "signal"},
				{Pod: "migrate-a1b2c", Node: "pi1", Start: ago(time.Hour), Result: "lost"},
			}}}
	sample := &api.Job{Kind: api.KindJob,
		Metadata: api.ObjectMeta{Name: "sample", Generation: 1, ResourceVersion: 62, Created: ago(10 * time.Minute)},
		Spec: api.JobSpec{Schedule: "*:*:0/5", Concurrency: api.ConcurrencyAllow, Retries: intp(3),
			Template: api.PodTemplate{Exec: []string{"/usr/local/bin/sample"}, RestartPolicy: api.RestartNever}},
		Status: api.JobStatus{ObservedGeneration: 1, Phase: api.JobScheduled, Pod: "sample-k4m2p", Node: "pi1", PodsCreated: 1, ActiveRuns: 2,
			Runs: []api.JobRun{
				{Pod: "sample-k4m2p", Node: "pi1", Instance: "5a13121516714748a0daf3013541d694", Start: ago(20 * time.Second), End: ago(8 * time.Second), Result: "success"},
				{Pod: "sample-k4m2p", Node: "pi1", Instance: "509dc5d2fdb04954a6eaff4ef7fe0587", Start: ago(25 * time.Second), End: ago(13 * time.Second), Result: "success"},
			}}}
	return map[api.Kind][]api.Object{
		api.KindJob:        {backup, migrate, sample},
		api.KindDeployment: {api2, web},
		api.KindDaemon:     {exporter},
		api.KindPod:        pods,
		api.KindService:    {empty, svc},
		api.KindNode:       {pi1, pi2},
		api.KindSecret: {&api.Secret{Kind: api.KindSecret, Metadata: api.ObjectMeta{Name: "db", Created: testNow.Add(-2 * time.Hour)},
			Spec: api.SecretSpec{Data: map[string]api.SealedValue{
				"user":     {KeyID: "1a2b3c4d", Sealed: make([]byte, 43), Hash: "0f1e2d3c4b5a6978"},
				"password": {KeyID: "1a2b3c4d", Sealed: make([]byte, 56), Hash: "8796a5b4c3d2e1f0"},
			}}}},
	}
}

// loadFixtures puts every fixture into the store.
func (h *harness) loadFixtures() {
	for _, k := range api.Kinds {
		for _, o := range fixtures()[k] {
			h.put(o)
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
