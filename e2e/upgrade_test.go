//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/bootstrap"
)

// TestUpgrade runs last (files in name order) because it leaves the lab
// changed: every agent on another version, and the worker b4 without herd.
//
// herdctl upgrade rolls a herd built with another version onto every board
// while examples/web.toml runs: the dry run shows workers first and the
// leader last; afterwards every agent reports the new version, every herd
// unit on every board kept its MainPID and NRestarts, and every board's
// systemd ran exactly 3 web pods throughout (sampled); a second run
// changes nothing. Boards start with the sudoers drop-in and herd.service
// of an older bootstrap (no board session line; no GODEBUG) and end with
// the current ones, the agents running with the unit's environment. Then
// `herdctl bootstrap --remove b4` leaves nothing of
// herd on b4 (no /etc/herd, binary, unit, cluster key line, herd-* unit)
// and its pods run on the other boards.
func TestUpgrade(t *testing.T) {
	converge(t)
	ctx := testCtx(t, 4*time.Minute)
	oldVersion := boardVersion(t, ctx, fleet.Boards[0])
	newVersion := oldVersion + "-upgrade-e2e"
	bin := buildHerd(t, ctx, newVersion)

	leader := waitLeader(t, ctx, viaExcept())
	out := upgradeCmd(t, ctx, "--herd-binary", bin, "--dry-run")
	t.Logf("dry run:\n%s", out)
	order := regexp.MustCompile(`(?m)^(b\d+): \[\d+/\d+\]`).FindAllStringSubmatch(out, -1)
	var got []string
	for _, m := range order {
		got = append(got, m[1])
	}
	if len(got) != len(fleet.Boards) || got[0] != "b4" || got[len(got)-1] != leader {
		t.Fatalf("dry run order %v: want the worker b4 first and the leader %s last\n%s", got, leader, out)
	}
	for _, b := range fleet.Boards {
		if v := boardVersion(t, ctx, b); v != oldVersion {
			t.Fatalf("dry run changed %s: herd %s", b, v)
		}
	}

	// The boards' sudoers drop-ins as an older bootstrap wrote them,
	// without the board session's line: the upgrade rewrites them, and
	// meanwhile the leader drives those boards through the wrapper.
	oldSudoers := strings.Replace(string(bootstrap.RenderSudoers()), ", /usr/local/bin/herd ssh-gate --elevated session", "", 1)
	if oldSudoers == string(bootstrap.RenderSudoers()) {
		t.Fatal("the drop-in has no board session line to take out")
	}
	for _, b := range fleet.Boards {
		if out, err := fleet.SSH(ctx, b, oldSudoers, "cat > /etc/herd/sudoers.old && visudo -cqf /etc/herd/sudoers.old && chmod 0440 /etc/herd/sudoers.old && mv /etc/herd/sudoers.old "+bootstrap.SudoersPath); err != nil {
			t.Fatalf("%s: planting the old drop-in: %v\n%s", b, err, out)
		}
	}

	// herd.service as an older bootstrap wrote it, without the runtime
	// setting: the upgrade rewrites it before the restart.
	oldUnit := strings.Replace(string(bootstrap.RenderUnit()), "Environment="+bootstrap.RuntimeEnv+"\n", "", 1)
	if oldUnit == string(bootstrap.RenderUnit()) {
		t.Fatal("herd.service has no Environment line to take out")
	}
	for _, b := range fleet.Boards {
		if out, err := fleet.SSH(ctx, b, oldUnit, "cat > "+bootstrap.UnitPath+" && systemctl daemon-reload"); err != nil {
			t.Fatalf("%s: planting the old herd.service: %v\n%s", b, err, out)
		}
	}

	before := map[string]map[string]string{}
	for _, b := range fleet.Boards {
		before[b] = unitRestarts(t, ctx, b)
	}
	gt := watchUnits(t, ctx)
	t0 := time.Now()
	out = upgradeCmd(t, ctx, "--herd-binary", bin)
	took := time.Since(t0)
	observe(ctx, time.Second)
	gt.Stop()
	t.Logf("upgrade of %d boards in %.1fs:\n%s", len(fleet.Boards), took.Seconds(), out)
	for _, m := range regexp.MustCompile(`\] (b\d+) \([^)]*\): ok: on \S+, .* ([0-9.]+)s after the restart`).FindAllStringSubmatch(out, -1) {
		t.Logf("gate: %s back %ss after its restart", m[1], m[2])
	}

	nodes, err := fleet.Nodes(ctx, viaExcept())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Status.Version != newVersion {
			t.Errorf("node %s reports herd %q, want %q", n.Metadata.Name, n.Status.Version, newVersion)
		}
	}
	for _, b := range fleet.Boards {
		if v := boardVersion(t, ctx, b); v != newVersion {
			t.Errorf("%s: /usr/local/bin/herd is %s, want %s", b, v, newVersion)
		}
		if d := cmp.Diff(before[b], unitRestarts(t, ctx, b)); d != "" {
			t.Errorf("%s: herd units (unit: MainPID NRestarts) changed across the upgrade (-before +after):\n%s", b, d)
		}
		if got, err := fleet.SSH(ctx, b, "", "cat "+bootstrap.SudoersPath); err != nil || got != string(bootstrap.RenderSudoers()) {
			t.Errorf("%s: sudoers drop-in after the upgrade = %q, %v; want the current one", b, got, err)
		}
		if got, err := fleet.SSH(ctx, b, "", "cat "+bootstrap.UnitPath); err != nil || got != string(bootstrap.RenderUnit()) {
			t.Errorf("%s: herd.service after the upgrade = %q, %v; want the current one", b, got, err)
		}
		if got, err := fleet.SSH(ctx, b, "", `tr '\0' '\n' </proc/"$(systemctl show -p MainPID --value herd)"/environ | grep '^GODEBUG='`); err != nil || strings.TrimSpace(got) != bootstrap.RuntimeEnv {
			t.Errorf("%s: the agent's GODEBUG after the upgrade = %q, %v; want %s", b, got, err, bootstrap.RuntimeEnv)
		}
	}
	v := Check(Truth{Samples: gt.Samples(), Boards: fleet.Boards, Owner: Web.Owner(), Stale: 4 * sampleEvery,
		Declared: constant(Web.Replicas)}, t0, time.Now())
	logEpisodes(t, v)
	if v.Moments < 20 {
		t.Errorf("only %d moments sampled", v.Moments)
	}
	if v.OverAll > 0 || len(v.Dips) > 0 || len(v.Duplicates) > 0 {
		t.Errorf("web was not exactly %d during the upgrade: overcount %d, %d dips, %d duplicates", Web.Replicas, v.OverAll, len(v.Dips), len(v.Duplicates))
	}

	// Idempotent: nothing to do the second time.
	out = upgradeCmd(t, ctx, "--herd-binary", bin)
	if n := strings.Count(out, "already on "+newVersion); n != len(fleet.Boards) || strings.Contains(out, "restarting the agent") {
		t.Errorf("second upgrade: %d boards skipped, want %d, and no restart:\n%s", n, len(fleet.Boards), out)
	}

	testRemoveWorker(t, ctx)
}

// testRemoveWorker removes b4 with bootstrap --remove, web scaled to one
// pod a board first so that b4 runs one.
func testRemoveWorker(t *testing.T, ctx context.Context) {
	const gone = "b4"
	w := Web
	w.Replicas = len(fleet.Boards)
	scaleTo(t, viaExcept(), w.Replicas)
	if _, _, err := fleet.WaitConverged(ctx, viaExcept(), w); err != nil {
		t.Fatal(err)
	}
	pods, err := fleet.UnitPIDs(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) == 0 {
		t.Fatalf("%s runs no herd unit with web at %d", gone, w.Replicas)
	}
	t0 := time.Now()
	out, err := fleet.Herdctl(ctx, "", "", "bootstrap", "-F", fleet.SSHConfig, "--state-dir", filepath.Join(fleet.Dir, "state"),
		"--cluster", fleet.Cluster, "--remove", gone)
	if err != nil {
		t.Fatalf("bootstrap --remove %s: %v\n%s", gone, err, out)
	}
	t.Logf("bootstrap --remove %s in %.1fs:\n%s", gone, time.Since(t0).Seconds(), out)
	left, err := fleet.SSH(ctx, gone, "", `for p in /etc/herd /var/lib/herd /run/herd /usr/local/bin/herd /usr/local/bin/herd.new /etc/systemd/system/herd.service; do [ ! -e "$p" ] || echo "left: $p"; done
ls /etc/systemd/system | grep '^herd' | sed 's/^/left unit file: /'
systemctl list-units --all --plain --no-legend 'herd*' | sed 's/^/left unit: /'
grep -n herd-cluster /root/.ssh/authorized_keys | sed 's/^/left key line: /'
systemctl is-enabled herd.service 2>/dev/null | sed 's/^/herd.service: /'
true`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(left) != "" {
		t.Errorf("herd left on %s after --remove:\n%s", gone, left)
	}
	rest := slices.DeleteFunc(slices.Clone(fleet.Boards), func(b string) bool { return b == gone })
	err = Poll(ctx, 250*time.Millisecond, "web converged without "+gone, func(ctx context.Context) (bool, string) {
		s, err := fleet.Snapshot(ctx, viaExcept())
		if err != nil {
			return false, err.Error()
		}
		if n := s.Node(gone); n != nil && n.Status.Phase != api.NodeLeft {
			return false, gone + " is " + string(n.Status.Phase)
		}
		units, err := fleet.FleetUnits(ctx, rest, w.UnitPattern())
		if err != nil {
			return false, err.Error()
		}
		return w.Converged(s, units, rest)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web back at %d on %v %.1fs after the removal of %s (which ran %v) began", w.Replicas, rest, time.Since(t0).Seconds(), gone, pods)
	st, err := os.ReadFile(filepath.Join(fleet.Dir, "state", "boards.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(st), `"`+gone+`"`) {
		t.Errorf("%s still recorded in boards.toml:\n%s", gone, st)
	}
}

// upgradeCmd runs herdctl upgrade on the fleet with args.
func upgradeCmd(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	full := append([]string{"upgrade", "-F", fleet.SSHConfig, "--state-dir", filepath.Join(fleet.Dir, "state"), "--cluster", fleet.Cluster}, args...)
	out, err := fleet.Herdctl(ctx, "", "", full...)
	if err != nil {
		t.Fatalf("herdctl upgrade: %v\n%s", err, out)
	}
	return string(out)
}

// boardVersion is what /usr/local/bin/herd on board says it is.
func boardVersion(t *testing.T, ctx context.Context, board string) string {
	t.Helper()
	out, err := fleet.SSH(ctx, board, "", "/usr/local/bin/herd version -o json")
	if err != nil {
		t.Fatal(err)
	}
	var v api.VersionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s: herd version -o json: %q: %v", board, out, err)
	}
	return v.Version
}

// buildHerd builds cmd/herd stamped with version into the test's folder.
func buildHerd(t *testing.T, ctx context.Context, version string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	out := filepath.Join(t.TempDir(), "herd")
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags", "-s -w -X github.com/herd-dev/herd/agent.Version="+version, "-o", out, "./cmd/herd")
	cmd.Dir = fleet.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	t0 := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build herd %s: %v\n%s", version, err, b)
	}
	t.Logf("built herd %s in %.1fs", version, time.Since(t0).Seconds())
	return out
}

// unitRestarts is "MainPID NRestarts" of every active herd unit on board.
func unitRestarts(t *testing.T, ctx context.Context, board string) map[string]string {
	t.Helper()
	out, err := fleet.SSH(ctx, board, "", `u=$(systemctl list-units --plain --no-legend --state=active 'herd-*.service' | awk '{print $1}'); [ -z "$u" ] || systemctl show -p Id -p MainPID -p NRestarts $u`)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]string{}
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		props := map[string]string{}
		for _, l := range strings.Split(block, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				props[k] = v
			}
		}
		if props["Id"] == "" {
			continue
		}
		if _, err := strconv.Atoi(props["MainPID"]); err != nil {
			t.Fatalf("%s: %s: MainPID %q", board, props["Id"], props["MainPID"])
		}
		res[props["Id"]] = props["MainPID"] + " " + props["NRestarts"]
	}
	return res
}
