//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/artifact"
)

// labHostIP is the host's address on the lab bridge (HOST_IP in
// scripts/lab.d/common.sh): the boards reach it, nothing outside does.
const labHostIP = "10.77.0.1"

// artifactBoard is the board TestArtifacts pins its pods to: the worker.
const artifactBoard = "b4"

// artifactScript is the artifact TestArtifacts serves: a program that
// says it ran and stays up.
const artifactScript = "#!/bin/sh\necho artifact-ok\nexec sleep 3600\n"

// fileServer serves named files over HTTP on the lab bridge and counts
// the requests per path.
type fileServer struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	files map[string]string
	hits  map[string]int
}

func startFileServer(t *testing.T, files map[string]string) *fileServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(labHostIP, "0"))
	if err != nil {
		t.Fatalf("listen on the lab bridge: %v", err)
	}
	fs := &fileServer{files: files, hits: map[string]int{}, url: "http://" + l.Addr().String()}
	fs.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.hits[r.URL.Path]++
		body, ok := fs.files[r.URL.Path]
		fs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	})}
	go fs.srv.Serve(l)
	t.Cleanup(func() { fs.srv.Close() })
	return fs
}

func (fs *fileServer) hitsOf(path string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.hits[path]
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// artifactManifest is a one-pod deployment on artifactBoard running the
// artifact it places at path.
func artifactManifest(name, url, sum, path string) string {
	return fmt.Sprintf(`[[deployment]]
name = %q
replicas = 1
[deployment.template]
exec = [%q]
user = "nobody"
node_selector = { "herd.dev/node" = %q }
[[deployment.template.artifacts]]
url = %q
sha256 = %q
path = %q
mode = "0705"
`, name, path, artifactBoard, url, sum, path)
}

// ownedPod waits until owner has a pod for which cond holds and returns it.
func ownedPod(ctx context.Context, t *testing.T, via, owner, what string, cond func(p api.Pod) bool) api.Pod {
	t.Helper()
	var found api.Pod
	err := Poll(ctx, 200*time.Millisecond, what, func(ctx context.Context) (bool, string) {
		pods, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, p := range pods {
			if p.Spec.Owner.Name != owner {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s@%s %s %q %v", p.Metadata.Name, p.Spec.Node, p.Status.Phase, p.Status.Message, p.Status.Conditions))
			if cond(p) {
				found = p
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func artifactCondition(p api.Pod) *api.Condition {
	for i, c := range p.Status.Conditions {
		if c.Type == controller.ConditionArtifactsFetched {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestArtifacts serves a small script from the host over HTTP on the lab
// bridge and checks the board side of artifacts:
//
//  1. a deployment with the right sha256 runs: the script is on the board
//     with its mode, root-owned, and its cache entry is there (0600 in a
//     0700 directory);
//  2. a deployment with a wrong sha256 is not Running, its condition
//     ArtifactsFetched=False says ArtifactMismatch (herdctl describe pod
//     shows it), nothing is installed, and the board backs off instead of
//     asking the server again every second;
//  3. with the file server stopped, a new pod whose artifact the board has
//     cached runs (no network needed), and one whose artifact is not cached
//     shows ArtifactUnreachable.
//
// Run it alone with: go test -tags e2e -count=1 -run TestArtifacts -v ./e2e/
func TestArtifacts(t *testing.T) {
	ctx := testCtx(t, 6*time.Minute)
	via := viaExcept()
	names := []string{"art-ok", "art-bad", "art-cached", "art-down"}
	t.Cleanup(func() {
		ctx := testCtx(t, 2*time.Minute)
		for _, name := range names {
			_, _ = fleet.Herdctl(ctx, via, "", "delete", "deployments", name, "--ignore-not-found")
		}
		_, _ = fleet.SSH(ctx, artifactBoard, "", "rm -rf /opt/herd-e2e "+artifact.CacheDir)
	})
	fs := startFileServer(t, map[string]string{"/hello.sh": artifactScript})
	started := time.Now()
	good := sha256Hex(artifactScript)

	// 1. The right hash.
	if out, err := fleet.Herdctl(ctx, via, artifactManifest("art-ok", fs.url+"/hello.sh", good, "/opt/herd-e2e/ok.sh"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply art-ok: %v\n%s", err, out)
	}
	ok := ownedPod(ctx, t, via, "art-ok", "art-ok running", func(p api.Pod) bool { return p.Status.Phase == api.PodRunning })
	if ok.Spec.Node != artifactBoard {
		t.Fatalf("art-ok on %s, want %s", ok.Spec.Node, artifactBoard)
	}
	out, err := fleet.SSH(ctx, artifactBoard, "", fmt.Sprintf(
		"stat -c '%%a %%U %%s' /opt/herd-e2e/ok.sh && stat -c '%%a %%U' %s %s/%s && sha256sum < /opt/herd-e2e/ok.sh && journalctl --no-pager -o cat -u %s",
		artifact.CacheDir, artifact.CacheDir, good, api.UnitName(ok.Metadata.Name)))
	if err != nil {
		t.Fatalf("inspect %s: %v\n%s", artifactBoard, err, out)
	}
	t.Logf("on %s:\n%s", artifactBoard, out)
	lines := strings.Split(out, "\n")
	want := []string{fmt.Sprintf("705 root %d", len(artifactScript)), "700 root", "600 root", good + "  -"}
	for i, w := range want {
		if i >= len(lines) || strings.TrimSpace(lines[i]) != w {
			t.Errorf("line %d on the board = %q, want %q", i, lines[min(i, len(lines)-1)], w)
		}
	}
	if !strings.Contains(out, "artifact-ok") {
		t.Errorf("the artifact did not run as the pod's process: journal\n%s", out)
	}

	// 2. A wrong hash: the server's file is not what the manifest says.
	bad := sha256Hex("something else")
	if out, err := fleet.Herdctl(ctx, via, artifactManifest("art-bad", fs.url+"/hello.sh", bad, "/opt/herd-e2e/bad.sh"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply art-bad: %v\n%s", err, out)
	}
	badPod := ownedPod(ctx, t, via, "art-bad", "art-bad with ArtifactsFetched=False (ArtifactMismatch)", func(p api.Pod) bool {
		c := artifactCondition(p)
		return c != nil && c.Status == api.ConditionFalse && c.Reason == "ArtifactMismatch"
	})
	c := artifactCondition(badPod)
	if badPod.Status.Phase == api.PodRunning {
		t.Errorf("art-bad is Running")
	}
	if !strings.Contains(c.Message, "want "+bad) || !strings.Contains(c.Message, good) {
		t.Errorf("condition message %q does not name the hash wanted (%s) and the one downloaded (%s)", c.Message, bad, good)
	}
	desc, _ := fleet.Herdctl(ctx, via, "", "describe", "pod", badPod.Metadata.Name)
	t.Logf("herdctl describe pod %s:\n%s", badPod.Metadata.Name, desc)
	if !strings.Contains(string(desc), "ArtifactMismatch") {
		t.Errorf("herdctl describe pod does not show ArtifactMismatch")
	}
	if out, err := fleet.SSH(ctx, artifactBoard, "", "test ! -e /opt/herd-e2e/bad.sh && test ! -e "+artifact.CacheDir+"/"+bad+" && echo absent"); err != nil || !strings.Contains(out, "absent") {
		t.Errorf("a mismatched artifact was installed or cached: %v %s", err, out)
	}

	// 3. The file server goes away.
	if err := fs.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
	// Between the first request for the wrong hash and now, the board
	// asked again at most once per backoff period (10 s, doubling):
	// never every second, as systemd's restarts alone would.
	elapsed := time.Since(started)
	if n, max := fs.hitsOf("/hello.sh"), 2+int(elapsed/artifact.BackoffBase); n > max {
		t.Errorf("the server saw %d requests in %v (the good one and the bad one's retries), want at most %d", n, elapsed.Round(time.Second), max)
	}
	t.Logf("requests for /hello.sh in %v: %d", elapsed.Round(time.Second), fs.hitsOf("/hello.sh"))

	if out, err := fleet.Herdctl(ctx, via, artifactManifest("art-cached", fs.url+"/hello.sh", good, "/opt/herd-e2e/cached.sh"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply art-cached: %v\n%s", err, out)
	}
	ownedPod(ctx, t, via, "art-cached", "art-cached running from the cache", func(p api.Pod) bool { return p.Status.Phase == api.PodRunning })

	down := sha256Hex("never served")
	if out, err := fleet.Herdctl(ctx, via, artifactManifest("art-down", fs.url+"/other.sh", down, "/opt/herd-e2e/down.sh"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply art-down: %v\n%s", err, out)
	}
	downPod := ownedPod(ctx, t, via, "art-down", "art-down with ArtifactsFetched=False (ArtifactUnreachable)", func(p api.Pod) bool {
		c := artifactCondition(p)
		return c != nil && c.Reason == "ArtifactUnreachable"
	})
	t.Logf("art-down: %s %q", downPod.Status.Phase, artifactCondition(downPod).Message)
}
