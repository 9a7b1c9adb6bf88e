//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// vmBoard is the suite's arm64 VM board: `scripts/lab up 5 --vm 1` makes
// b5 a full-system arm64 VM (qemu-system-aarch64, Debian's kernel, systemd
// as PID 1) set up like stock Raspberry Pi OS Lite: user pi with
// passwordless sudo, PermitRootLogin no, cgroup_disable=memory.
const vmBoard = "b5"

// TestVMBoard runs after TestUpgrade (files in name order), on the fleet
// it left (b1-b3 servers; b4 removed from the cluster). Set HERD_E2E_VM=0
// to skip it (no qemu-system-aarch64 here, or no time for TCG boots).
//
// b5 is powered on as an arm64 VM board; `herdctl bootstrap --add pi@b5`
// installs herd as pi through sudo (root login refused); its node says
// arm64 and warns that memory limits are not enforced. A deployment of one
// pod per board places a pod there that runs under the VM's own systemd
// and kernel. Power pulled on b5: its pod is replaced on the other boards;
// power back: b5 is fenced (no stale unit left running) and the boards run
// exactly the declared count. Then a daemon for arm64 boards runs on b5 and
// `herdctl upgrade --dist` rolls a new herd onto every board, the VM
// included, with no unit restarted.
func TestVMBoard(t *testing.T) {
	if os.Getenv("HERD_E2E_VM") == "0" {
		t.Skip("HERD_E2E_VM=0")
	}
	ctx := testCtx(t, 20*time.Minute)
	boards := []string{"b1", "b2", "b3", vmBoard}

	t0 := time.Now()
	if out, err := fleet.Lab(ctx, "up", "5", "--vm", "1"); err != nil {
		t.Fatalf("lab up 5 --vm 1: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The suite's lab down takes b5 with it; nothing else to undo.
		fleet.DropForward(vmBoard)
	})
	t.Logf("%s (arm64 VM) up in %.1fs", vmBoard, time.Since(t0).Seconds())
	out, err := fleet.SSH(ctx, vmBoard, "", "systemd-detect-virt; uname -m; id -un; sudo -n id -u")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("qemu\naarch64\npi\n0", strings.TrimSpace(out)); diff != "" {
		t.Fatalf("%s: virt, machine, login user, uid under sudo (-want +got):\n%s", vmBoard, diff)
	}
	if b, err := exec.CommandContext(ctx, "ssh", "-F", fleet.SSHConfig, "-o", "BatchMode=yes", "root@"+vmBoard, "true").CombinedOutput(); err == nil {
		t.Fatalf("root login to %s succeeded, want PermitRootLogin no:\n%s", vmBoard, b)
	}

	// herd for arm64, at the fleet's version.
	version := boardVersion(t, ctx, "b1")
	dist := buildDist(t, ctx, version)
	t0 = time.Now()
	out2, err := fleet.Herdctl(ctx, "", "", "bootstrap", "-F", fleet.SSHConfig, "--state-dir", filepath.Join(fleet.Dir, "state"),
		"--cluster", fleet.Cluster, "--add", "--dist", dist, "--timeout", "10m", "pi@"+vmBoard)
	if err != nil {
		t.Fatalf("bootstrap --add pi@%s: %v\n%s", vmBoard, err, out2)
	}
	t.Logf("bootstrap --add pi@%s in %.1fs:\n%s", vmBoard, time.Since(t0).Seconds(), out2)
	vm := waitNode(t, ctx, vmBoard, api.NodeReady)
	if vm.Status.Arch != "arm64" {
		t.Errorf("node %s: arch %q, want arm64", vmBoard, vm.Status.Arch)
	}
	var shorts []string
	for _, w := range vm.Status.Warnings() {
		shorts = append(shorts, w.Short)
		t.Logf("node %s warns: %s", vmBoard, w.Message)
	}
	if !slices.Contains(shorts, "no-memory-limits") {
		t.Errorf("node %s warnings %v: want no-memory-limits (booted with cgroup_disable=memory)", vmBoard, shorts)
	}
	if out, err := fleet.SSH(ctx, vmBoard, "", "grep -c . /var/lib/herd-exec/.ssh/authorized_keys; n=$(sudo -n cat /root/.ssh/authorized_keys 2>/dev/null | grep -c herd-cluster); echo \"$n\""); err != nil || strings.TrimSpace(out) != "1\n0" {
		t.Errorf("%s: cluster key lines in herd-exec's and root's authorized_keys: %q (%v), want 1 and 0", vmBoard, out, err)
	}

	// One pod a board: the spread puts one on the VM.
	vmw := Workload{Deployment: "spread", Replicas: len(boards)}
	manifest := `[[deployment]]
name = "spread"
replicas = 4
[deployment.template]
exec = ["/bin/sh", "-c", "while true; do sleep 30; done"]
restart = "always"
`
	if out, err := fleet.Herdctl(ctx, "", manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply spread: %v\n%s", err, out)
	}
	onVMBoard := func(s Snapshot) (bool, string) {
		if n := len(vmw.PodsOn(s, vmBoard)); n != 1 {
			return false, "pods on " + vmBoard + ": " + podsByBoard(s)
		}
		return true, ""
	}
	// A TCG VM can miss gossip probes right after its agent starts: it
	// goes NotReady for a moment, the spread lands on the other boards,
	// and pods are never moved back unless asked. Ask, as a user would.
	if err := Poll(testCtx(t, time.Minute), pollFast, "a spread pod on "+vmBoard, func(ctx context.Context) (bool, string) {
		s, err := fleet.Snapshot(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		return onVMBoard(s)
	}); err != nil {
		t.Logf("%v; rebalancing", err)
		waitNode(t, ctx, vmBoard, api.NodeReady)
		if out, err := fleet.Herdctl(ctx, "", "", "rebalance", "deployment", "spread"); err != nil {
			t.Fatalf("rebalance spread: %v\n%s", err, out)
		}
	}
	waitSpread(t, ctx, vmw, boards, onVMBoard)
	onVM, err := fleet.SSH(ctx, vmBoard, "", `systemctl list-units --plain --no-legend --state=active 'herd-spread-*' | grep -c .; uname -m`)
	if err != nil || strings.TrimSpace(onVM) != "1\naarch64" {
		t.Fatalf("%s: want one active spread unit under its own aarch64 kernel, got %q (%v)", vmBoard, onVM, err)
	}

	// Power pulled on the VM: its pod comes back on the other boards.
	if err := fleet.Kill(ctx, vmBoard); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	rest := boards[:3]
	waitSpread(t, ctx, vmw, rest, func(s Snapshot) (bool, string) {
		if n := s.Node(vmBoard); n == nil || n.Status.Phase == api.NodeReady {
			return false, vmBoard + " still Ready"
		}
		return true, ""
	})
	t.Logf("power pulled on %s: %d spread pods Running on %v %.1fs later", vmBoard, vmw.Replicas, rest, time.Since(t0).Seconds())

	// Power back: Ready means fenced; exactly N units on the boards.
	t0 = time.Now()
	if err := fleet.Boot(ctx, vmBoard); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s booted in %.1fs", vmBoard, time.Since(t0).Seconds())
	waitNode(t, ctx, vmBoard, api.NodeReady)
	t.Logf("%s Ready %.1fs after power on", vmBoard, time.Since(t0).Seconds())
	units, err := fleet.FleetUnits(ctx, boards, vmw.UnitPattern())
	if err != nil {
		t.Fatal(err)
	}
	if u := units[vmBoard]; len(u.Active)+len(u.Loaded)+len(u.Files) > 0 {
		t.Errorf("%s is Ready but still has spread units: active %v loaded %v files %v", vmBoard, u.Active, u.Loaded, u.Files)
	}
	if n, dup := CountActive(units); n != vmw.Replicas || len(dup) > 0 {
		t.Errorf("%d spread units active on %v (duplicates %v), want exactly %d", n, boards, dup, vmw.Replicas)
	}

	// A daemon for arm64 boards runs on the VM; then the upgrade.
	daemon := `[[daemon]]
name = "armd"
[daemon.template]
node_selector = { arch = "arm64" }
exec = ["/bin/sh", "-c", "while true; do sleep 30; done"]
restart = "always"
`
	if out, err := fleet.Herdctl(ctx, "", daemon, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply armd: %v\n%s", err, out)
	}
	err = Poll(ctx, pollFast, "the armd pod active on "+vmBoard, func(ctx context.Context) (bool, string) {
		u, err := fleet.Units(ctx, vmBoard, "herd-armd-*", false)
		if err != nil {
			return false, err.Error()
		}
		return len(u.Active) == 1, "active " + strings.Join(u.Active, ",")
	})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{}
	for _, b := range boards {
		before[b] = unitRestarts(t, ctx, b)
	}
	newVersion := version + "-vm"
	dist2 := buildDist(t, ctx, newVersion)
	t0 = time.Now()
	out = upgradeCmd(t, ctx, "--dist", dist2)
	t.Logf("upgrade with the VM board in %.1fs:\n%s", time.Since(t0).Seconds(), out)
	for _, b := range boards {
		if v := boardVersion(t, ctx, b); v != newVersion {
			t.Errorf("%s: herd %s, want %s", b, v, newVersion)
		}
		if d := cmp.Diff(before[b], unitRestarts(t, ctx, b)); d != "" {
			t.Errorf("%s: herd units (unit: MainPID NRestarts) changed across the upgrade (-before +after):\n%s", b, d)
		}
	}
	nodes, err := fleet.Nodes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if slices.Contains(boards, n.Metadata.Name) && n.Status.Version != newVersion {
			t.Errorf("node %s reports herd %q, want %q", n.Metadata.Name, n.Status.Version, newVersion)
		}
	}
}

// waitNode polls until node name has phase and returns it.
func waitNode(t *testing.T, ctx context.Context, name string, phase api.NodePhase) api.Node {
	t.Helper()
	var got api.Node
	err := Poll(ctx, pollFast, "node "+name+" "+string(phase), func(ctx context.Context) (bool, string) {
		nodes, err := fleet.Nodes(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.Metadata.Name == name {
				got = n
				return n.Status.Phase == phase, "phase " + orNone(string(n.Status.Phase))
			}
		}
		return false, "no node " + name
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitSpread polls until w's pods are all Running on boards, systemd on
// each board runs exactly the units of the pods bound there, and more(s)
// holds.
func waitSpread(t *testing.T, ctx context.Context, w Workload, boards []string, more func(Snapshot) (bool, string)) {
	t.Helper()
	err := Poll(ctx, pollFast, w.Deployment+" Running on "+strings.Join(boards, ","), func(ctx context.Context) (bool, string) {
		s, err := fleet.Snapshot(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		live := w.Live(s)
		if len(live) != w.Replicas {
			return false, podsByBoard(s)
		}
		want := map[string]int{}
		for _, p := range live {
			if p.Status.Phase != api.PodRunning || !slices.Contains(boards, p.Spec.Node) {
				return false, p.Metadata.Name + " on " + orNone(p.Spec.Node) + ": " + orNone(string(p.Status.Phase))
			}
			want[p.Spec.Node]++
		}
		units, err := fleet.FleetUnits(ctx, boards, w.UnitPattern())
		if err != nil {
			return false, err.Error()
		}
		for _, b := range boards {
			if len(units[b].Active) != want[b] {
				return false, b + ": active " + strings.Join(units[b].Active, ",")
			}
		}
		return more(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// buildDist builds herd for amd64 and arm64, stamped with version, into a
// release folder of the test's (the names `--dist` looks for).
func buildDist(t *testing.T, ctx context.Context, version string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	dir := t.TempDir()
	for _, arch := range []string{"amd64", "arm64"} {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags", "-s -w -X github.com/herd-dev/herd/agent.Version="+version,
			"-o", filepath.Join(dir, "herd-linux-"+arch), "./cmd/herd")
		cmd.Dir = fleet.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build herd %s for %s: %v\n%s", version, arch, err, b)
		}
		t.Logf("built herd %s for %s in %.1fs", version, arch, time.Since(t0).Seconds())
	}
	return dir
}
