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

// The device nodes TestDevices makes on deviceBoard: character devices
// with /dev/null's numbers (1:3), so opening and writing them is
// harmless. ttyUSB0 is granted to the pod, ttyUSB1 exists but is not.
const (
	grantedDevice = "/dev/ttyUSB0"
	otherDevice   = "/dev/ttyUSB1"
)

// serialManifest is a deployment of two pods that need grantedDevice: each
// opens it for writing, says so, then tries otherDevice (which the unit's
// device policy should refuse) and sleeps.
const serialManifest = `[[deployment]]
name = "serial"
replicas = 2
[deployment.template]
exec = ["/bin/sh", "-c", "echo x > /dev/ttyUSB0 && echo granted-ok; if echo x > /dev/ttyUSB1; then echo other-open; else echo other-refused; fi; exec sleep 3600"]
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
// facts again, and waits until the node reports want in its devices (or,
// with want "", none of the test's).
func restartAgent(ctx context.Context, t *testing.T, board, want string) {
	t.Helper()
	if out, err := fleet.SSH(ctx, board, "", "systemctl kill --signal=SIGUSR1 --kill-whom=main herd.service"); err != nil {
		t.Fatalf("restart herd on %s: %v\n%s", board, err, out)
	}
	err := Poll(ctx, 200*time.Millisecond, board+" advertises its devices", func(ctx context.Context) (bool, string) {
		nodes, err := fleet.Nodes(ctx, viaExcept(board))
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.Metadata.Name != board {
				continue
			}
			has := slices.Contains(n.Status.Devices, strings.TrimPrefix(grantedDevice, api.DeviceDir))
			if n.Status.Phase == api.NodeReady && has == (want != "") {
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
// (and, where the board's cgroup shows it, that the policy is in force),
// and that a deployment asking for a device no board has stays Pending with
// the device named.
//
// Run it alone with: go test -tags e2e -count=1 -run TestDevices -v ./e2e/
func TestDevices(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	via := viaExcept()
	mk := fmt.Sprintf("mknod -m 0660 %s c 1 3 && mknod -m 0660 %s c 1 3 && ls -l %s %s", grantedDevice, otherDevice, grantedDevice, otherDevice)
	out, err := fleet.SSH(ctx, deviceBoard, "", mk)
	if err != nil {
		t.Fatalf("mknod on %s: %v\n%s", deviceBoard, err, out)
	}
	t.Logf("on %s:\n%s", deviceBoard, out)
	t.Cleanup(func() {
		ctx := testCtx(t, 2*time.Minute)
		for _, name := range []string{"serial", "nodevice"} {
			_, _ = fleet.Herdctl(ctx, via, "", "delete", "deployments", name, "--ignore-not-found")
		}
		_, _ = fleet.SSH(ctx, deviceBoard, "", "rm -f "+grantedDevice+" "+otherDevice)
		restartAgent(ctx, t, deviceBoard, "")
	})
	restartAgent(ctx, t, deviceBoard, grantedDevice)

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

	// The device cgroup, where the board's systemd manages one: cgroup v1's
	// devices.list of the unit (v2 keeps the policy in a BPF program,
	// which has no file to read).
	cg := props["ControlGroup"]
	list, err := fleet.SSH(ctx, deviceBoard, "", "cat /sys/fs/cgroup/devices"+cg+"/devices.list")
	switch {
	case err != nil:
		t.Logf("no devices cgroup for %s on %s (%v): the policy is configured but not enforced here; journal says: %s",
			unit, deviceBoard, err, devicePolicyVerdict(logs))
	default:
		t.Logf("devices.list of %s: %s", unit, list)
		if !strings.Contains(list, "c 1:3 rw") {
			t.Errorf("devices.list lacks the granted device (c 1:3 rw):\n%s", list)
		}
		if strings.Contains(list, "a *:* rwm") {
			t.Errorf("devices.list allows every device:\n%s", list)
		}
		if strings.Contains(logs, "other-open") {
			t.Errorf("the pod opened %s, which it was not granted", otherDevice)
		}
	}

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

// devicePolicyVerdict says what the pod's journal shows about the device
// it was not granted.
func devicePolicyVerdict(logs string) string {
	switch {
	case strings.Contains(logs, "other-refused"):
		return "the ungranted device was refused"
	case strings.Contains(logs, "other-open"):
		return "the ungranted device opened"
	}
	return "nothing about the ungranted device"
}
