package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// These tests make herdctl build its client itself (newClient) from the
// addresses and token it is given, as it does in production, rather than
// being handed one to the harness's API.

// startAgent makes herdctl connect to the addresses it is given, with the
// harness's token in HERD_TOKEN, and returns the harness API's address.
func startAgent(t *testing.T, h *harness) string {
	t.Helper()
	h.realClient = true
	h.env["HERD_TOKEN"] = harnessToken
	return h.url
}

func TestHTTPEndToEnd(t *testing.T) {
	h := newHarness(t)
	url := startAgent(t, h)
	h.loadFixtures()
	// The first address is down: herdctl moves on to the next.
	h.env["HERD_ADDR"] = "http://" + testutil.FreeAddr(t) + "," + url

	out, _ := h.mustRun(0, "get", "pods", "-o", "wide")
	golden(t, "get_pods_wide.golden", out)

	out, _ = h.mustRun(0, "describe", "deploy", "web")
	for _, want := range []string{"Name:                 web\n", "  web-zz81p   <none>   Pending", "  Available     False    MinimumReplicasUnavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}

	h.stdin = deploymentTOML("api", `app = "api"`) + serviceTOML("api", "http")
	out, _ = h.mustRun(0, "apply", "-f", "-")
	if out != "deployment/api created\nservice/api created\n" {
		t.Errorf("apply: %q", out)
	}
	out, _ = h.mustRun(0, "apply", "-f", "-", "--dry-run")
	if out != "deployment/api unchanged (server dry run)\nservice/api unchanged (server dry run)\n" {
		t.Errorf("apply --dry-run: %q", out)
	}
	h.stdin = deploymentTOML("api", `app = "api", v = "2"`)
	out, _ = h.mustRun(0, "diff", "-f", "-")
	if out != "deployment/api configured\n  + metadata.labels.v: \"2\"\n" {
		t.Errorf("diff: %q", out)
	}

	out, _ = h.mustRun(0, "scale", "deploy/api", "--replicas", "4")
	if out != "deployment/api scaled to 4\n" {
		t.Errorf("scale: %q", out)
	}
	if d := h.getTyped(api.KindDeployment, "api").(*api.Deployment); *d.Spec.Replicas != 4 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}

	out, errOut := h.mustRun(1, "delete", "svc", "api", "nope")
	if out != "service/api deleted\n" || errOut != "error: service/nope not found\n" {
		t.Errorf("delete: %q %q", out, errOut)
	}

	h.setStatus(api.ClusterStatus{Node: "pi1", Leader: "pi1", Version: "v9"})
	out, _ = h.mustRun(0, "version")
	if out != "Client Version: dev\nServer Version: v9\n" {
		t.Errorf("version: %q", out)
	}

	// A wrong token is the server's error, exit 1.
	h.env["HERD_TOKEN"] = "wrong-token-0123456789"
	_, errOut = h.mustRun(1, "get", "pods")
	if !strings.Contains(errOut, "error: invalid bearer token") {
		t.Errorf("wrong token: %q", errOut)
	}
	// A token on argv is a usage error pointing to the other ways.
	_, errOut = h.mustRun(2, "get", "pods", "--token", "whatever-0123456789")
	if !strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, "HERD_TOKEN") {
		t.Errorf("--token: %q, want a usage error naming --token-file and HERD_TOKEN", errOut)
	}
}

func TestHTTPWatchAndWait(t *testing.T) {
	h := newHarness(t)
	url := startAgent(t, h)
	h.setOnWatch(func(n int) {
		// The first watch is apply --wait's: roll the deployment out.
		if d, ok := h.getTyped(api.KindDeployment, "web").(*api.Deployment); ok && d.Status.AvailableReplicas == 0 {
			h.put(rolledOut(d, 1))
		}
	})
	h.stdin = deploymentTOML("web", "")
	out, _ := h.mustRun(0, "--addr", url, "apply", "-f", "-", "--wait")
	want := "deployment/web created\ndeployment/web: waiting for generation 1 to be observed (observed 0)\ndeployment/web: rolled out: 1 of 1 replicas available\n"
	if out != want {
		t.Errorf("apply --wait:\n%s\nwant:\n%s", out, want)
	}

	h.setOnWatch(func(int) {
		h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi9"}, Status: api.NodeStatus{Phase: api.NodeReady}})
	})
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- h.runTo(&stdout, &stderr, "--addr", url, "get", "nodes", "-w") }()
	testutil.Until(t, 10*time.Second, "the watched node", func() bool { return strings.Contains(stdout.String(), "pi9") })
	h.cancel()
	if code := <-done; code != 0 {
		t.Fatalf("get -w: exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stderr.String(), "No resources found.\n") {
		t.Errorf("stderr %q", stderr.String())
	}
	if want := "NAME   STATUS   ROLES    ADDRESS   ARCH     AGE\npi9    Ready    worker   <none>    <none>   1h\n"; stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// TestGetStale: without a leader, get fails (reads are linearizable) and
// get --stale reads the agent's own copy.
func TestGetStale(t *testing.T) {
	h := newHarness(t)
	h.env["HERD_ADDR"] = startAgent(t, h)
	h.loadFixtures()
	h.store.SetLeader(false)

	for _, args := range [][]string{{"get", "deploy", "web"}, {"get", "deploy"}} {
		code, _, errOut := h.run(args...)
		if code != 1 || !strings.Contains(errOut, "no leader") {
			t.Errorf("herdctl %s without a leader: exit %d, stderr %q; want 1 and \"no leader\"", strings.Join(args, " "), code, errOut)
		}
		out, _ := h.mustRun(0, append(args, "--stale")...)
		if !strings.Contains(out, "web") {
			t.Errorf("herdctl %s --stale: %q lacks web", strings.Join(args, " "), out)
		}
	}
}
