package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
)

// removeSystemctl is a fake systemctl for Remove: it logs its argv and
// marks herd.service disabled; systemd-resolved runs when the file
// "resolved" is there.
const removeSystemctl = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/systemctl.log"
printf '\n' >> "$d/systemctl.log"
case "$1" in
--version) echo "systemd 252 (252.22-1~deb12u1)" ;;
disable) [ "$3" = herd.service ] && touch "$d/herd-disabled"; exit 0 ;;
list-units) echo "herd-web-q7k9m.service loaded failed failed web" ;;
daemon-reload|reset-failed) ;;
is-active) [ "$3" = systemd-resolved.service ] && [ -e "$d/resolved" ] ;;
reload-or-restart) [ "$2" = systemd-resolved.service ] && [ -e "$d/resolved" ] ;;
*) echo "fake systemctl: unexpected $*" >&2; exit 1 ;;
esac
`

// TestRemoveBoard bootstraps a server and a worker over real SSH, gives
// the worker a workload unit, and removes the worker: nothing of herd is
// left under its root, the user's authorized_keys line is kept, the
// units were stopped, and the state no longer records it. Removing the
// last server is refused and changes nothing.
func TestRemoveBoard(t *testing.T) {
	l := newLab(t, "b1", "b2")
	ctx := runCtx(t)
	remotes := map[string]*counting{}
	o := l.options(t, remotes, "b1", "b2")
	o.Servers = 1
	// systemd-resolved runs on b2: bootstrap gives it the drop-in.
	writeFile(t, l.boards["b2"].bin, "resolved", nil, 0o644)
	if _, err := Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	b2 := l.boards["b2"]
	if _, err := os.Stat(filepath.Join(b2.root, ResolvedDropInPath)); err != nil {
		t.Fatalf("the resolved drop-in after bootstrap: %v", err)
	}
	userKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(b2.srv.ClientSigner.PublicKey()))) + " me@laptop\n"
	ak := filepath.Join(b2.root, "root/.ssh/authorized_keys")
	if _, err := os.Stat(filepath.Join(b2.root, ExecAuthKeysPath)); err != nil {
		t.Fatalf("the executor account's authorized_keys after bootstrap: %v", err)
	}
	writeFile(t, b2.root, "root/.ssh/authorized_keys", []byte(userKey), 0o600)
	writeFile(t, b2.root, "etc/systemd/system/herd-web-x2b4z.service", []byte("[Service]\n"), 0o644)
	writeFile(t, b2.root, "etc/herd/env/herd-web-x2b4z.env", []byte("A=b\n"), 0o600)
	writeFile(t, b2.root, "usr/local/bin/herd.new", []byte("x"), 0o755)
	for _, b := range l.boards {
		writeFile(t, b.bin, "systemctl", []byte(removeSystemctl), 0o755)
		b.clearLog(t)
	}

	status := func(context.Context) (api.ClusterStatus, error) {
		st := api.ClusterStatus{Leader: "b1", Servers: []api.RaftServer{{ID: "b1", Suffrage: "voter", Leader: true}},
			Members: []api.GossipMember{{Name: "b1", State: "alive", Server: true}, {Name: "b2", State: "alive"}}}
		if _, err := os.Stat(filepath.Join(b2.bin, "herd-disabled")); err == nil {
			st.Members[1].State = "left"
		}
		return st, nil
	}
	ro := RemoveOptions{Status: status}

	// The last server: refused, nothing touched.
	o.Boards = []string{"b1"}
	if _, err := Remove(ctx, o, ro); !errors.Is(err, ErrRemove) || !strings.Contains(err.Error(), "last Raft server") {
		t.Fatalf("removing the last server: %v, want a refusal", err)
	}
	if calls := l.boards["b1"].systemctlCalls(t); len(calls) > 0 {
		t.Errorf("a refused removal ran systemctl on b1: %v", calls)
	}

	o.Boards = []string{"b2"}
	removed, err := Remove(ctx, o, ro)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Board.Name != "b2" {
		t.Fatalf("removed %+v, want b2", removed)
	}
	wantUnits := []string{"herd-web-q7k9m.service", "herd-web-x2b4z.service"}
	if diff := cmp.Diff(wantUnits, removed[0].Units); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	calls := b2.systemctlCalls(t)
	if !slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, []string{"disable", "--now", UnitName}) }) ||
		!slices.ContainsFunc(calls, func(c []string) bool {
			return slices.Equal(c, append([]string{"disable", "--now", "--"}, wantUnits...))
		}) {
		t.Errorf("systemctl calls %q: want herd.service and both units disabled --now", calls)
	}
	if !slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, []string{"reload-or-restart", ResolvedUnit}) }) {
		t.Errorf("systemctl calls %q: want resolved reloaded once its drop-in is gone", calls)
	}
	for _, p := range append(BoardPaths(), "/etc/systemd/system/herd-web-x2b4z.service", "/etc/herd/env/herd-web-x2b4z.env") {
		if _, err := os.Lstat(filepath.Join(b2.root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left on b2 (%v)", p, err)
		}
	}
	got, err := os.ReadFile(ak)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != userKey {
		t.Errorf("authorized_keys after removal:\n%s\nwant only the user's line:\n%s", got, userKey)
	}
	if got := string(mustRead(t, filepath.Join(b2.bin, "userdel.log"))); got != "--\x00"+ExecUser+"\x00\n" {
		t.Errorf("userdel calls %q, want one for %s", got, ExecUser)
	}
	st, _, err := LoadState(l.stateDir, "lab", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Board(l.boards["b2"].srv.Addr); ok || len(st.Boards) != 1 {
		t.Errorf("state boards after removal: %+v, want only b1", st.Boards)
	}
	// b1 was not touched.
	if _, err := os.Stat(filepath.Join(l.boards["b1"].root, BinaryPath)); err != nil {
		t.Errorf("b1 lost its binary: %v", err)
	}

	// Removing it again: it is no longer a board of the cluster.
	if _, err := Remove(ctx, o, ro); !errors.Is(err, ErrRemove) || !strings.Contains(err.Error(), "not a board") {
		t.Errorf("removing b2 twice: %v", err)
	}
}
