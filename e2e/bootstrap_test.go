//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBootstrapAsSudoUser checks what the suite's bootstrap as pi@ (sudo,
// no root login needed) left on every board: the cluster key authorised
// for the executor account herd-exec only, never for root; sshd logging
// the servers' executors in as herd-exec and never as root; and herd-exec
// unable to run anything but herd's gate through sudo.
func TestBootstrapAsSudoUser(t *testing.T) {
	if fleet.LoginUser != "pi" {
		t.Skipf("the fleet was bootstrapped as %q, not pi", fleet.LoginUser)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, b := range fleet.Boards {
		out, err := fleet.SSH(ctx, b, "", `grep -c herd-cluster- /root/.ssh/authorized_keys; grep -c '^restrict,from=.*command="/usr/local/bin/herd ssh-gate" .* herd-cluster-' /var/lib/herd-exec/.ssh/authorized_keys; stat -c '%U %a' /var/lib/herd-exec/.ssh/authorized_keys /etc/sudoers.d/herd`)
		if got, want := strings.Fields(out), []string{"0", "1", "root", "644", "root", "440"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: cluster key lines in root's / herd-exec's authorized_keys, owners and modes: %q (%v), want %q", b, out, err, want)
		}
		// The journal of sshd: herd-exec logs in from the servers; root
		// logs in only from the lab host (10.77.0.1), never from a board.
		out, err = fleet.SSH(ctx, b, "", `journalctl -u ssh --no-pager -o cat | grep -o 'Accepted publickey for [a-z-]* from [0-9.]*' | sort -u`)
		if err != nil {
			t.Fatalf("%s: journal: %v\n%s", b, err, out)
		}
		if !strings.Contains(out, "Accepted publickey for herd-exec from ") {
			t.Errorf("%s: no executor login as herd-exec in sshd's journal:\n%s", b, out)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(l, "Accepted publickey for root from ") && !strings.HasSuffix(l, " from 10.77.0.1") {
				t.Errorf("%s: root logged in from a board: %s", b, l)
			}
		}
		out, err = fleet.SSH(ctx, b, "", `su -s /bin/sh herd-exec -c 'sudo -n id -u' 2>&1; echo "status $?"`)
		if !strings.Contains(out, "status 1") || strings.Contains(out, "\n0\n") {
			t.Errorf("%s: herd-exec ran sudo -n id -u: %q (%v); want a refusal", b, out, err)
		}
	}
}

// TestBootstrapResolver checks what bootstrap did about the boards'
// resolvers: the lab's boards do not run systemd-resolved, so each got one
// line saying how to point its resolver at the agent for herd., and no
// drop-in.
func TestBootstrapResolver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, b := range fleet.Boards {
		want := b + ": systemd-resolved is not running: herd. names are not wired into this board's resolver; point its resolver at 127.0.0.1 port 8600 for herd."
		if n := strings.Count(fleet.BootstrapOutput, want); n != 1 {
			t.Errorf("%s: bootstrap printed %q %d times, want once:\n%s", b, want, n, fleet.BootstrapOutput)
		}
		out, err := fleet.SSH(ctx, b, "", `systemctl is-active systemd-resolved.service; test -e /etc/systemd/resolved.conf.d/herd.conf && echo drop-in; true`)
		if err != nil || strings.TrimSpace(out) == "active" || strings.Contains(out, "drop-in") {
			t.Errorf("%s: systemd-resolved state and drop-in: %q (%v); want it not active and no drop-in", b, out, err)
		}
	}
}
