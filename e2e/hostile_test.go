//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// The hostile scenarios' workloads. hostile-nobody runs as nobody on
// every board, with an exec readiness probe whose script nobody owns and a
// file under a directory nobody can write; hostile-secret (root) holds a
// secret in its environment; hostile-flood is what the flood test scales.
const (
	hostileSecret   = "hostile-s3cret-9f2c41"
	hostileSymFile  = "herd-hostile-sym.conf"
	hostileManifest = `
[[daemon]]
name = "hostile-nobody"
[daemon.template]
exec = ["/bin/sleep", "infinity"]
user = "nobody"
restart = "always"
[[daemon.template.files]]
path = "/srv/hostile-sym/sub/` + hostileSymFile + `"
content = "%s\n"
[daemon.template.readiness]
exec = ["/srv/hostile-probe/probe.sh"]
period_seconds = 1

[[daemon]]
name = "hostile-secret"
[daemon.template]
exec = ["/bin/sleep", "infinity"]
restart = "always"
env = { SECRET = "` + hostileSecret + `" }

[[deployment]]
name = "hostile-flood"
replicas = 1
[deployment.template]
exec = ["/bin/sleep", "infinity"]
restart = "always"
`
	// hostilePrep runs as root on every board before the apply: the
	// directories nobody owns and the probe script it owns (it records
	// the uid it runs as; exit 0 only once it wrote it).
	hostilePrep = `set -e
install -d -o nobody -g nogroup -m 0755 /srv/hostile-sym /srv/hostile-probe
rm -rf /srv/hostile-sym/* /srv/hostile-probe/uid.log /etc/` + hostileSymFile + `
printf '#!/bin/sh\nid -u >> /srv/hostile-probe/uid.log\n' > /srv/hostile-probe/probe.sh
chown nobody:nogroup /srv/hostile-probe/probe.sh
chmod 0755 /srv/hostile-probe/probe.sh
`
	// hostileTarget is the board the in-pod and worker attacks run on
	// (the worker).
	hostileTarget = "b4"
)

// httpPy makes one HTTP request from a board: argv METHOD URL-or-unix:PATH
// [BODY [HEADER=VALUE...]] (unix:SOCKET|/v1/PATH for a unix socket); prints the status code, or ERR and the error.
const httpPy = `import sys, socket, http.client
method, target = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 and sys.argv[3] else None
headers = dict(h.split("=", 1) for h in sys.argv[4:])
class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=5)
        self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(self.path_)
try:
    if target.startswith("unix:"):
        sock, path = target[len("unix:"):].split("|", 1)
        c = UnixConn(sock)
    else:
        hostport, path = target[len("http://"):].split("/", 1)
        c = http.client.HTTPConnection(hostport, timeout=5); path = "/" + path
    c.request(method, path, body=body, headers=headers)
    print(c.getresponse().status)
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// hostileApply is the JSON of an apply that would give its sender root on
// every board: a daemon without user.
const hostileApply = `{"objects":[{"kind":"daemons","metadata":{"name":"hostile-escalate"},"spec":{"template":{"exec":["/bin/sh","-c","id -u > /run/hostile-escalate; exec sleep infinity"]}}}]}`

// TestHostile runs the hostile-actor scenarios: an attacker inside a pod
// running as nobody, on a worker board with the worker's keys, on the lab
// network without keys, and in a browser. Each attempt must be refused and
// leave the cluster's objects and the boards' units as they were.
func TestHostile(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	tool, err := fleet.BuildHostileTool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range fleet.Boards {
		if _, err := fleet.SSH(ctx, b, hostilePrep, "sh -s"); err != nil {
			t.Fatalf("%s: preparing: %v", b, err)
		}
		if err := fleet.CopyTo(ctx, b, tool, "/usr/local/bin/hostiletool"); err != nil {
			t.Fatalf("%s: copying hostiletool: %v", b, err)
		}
	}
	applyHostile(t, ctx, "v1")
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		for _, o := range []string{"daemons/hostile-nobody", "daemons/hostile-secret", "deployments/hostile-flood",
			"daemons/hostile-escalate", "deployments/hostile-browser", "pods/hostile-forged"} {
			kind, name, _ := strings.Cut(o, "/")
			_, _ = fleet.Herdctl(ctx, viaExcept(), "", "delete", kind, name)
		}
	})
	waitHostilePods(t, ctx)

	scenarios := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a_pod_user", testHostilePodUser},
		{"b_worker", testHostileWorker},
		{"c_stranger", testHostileStranger},
		{"d_browser", testHostileBrowser},
		{"e_symlink", testHostileSymlink},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			sc.run(t)
			t.Logf("%s took %.1fs", sc.name, time.Since(start).Seconds())
		})
	}
}

func applyHostile(t *testing.T, ctx context.Context, content string) {
	t.Helper()
	path := filepath.Join(fleet.Dir, "hostile.toml")
	if err := os.WriteFile(path, fmt.Appendf(nil, hostileManifest, content), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet.Herdctl(ctx, viaExcept(), "", "apply", "-f", path); err != nil {
		t.Fatalf("apply hostile workloads: %v\n%s", err, out)
	}
}

// hostilePod is the pod of the daemon owner on board.
func hostilePod(s Snapshot, owner, board string) *api.Pod {
	for i, p := range s.Pods {
		if p.Spec.Owner.Name == owner && p.Spec.Node == board && p.Status.Phase != api.PodFailed && p.Status.Phase != api.PodLost {
			return &s.Pods[i]
		}
	}
	return nil
}

// waitHostilePods waits until both daemons run on every board, Ready, and
// hostile-flood has its pod.
func waitHostilePods(t *testing.T, ctx context.Context) {
	t.Helper()
	err := Poll(ctx, 250*time.Millisecond, "the hostile workloads Ready", func(ctx context.Context) (bool, string) {
		s, err := fleet.Snapshot(ctx, viaExcept())
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, b := range fleet.Boards {
			for _, d := range []string{"hostile-nobody", "hostile-secret"} {
				if p := hostilePod(s, d, b); p == nil || p.Status.Phase != api.PodRunning || !p.Status.Ready {
					bad = append(bad, d+"@"+b)
				}
			}
		}
		if n := len(s.OwnedPods("hostile-flood")); n == 0 {
			bad = append(bad, "hostile-flood")
		}
		return len(bad) == 0, "not Ready: " + strings.Join(bad, " ")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkUnchanged fails t when the cluster state differs from before.
func checkUnchanged(t *testing.T, ctx context.Context, what string, before ClusterState) {
	t.Helper()
	after, err := fleet.State(ctx, viaExcept())
	if err != nil {
		t.Fatalf("state after %s: %v", what, err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("%s changed the cluster (-before +after):\n%s", what, d)
	}
}

// state is the cluster state once it is quiet: two reads in a row agree
// (an earlier attack that worked may still be rolling out; its effect must
// not be charged to the next one).
func state(t *testing.T, ctx context.Context) ClusterState {
	t.Helper()
	var prev, cur ClusterState
	err := Poll(ctx, time.Second, "a quiet cluster state", func(ctx context.Context) (bool, string) {
		s, err := fleet.State(ctx, viaExcept())
		if err != nil {
			return false, err.Error()
		}
		prev, cur = cur, s
		if prev.Objects == nil {
			return false, "first read"
		}
		if d := cmp.Diff(prev, cur); d != "" {
			return false, "still changing: " + d
		}
		return true, ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// A. From inside a pod running as nobody on the worker.
func testHostilePodUser(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	b := hostileTarget
	before := state(t, ctx)
	asNobody := func(board, stdin, cmd string) string {
		t.Helper()
		out, err := fleet.AsUser(ctx, board, "nobody", stdin, cmd)
		if err != nil {
			t.Fatalf("as nobody on %s: %s: %v", board, cmd, err)
		}
		return strings.TrimSpace(out)
	}
	req := func(board, method, target, body string, headers ...string) string {
		args := []string{"python3", "-", method, target, body}
		args = append(args, headers...)
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shQuote(a)
		}
		return asNobody(board, httpPy, strings.Join(quoted, " "))
	}
	// The API attempts run on the worker and on a server (where state
	// lives: a worker's API answers 503 for it either way).
	apiBoards := []string{b, "b2"}

	t.Run("api_tcp", func(t *testing.T) {
		for _, board := range apiBoards {
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/v1/pods", ""},
				{"POST", "/v1/apply", hostileApply},
			} {
				got := req(board, c.method, fmt.Sprintf("http://127.0.0.1:%d%s", apiPort, c.path), c.body, "Content-Type=application/json")
				if got != "401" {
					t.Errorf("nobody on %s: %s http://127.0.0.1:%d%s without a token: %s, want 401", board, c.method, apiPort, c.path, got)
				}
			}
		}
	})
	t.Run("api_socket", func(t *testing.T) {
		for _, board := range apiBoards {
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/v1/pods", ""},
				{"POST", "/v1/apply", hostileApply},
			} {
				got := req(board, c.method, "unix:/run/herd/api.sock|"+c.path, c.body, "Content-Type=application/json")
				// Refused: the socket is not open to nobody, or the API
				// answers 401 (peer credentials stand in for root only).
				if !strings.HasPrefix(got, "ERR PermissionError") && !strings.HasPrefix(got, "ERR FileNotFoundError") && got != "401" && got != "403" {
					t.Errorf("nobody on %s: %s %s on /run/herd/api.sock: %s, want a permission error or 401/403", board, c.method, c.path, got)
				} else {
					t.Logf("nobody on %s: %s %s on /run/herd/api.sock: %s", board, c.method, c.path, got)
				}
			}
		}
	})
	t.Run("keys", func(t *testing.T) {
		for _, board := range []string{b, "b1"} {
			files, err := fleet.SSH(ctx, board, "", "find /etc/herd /var/lib/herd /root -type f 2>/dev/null; true")
			if err != nil {
				t.Fatal(err)
			}
			var secret []string
			for _, f := range strings.Fields(files) {
				// Public keys and agent.toml (paths and addresses, no
				// secret) may be world-readable.
				if strings.HasSuffix(f, ".pub") || f == "/etc/herd/agent.toml" {
					continue
				}
				secret = append(secret, shQuote(f))
			}
			if len(secret) == 0 {
				t.Fatalf("%s: no files in /etc/herd /var/lib/herd /root", board)
			}
			out, err := fleet.AsUser(ctx, board, "nobody", "", "for f in "+strings.Join(secret, " ")+`; do head -c1 "$f" >/dev/null 2>&1 && echo "$f"; done; true`)
			if err != nil {
				t.Fatal(err)
			}
			if out = strings.TrimSpace(out); out != "" {
				t.Errorf("%s: nobody reads %s", board, strings.ReplaceAll(out, "\n", ", "))
			}
		}
	})
	t.Run("other_pod_env", func(t *testing.T) {
		s, err := fleet.Snapshot(ctx, viaExcept())
		if err != nil {
			t.Fatal(err)
		}
		p := hostilePod(s, "hostile-secret", b)
		if p == nil || p.Status.Unit == "" {
			t.Fatalf("no hostile-secret pod with a unit on %s", b)
		}
		// The secret is there (so not finding it means something).
		if out, err := fleet.SSH(ctx, b, "", "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value "+p.Status.Unit+")/environ"); err != nil || !strings.Contains(out, "SECRET="+hostileSecret) {
			t.Fatalf("%s: %s's process does not have SECRET in its environment (%v)", b, p.Status.Unit, err)
		}
		out := asNobody(b, "", "grep -r -D skip "+hostileSecret+" /etc /run /var/lib/herd /srv 2>/dev/null; systemctl show -p Environment "+p.Status.Unit+
			"; systemctl cat "+p.Status.Unit+" 2>/dev/null; cat /proc/$(systemctl show -p MainPID --value "+p.Status.Unit+")/environ 2>/dev/null; true")
		if strings.Contains(out, hostileSecret) {
			t.Errorf("nobody on %s sees hostile-secret's SECRET:\n%s", b, out)
		}
	})
	checkUnchanged(t, ctx, "the in-pod API, key and environment attempts", before)

	t.Run("exec_probe", func(t *testing.T) {
		out, err := fleet.SSH(ctx, b, "", "cat /srv/hostile-probe/uid.log")
		if err != nil {
			t.Fatalf("%s: the probe of hostile-nobody (Ready) left no uid log: %v", b, err)
		}
		uids := strings.Fields(out)
		if len(uids) == 0 {
			t.Fatalf("%s: the probe of hostile-nobody recorded nothing", b)
		}
		for _, u := range uids {
			if u != "65534" {
				t.Errorf("%s: the exec probe of a pod with user = nobody ran as uid %s (all: %v), want 65534 (nobody) only", b, u, uids)
				break
			}
		}
	})
}

// B. From the worker board, as root, with everything the worker holds.
func testHostileWorker(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	b := hostileTarget
	var raftAddrs []string
	for _, s := range fleet.ServerBoards() {
		raftAddrs = append(raftAddrs, fmt.Sprintf("%s:%d", BoardIP(s), raftPort))
	}
	keyFiles := func(board string) []string {
		t.Helper()
		out, err := fleet.SSH(ctx, board, "", "find /etc/herd /var/lib/herd /root/.ssh /etc/ssh -type f 2>/dev/null; true")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)
	}
	forge := func(board string, probe bool) []map[string]any {
		t.Helper()
		cmd := "hostiletool forge -addrs " + strings.Join(raftAddrs, ",") + " -keys " + shQuote(strings.Join(keyFiles(board), ","))
		if probe {
			cmd += " -probe"
		}
		out, err := fleet.SSH(ctx, board, "", cmd)
		if err != nil {
			t.Fatal(err)
		}
		res, err := JSONLines(out)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Control: from a server with the server's own keys the tool gets
	// through the handshake (a harmless op the leader refuses), so a
	// refusal on the worker is the worker's keys, not the tool.
	answered := map[any]bool{}
	for _, r := range forge("b1", true) {
		if r["result"] == "answered" {
			answered[r["addr"]] = true
		}
	}
	if len(answered) != len(raftAddrs) {
		t.Fatalf("control: from b1 with its keys, hostiletool passed the handshake of %d of %v: it no longer speaks raftstore's transport", len(answered), raftAddrs)
	}

	before := state(t, ctx)
	t.Run("forged_forward", func(t *testing.T) {
		for _, r := range forge(b, false) {
			if r["result"] == "answered" {
				t.Errorf("%s: a forwarded write with %s to %s was answered: %s", b, r["key"], r["addr"], r["reply"])
			}
		}
		if _, err := fleet.Herdctl(ctx, viaExcept(), "", "--timeout", "5s", "get", "pods", "hostile-forged"); err == nil {
			t.Errorf("the forged pod hostile-forged exists")
		}
	})
	t.Run("ssh", func(t *testing.T) {
		var keys []string
		for _, f := range keyFiles(b) {
			if out, err := fleet.SSH(ctx, b, "", "ssh-keygen -y -f "+shQuote(f)+" >/dev/null 2>&1 && echo ok"); err == nil && strings.TrimSpace(out) == "ok" {
				keys = append(keys, f)
			}
		}
		t.Logf("%s holds private keys: %v", b, keys)
		for _, target := range fleet.Boards {
			if target == b {
				continue
			}
			// root, and the executor account the cluster key is for.
			for _, k := range keys {
				for _, user := range []string{"root", "herd-exec"} {
					opts := "-i " + shQuote(k) + " -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=3 -o LogLevel=ERROR"
					out, _ := fleet.SSH(ctx, b, "", "ssh "+opts+" "+user+"@"+BoardIP(target)+" 'echo HOSTILE-SHELL; id -u' 2>&1; "+
						"echo 'put /etc/hostname /root/hostile-sftp' | sftp -b - "+opts+" "+user+"@"+BoardIP(target)+" >/dev/null 2>&1; true")
					if strings.Contains(out, "HOSTILE-SHELL") {
						t.Errorf("%s: a shell as %s on %s with %s:\n%s", b, user, target, k, out)
					}
					if _, err := fleet.SSH(ctx, target, "", "test ! -e /root/hostile-sftp"); err != nil {
						t.Errorf("%s: sftp as %s onto %s with %s wrote /root/hostile-sftp", b, user, target, k)
						_, _ = fleet.SSH(ctx, target, "", "rm -f /root/hostile-sftp")
					}
				}
			}
		}
	})
	checkUnchanged(t, ctx, "the worker's attempts", before)
}

// C. From a host on the lab network without keys.
func testHostileStranger(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	if err := fleet.StartStranger(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.StopStranger(testCtx(t, 30*time.Second)) })
	tool := filepath.Join(fleet.Dir, "hostiletool")
	var raftAddrs []string
	for _, s := range fleet.ServerBoards() {
		raftAddrs = append(raftAddrs, fmt.Sprintf("%s:%d", BoardIP(s), raftPort))
	}
	before := state(t, ctx)

	t.Run("api_lan", func(t *testing.T) {
		for _, board := range fleet.Boards {
			out, err := fleet.Stranger(ctx, httpPy, "python3", "-", "GET", fmt.Sprintf("http://%s:%d/v1/pods", BoardIP(board), apiPort))
			if err != nil {
				t.Fatal(err)
			}
			if out = strings.TrimSpace(out); !strings.HasPrefix(out, "ERR") && out != "401" {
				t.Errorf("GET http://%s:%d/v1/pods from the LAN without a token: %s, want no listener or 401", BoardIP(board), apiPort, out)
			}
		}
	})
	t.Run("raft_rpc", func(t *testing.T) {
		out, err := fleet.Stranger(ctx, "", tool, "raft", "-addrs", strings.Join(raftAddrs, ","))
		if err != nil {
			t.Fatal(err)
		}
		res, err := JSONLines(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(raftAddrs) {
			t.Fatalf("raft: %d reports for %d servers", len(res), len(raftAddrs))
		}
		for _, r := range res {
			if r["result"] != "refused" {
				t.Errorf("a Raft RPC with a random key to %s: %s (%v), want refused", r["addr"], r["result"], r["err"])
			}
		}
	})
	t.Run("gossip_join", func(t *testing.T) {
		for _, key := range []string{"none", "random"} {
			cmd := fleet.StrangerCmd(ctx, tool, "gossip", "-join", BoardIP("b1")+":7946", "-bind", StrangerIP, "-key", key, "-for", "4s")
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// While the stranger stays around, the cluster never lists it.
			tick := time.NewTicker(500 * time.Millisecond)
		watch:
			for {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("gossip -key %s: %v", key, err)
					}
					break watch
				case <-tick.C:
					if nodes, err := fleet.Nodes(ctx, viaExcept()); err == nil {
						for _, n := range nodes {
							if n.Metadata.Name == "stranger" {
								t.Errorf("gossip -key %s: the stranger is a node: %+v", key, n.Status)
							}
						}
					}
				}
			}
			tick.Stop()
			res, err := JSONLines(stdout.String())
			if err != nil || len(res) != 1 {
				t.Fatalf("gossip -key %s: %q: %v", key, stdout.String(), err)
			}
			if j, _ := res[0]["joined"].(float64); j != 0 {
				t.Errorf("gossip -key %s: joined %v members; it sees %v", key, j, res[0]["members"])
			} else {
				t.Logf("gossip -key %s: refused (%v)", key, res[0]["err"])
			}
		}
	})
	checkUnchanged(t, ctx, "the stranger's API, Raft and gossip attempts", before)

	t.Run("handshake_flood", func(t *testing.T) {
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		flood := fleet.StrangerCmd(fctx, tool, "flood", "-addrs", strings.Join(raftAddrs, ","), "-n", "200", "-for", "60s")
		flood.Stdout, flood.Stderr = io.Discard, io.Discard
		if err := flood.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = flood.Wait() }()
		leader := waitLeader(t, ctx, viaExcept())
		follower := viaExcept(leader)
		// The flood is on: the leader sees the stranger's connections.
		err := Poll(ctx, 250*time.Millisecond, "the flood's connections on "+leader, func(ctx context.Context) (bool, string) {
			out, err := fleet.SSH(ctx, leader, "", fmt.Sprintf("ss -Htn state established '( sport = :%d and dst %s )' | wc -l", raftPort, StrangerIP))
			if err != nil {
				return false, err.Error()
			}
			n := strings.TrimSpace(out)
			return n != "0" && len(n) >= 2, n + " connections"
		})
		if err != nil {
			t.Fatal(err)
		}
		// Writes forwarded from a follower still commit, each in time.
		for _, n := range []int{2, 1, 2, 1} {
			t0 := time.Now()
			out, err := fleet.Herdctl(ctx, follower, "", "--timeout", "10s", "scale", "deployment", "hostile-flood", "--replicas", fmt.Sprint(n))
			if err != nil {
				t.Errorf("during the flood: scale hostile-flood to %d through %s (leader %s): %v\n%s", n, follower, leader, err, out)
				continue
			}
			t.Logf("during the flood: scale to %d through %s committed in %.2fs", n, follower, time.Since(t0).Seconds())
		}
	})
}

// D. Browser-shaped requests with a valid token: the header alone is what
// is refused.
func testHostileBrowser(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	token := fleet.Token()
	if token == "" {
		t.Logf("the herdctl context has no API token (main before issue 8): sending none")
	}
	addr, err := fleet.forwardAddr(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	own := fmt.Sprintf("127.0.0.1:%d", apiPort)
	do := func(method, path, body string, hdr map[string]string) (int, string) {
		t.Helper()
		var rd io.Reader
		if method != http.MethodGet {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = own
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	apply := `{"objects":[{"kind":"deployments","metadata":{"name":"hostile-browser"},"spec":{"replicas":1,"template":{"exec":["/bin/sleep","infinity"]}}}]}`
	jsonCT := map[string]string{"Content-Type": "application/json"}
	// Control: the same request, well-formed, is accepted (a dry run).
	if code, body := do("POST", "/v1/apply?dryRun=1", apply, jsonCT); code/100 != 2 {
		t.Fatalf("control: POST /v1/apply?dryRun=1 with the token and JSON: %d %s", code, body)
	}
	before := state(t, ctx)
	for _, c := range []struct {
		name, method, path string
		hdr                map[string]string
	}{
		{"text_plain", "POST", "/v1/apply", map[string]string{"Content-Type": "text/plain"}},
		{"form", "POST", "/v1/apply", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{"foreign_origin", "POST", "/v1/apply", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}},
		{"rebinding_host_write", "POST", "/v1/apply", map[string]string{"Content-Type": "application/json", "Host": "evil.example"}},
		{"rebinding_host_read", "GET", "/v1/pods", map[string]string{"Host": "evil.example:7948"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(c.method, c.path, apply, c.hdr)
			if code/100 != 4 {
				t.Errorf("%s %s with %v and a valid token: %d %.300s, want 4xx", c.method, c.path, c.hdr, code, body)
			}
		})
	}
	checkUnchanged(t, ctx, "the browser-shaped requests", before)
}

// E. The symlink redirect (last: it rolls hostile-nobody out again). The
// pod user replaces the parent directory of its pod's file with a symlink
// to /etc; root's rewrite must not land there, and the pod gets a
// condition naming the symlink.
func testHostileSymlink(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	b := hostileTarget
	asNobody := func(cmd string) {
		t.Helper()
		if out, err := fleet.AsUser(ctx, b, "nobody", "", cmd); err != nil {
			t.Fatalf("as nobody on %s: %s: %v\n%s", b, cmd, err, out)
		}
	}
	etcBefore, err := fleet.SSH(ctx, b, "", "ls -A /etc")
	if err != nil {
		t.Fatal(err)
	}
	asNobody("cd /srv/hostile-sym && mv sub sub.old && ln -s /etc sub")
	applyHostile(t, ctx, "v2")
	// Root's rewrite either lands in /etc (the attack worked) or the
	// pod gets a condition saying why it was refused.
	var cond string
	err = Poll(ctx, 250*time.Millisecond, "the rewrite of hostile-nobody's file on "+b, func(ctx context.Context) (bool, string) {
		if _, err := fleet.SSH(ctx, b, "", "test -e /etc/"+hostileSymFile); err == nil {
			return true, ""
		}
		s, err := fleet.Snapshot(ctx, viaExcept())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range s.Pods {
			if p.Spec.Owner.Name != "hostile-nobody" || p.Spec.Node != b {
				continue
			}
			for _, c := range p.Status.Conditions {
				m := strings.ToLower(c.Message)
				if c.Reason == "FileRefused" && (strings.Contains(m, "symbolic link") || strings.Contains(m, "symlink")) {
					cond = fmt.Sprintf("%s %s=%s: %s", p.Metadata.Name, c.Type, c.Status, c.Message)
					return true, ""
				}
			}
		}
		return false, "no /etc/" + hostileSymFile + ", no symlink condition"
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := fleet.SSH(ctx, b, "", "cat /etc/"+hostileSymFile); err == nil {
		t.Errorf("%s: root followed nobody's symlink and wrote /etc/%s: %q", b, hostileSymFile, strings.TrimSpace(out))
	}
	if cond == "" {
		t.Errorf("%s: hostile-nobody has no condition naming the symlink", b)
	} else {
		t.Logf("refused with: %s", cond)
	}
	etcAfter, err := fleet.SSH(ctx, b, "", "rm -f /etc/"+hostileSymFile+"; ls -A /etc")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(etcBefore, etcAfter); d != "" {
		t.Errorf("%s: /etc changed (-before +after):\n%s", b, d)
	}
}
