//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// deviceBoard is the board TestDevices gives a device node: the worker.
const deviceBoard = "b4"

// The device nodes TestDevices makes on deviceBoard. ttyUSB0, granted to
// the pod, has /dev/null's numbers (1:3), so writing it is harmless.
// ttyUSB1 is not granted; it has the numbers of /dev/kmem (1:2), which
// kernels since 5.13 no longer have: opening it fails with ENXIO ("No such
// device or address") where the device policy lets it through and with
// EPERM ("Operation not permitted") where the unit's cgroup refuses it.
// (The cgroup checks numbers, not paths: two nodes with the same numbers
// are one device to it.)
const (
	grantedDevice = "/dev/ttyUSB0"
	otherDevice   = "/dev/ttyUSB1"
	grantedNumber = "1 3"
	otherNumber   = "1 2"
)

// serialManifest is a deployment of two pods that need grantedDevice: each
// writes it and says so, then tries otherDevice (the shell reports why it
// cannot) and sleeps.
const serialManifest = `[[deployment]]
name = "serial"
replicas = 2
[deployment.template]
exec = ["/bin/sh", "-c", "echo x > /dev/ttyUSB0 && echo granted-ok; echo x > /dev/ttyUSB1; exec sleep 3600"]
devices = ["/dev/ttyUSB0"]
`

// missingManifest needs a device no board has.
const missingManifest = `[[deployment]]
name = "nodevice"
replicas = 1
[deployment.template]
exec = ["/bin/sleep", "3600"]
devices = ["/dev/i2c-7"]
`

// restartAgent restarts herd on board the way herdctl upgrade does (the
// restart signal: no gossip leave, its pods kept), so that it reads its
// facts again.
func restartAgent(ctx context.Context, t *testing.T, board string) {
	t.Helper()
	if out, err := fleet.SSH(ctx, board, "", "systemctl kill --signal=SIGUSR1 --kill-whom=main herd.service"); err != nil {
		t.Fatalf("restart herd on %s: %v\n%s", board, err, out)
	}
}

// waitDevices waits until board is Ready and advertises grantedDevice
// (has) or not (!has).
func waitDevices(ctx context.Context, t *testing.T, board string, has bool) {
	t.Helper()
	err := Poll(ctx, 200*time.Millisecond, fmt.Sprintf("%s Ready, advertising %s: %v", board, grantedDevice, has), func(ctx context.Context) (bool, string) {
		nodes, err := fleet.Nodes(ctx, viaExcept(board))
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.Metadata.Name != board {
				continue
			}
			got := slices.Contains(n.Status.Devices, strings.TrimPrefix(grantedDevice, api.DeviceDir))
			if n.Status.Phase == api.NodeReady && got == has {
				return true, ""
			}
			return false, fmt.Sprintf("%s %s, devices %v", board, n.Status.Phase, n.Status.Devices)
		}
		return false, board + " not listed"
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDevices gives the worker a device node and checks that a deployment
// asking for it runs only there, that the unit carries the device policy
// and that the board enforces it: the pod writes its device and is refused
// another. For the last part the worker is powered off and booted on the
// cgroup2 hierarchy with bpf() allowed (scripts/lab boot --cgroup2), where
// systemd enforces DevicePolicy= with BPF device programs as on a Pi; a
// default lab board cannot (its v1 devices hierarchy is read-only). A
// deployment asking for a device no board has stays Pending, the device
// named. The worker is booted back in its default mode at the end.
//
// Run it alone with: go test -tags e2e -count=1 -run TestDevices -v ./e2e/
func TestDevices(t *testing.T) {
	ctx := testCtx(t, 6*time.Minute)
	via := viaExcept()
	t.Cleanup(func() {
		ctx := testCtx(t, 3*time.Minute)
		for _, name := range []string{"serial", "nodevice"} {
			_, _ = fleet.Herdctl(ctx, via, "", "delete", "deployments", name, "--ignore-not-found")
		}
		// Its default mode again; /dev is the container's tmpfs, so the
		// nodes are gone too.
		if _, err := fleet.Lab(ctx, "kill", deviceBoard); err != nil {
			t.Errorf("restore: kill %s: %v", deviceBoard, err)
		}
		if _, err := fleet.Lab(ctx, "boot", deviceBoard); err != nil {
			t.Errorf("restore: boot %s: %v", deviceBoard, err)
		}
		waitDevices(ctx, t, deviceBoard, false)
	})
	if _, err := fleet.Lab(ctx, "kill", deviceBoard); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Lab(ctx, "boot", "--cgroup2", deviceBoard); err != nil {
		t.Fatal(err)
	}
	waitDevices(ctx, t, deviceBoard, false)
	mk := fmt.Sprintf("mknod -m 0660 %s c %s && mknod -m 0660 %s c %s && ls -l %s %s && grep cgroup /proc/self/mounts",
		grantedDevice, grantedNumber, otherDevice, otherNumber, grantedDevice, otherDevice)
	out, err := fleet.SSH(ctx, deviceBoard, "", mk)
	if err != nil {
		t.Fatalf("mknod on %s: %v\n%s", deviceBoard, err, out)
	}
	t.Logf("on %s:\n%s", deviceBoard, out)
	restartAgent(ctx, t, deviceBoard)
	waitDevices(ctx, t, deviceBoard, true)

	wide, err := fleet.Herdctl(ctx, via, "", "get", "nodes", "-o", "wide")
	if err != nil {
		t.Fatalf("get nodes -o wide: %v\n%s", err, wide)
	}
	t.Logf("herdctl get nodes -o wide:\n%s", wide)

	if out, err := fleet.Herdctl(ctx, via, serialManifest, "apply", "-f", "-", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("apply serial: %v\n%s", err, out)
	}
	var pods []api.Pod
	err = Poll(ctx, 200*time.Millisecond, "two serial pods running", func(ctx context.Context) (bool, string) {
		all, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		for _, p := range all {
			if p.Spec.Owner.Name == "serial" && !p.Status.Phase.Terminal() {
				pods = append(pods, p)
			}
		}
		var where []string
		running := 0
		for _, p := range pods {
			where = append(where, p.Metadata.Name+"@"+p.Spec.Node+":"+string(p.Status.Phase))
			if p.Status.Phase == api.PodRunning {
				running++
			}
		}
		return len(pods) == 2 && running == 2, strings.Join(where, " ")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.Node != deviceBoard {
			t.Errorf("pod %s placed on %s, want %s (the only board with %s)", p.Metadata.Name, p.Spec.Node, deviceBoard, grantedDevice)
		}
	}
	// No other board runs a serial unit.
	units, err := fleet.FleetUnits(ctx, fleet.Boards, "herd-serial-*")
	if err != nil {
		t.Fatal(err)
	}
	for b, u := range units {
		if b != deviceBoard && len(u.Loaded) > 0 {
			t.Errorf("%s has serial units %v", b, u.Loaded)
		}
		if b == deviceBoard && len(u.Active) != 2 {
			t.Errorf("%s runs serial units %v, want 2 active", b, u.Active)
		}
	}

	p := pods[0]
	unit := api.UnitName(p.Metadata.Name)
	show, err := fleet.SSH(ctx, deviceBoard, "", "systemctl show -p DevicePolicy -p DeviceAllow -p ControlGroup -p MainPID "+unit)
	if err != nil {
		t.Fatalf("systemctl show %s: %v\n%s", unit, err, show)
	}
	t.Logf("%s on %s:\n%s", unit, deviceBoard, show)
	props := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(show), "\n") {
		k, v, _ := strings.Cut(line, "=")
		props[k] = v
	}
	if props["DevicePolicy"] != "closed" {
		t.Errorf("DevicePolicy=%q, want closed", props["DevicePolicy"])
	}
	if props["DeviceAllow"] != grantedDevice+" rw" {
		t.Errorf("DeviceAllow=%q, want %q", props["DeviceAllow"], grantedDevice+" rw")
	}

	// What the process saw, from its journal.
	logs, err := fleet.SSH(ctx, deviceBoard, "", "journalctl --no-pager -o cat -u "+unit)
	if err != nil {
		t.Fatalf("journal of %s: %v", unit, err)
	}
	t.Logf("journal of %s:\n%s", unit, logs)
	if !strings.Contains(logs, "granted-ok") {
		t.Errorf("the pod could not write %s: journal\n%s", grantedDevice, logs)
	}

	// The board's cgroup refused the device the pod was not granted: EPERM
	// from the cgroup, not ENXIO from the (absent) driver behind it.
	if !strings.Contains(logs, otherDevice+": Operation not permitted") {
		t.Errorf("opening %s was not refused by the device policy (want EPERM): journal\n%s", otherDevice, logs)
	}
	// A process outside the unit opens it as far as the driver: the EPERM
	// above is the unit's cgroup.
	if out, err := fleet.SSH(ctx, deviceBoard, "", "sh -c 'echo x > "+otherDevice+"' 2>&1; true"); !strings.Contains(out, "No such device or address") {
		t.Errorf("outside the unit, %s: %v %q, want ENXIO", otherDevice, err, out)
	}
	// For the record: the agent's own policy (none), the board's cgroup2
	// controllers and the root shell's cgroup.
	cgs, err := fleet.SSH(ctx, deviceBoard, "", "systemctl show -p DevicePolicy herd.service; cat /sys/fs/cgroup/cgroup.controllers; echo; cat /proc/self/cgroup")
	t.Logf("on %s: %s %v", deviceBoard, cgs, err)

	// A device no board has: Pending, and the reason names it.
	if out, err := fleet.Herdctl(ctx, via, missingManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply nodevice: %v\n%s", err, out)
	}
	err = Poll(ctx, 200*time.Millisecond, "nodevice pod unschedulable, naming the device", func(ctx context.Context) (bool, string) {
		all, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range all {
			if p.Spec.Owner.Name != "nodevice" {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == api.ConditionScheduled && strings.Contains(c.Message, "missing device /dev/i2c-7") {
					if p.Spec.Node != "" {
						return false, "bound to " + p.Spec.Node
					}
					return true, ""
				}
			}
			return false, fmt.Sprintf("%s %s %+v", p.Metadata.Name, p.Status.Phase, p.Status.Conditions)
		}
		return false, "no nodevice pod yet"
	})
	if err != nil {
		t.Fatal(err)
	}
	desc, _ := fleet.Herdctl(ctx, via, "", "describe", "deployment", "nodevice")
	t.Logf("herdctl describe deployment nodevice:\n%s", desc)
}
