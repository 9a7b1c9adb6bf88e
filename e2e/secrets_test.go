//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// vaultManifest runs two pods, as the user daemon, that load the secret
// e2edb: each prints the SHA-256 of its password credential (never the
// value) and the mode of its credential directory, then sleeps. The
// directory reaches the shell twice: as $CREDENTIALS_DIRECTORY in its
// environment and as $1, ${CREDENTIALS_DIRECTORY} expanded by systemd in
// ExecStart.
const vaultManifest = `[[deployment]]
name = "vault"
replicas = 2
[deployment.template]
user = "daemon"
secrets = ["e2edb"]
exec = ["/bin/sh", "-c", "echo cred-sha256 $(sha256sum < \"$CREDENTIALS_DIRECTORY/e2edb_password\" | cut -d' ' -f1); echo user-from-arg $(cat \"$1/e2edb_user\"); exec sleep 3600", "sh", "${CREDENTIALS_DIRECTORY}"]
`

// nosecretManifest names a secret that does not exist.
const nosecretManifest = `[[deployment]]
name = "nosecret"
replicas = 1
[deployment.template]
secrets = ["e2e-missing"]
exec = ["/bin/sleep", "3600"]
`

// randomValue is a fresh plain value no file of the lab holds by chance.
func randomValue(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "herd-e2e-" + what + "-" + hex.EncodeToString(b)
}

// vaultPods waits for two Running vault pods whose revision differs from
// not (the pods of an earlier secret) and returns them.
func vaultPods(ctx context.Context, t *testing.T, via, not string) []api.Pod {
	t.Helper()
	var pods []api.Pod
	err := Poll(ctx, 200*time.Millisecond, "two running vault pods", func(ctx context.Context) (bool, string) {
		all, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		pods = pods[:0]
		var where []string
		for _, p := range all {
			if p.Spec.Owner.Name != "vault" {
				continue
			}
			where = append(where, p.Metadata.Name+"@"+p.Spec.Node+":"+string(p.Status.Phase)+":"+p.Spec.Revision)
			if p.Status.Phase == api.PodRunning && p.Spec.Revision != not {
				pods = append(pods, p)
			}
		}
		return len(pods) == 2 && len(where) == 2, strings.Join(where, " ")
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// journalHas waits until the journal of pod's unit on its board holds want.
func journalHas(ctx context.Context, t *testing.T, p api.Pod, want string) {
	t.Helper()
	unit := api.UnitName(p.Metadata.Name)
	err := Poll(ctx, 200*time.Millisecond, unit+" logged "+want, func(ctx context.Context) (bool, string) {
		out, err := fleet.SSH(ctx, p.Spec.Node, "", "journalctl --no-pager -o cat -u "+unit)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, want), out
	})
	if err != nil {
		t.Error(err)
	}
}

// grepBoard reports the files under dirs on board that contain value (the
// value goes to grep on its standard input, never on a command line),
// leaving out the credential files, where values belong.
func grepBoard(ctx context.Context, t *testing.T, board, value string, dirs ...string) string {
	t.Helper()
	out, err := fleet.SSH(ctx, board, value, "grep -rlF --exclude-dir=credentials -f - "+strings.Join(dirs, " ")+"; test $? -le 1")
	if err != nil {
		t.Fatalf("grep on %s: %v\n%s", board, err, out)
	}
	return strings.TrimSpace(out)
}

// TestSecrets creates a secret with herdctl, applies a deployment that
// loads it and checks on the boards: the process reads its credential
// (it logs the value's SHA-256 and a key read through
// ${CREDENTIALS_DIRECTORY} in its argv), the credential is readable by
// no other local user (neither systemd's copy nor herd's file), the unit
// file and the servers' Raft directories (log, stable store, snapshots)
// do not hold the value, and get/describe do not show it. Then the secret
// changes: the pods roll and see the new value, the old pods' credential
// files are gone. A deployment naming a missing secret stays Pending
// with the secret named; a secret in use is not deleted.
//
// Run it alone with: go test -tags e2e -count=1 -run TestSecrets -v ./e2e/
func TestSecrets(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	via := viaExcept()
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		for _, name := range []string{"vault", "nosecret"} {
			_, _ = fleet.Herdctl(ctx, via, "", "delete", "deployments", name, "--ignore-not-found")
		}
		_ = Poll(ctx, 200*time.Millisecond, "vault pods gone", func(ctx context.Context) (bool, string) {
			all, err := fleet.Pods(ctx, via)
			if err != nil {
				return false, err.Error()
			}
			for _, p := range all {
				if p.Spec.Owner.Name == "vault" || p.Spec.Owner.Name == "nosecret" {
					return false, p.Metadata.Name
				}
			}
			return true, ""
		})
		_, _ = fleet.Herdctl(ctx, via, "", "delete", "secret", "e2edb", "--ignore-not-found")
	})

	pw1, user := randomValue(t, "pw1"), randomValue(t, "user")
	userFile := filepath.Join(t.TempDir(), "user")
	if err := os.WriteFile(userFile, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	// The password from standard input, the user from a file: neither on
	// herdctl's command line.
	out, err := fleet.Herdctl(ctx, "", pw1, "create", "secret", "e2edb", "--from-file", "password=-", "--from-file", "user="+userFile)
	if err != nil {
		t.Fatalf("create secret: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, args := range [][]string{{"get", "secrets"}, {"describe", "secret", "e2edb"}, {"get", "secret", "e2edb", "-o", "json"}} {
		out, err := fleet.Herdctl(ctx, via, "", args...)
		if err != nil {
			t.Fatalf("herdctl %v: %v\n%s", args, err, out)
		}
		if strings.Contains(string(out), pw1) || strings.Contains(string(out), user) {
			t.Errorf("herdctl %v shows a value:\n%s", args, out)
		}
		if args[0] == "describe" {
			t.Logf("herdctl describe secret e2edb:\n%s", out)
		}
	}

	if out, err := fleet.Herdctl(ctx, via, vaultManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply vault: %v\n%s", err, out)
	}
	pods := vaultPods(ctx, t, via, "")
	rev1 := pods[0].Spec.Revision
	for _, p := range pods {
		journalHas(ctx, t, p, "cred-sha256 "+sha256Hex(pw1))
		journalHas(ctx, t, p, "user-from-arg "+user)
		unit := api.UnitName(p.Metadata.Name)
		file := units.CredentialPath(unit, "e2edb_password")
		script := strings.Join([]string{
			"stat -c '%a %U' " + units.CredentialDir + " " + file,
			"runuser -u nobody -- cat " + file + " >/dev/null 2>&1 && echo nobody-read-file",
			"runuser -u nobody -- cat /run/credentials/" + unit + "/e2edb_password >/dev/null 2>&1 && echo nobody-read-cred",
			"runuser -u daemon -- cat " + file + " >/dev/null 2>&1 && echo daemon-read-file",
			"grep -c '^LoadCredential=' /etc/systemd/system/" + unit,
			"true",
		}, "; ")
		out, err := fleet.SSH(ctx, p.Spec.Node, "", script)
		if err != nil {
			t.Fatalf("on %s: %v\n%s", p.Spec.Node, err, out)
		}
		t.Logf("%s on %s:\n%s", unit, p.Spec.Node, out)
		want := "700 root\n600 root\n2\n"
		if out != want {
			t.Errorf("%s on %s: got\n%swant (modes, no reader but root, two LoadCredential= lines)\n%s", unit, p.Spec.Node, out, want)
		}
		if hits := grepBoard(ctx, t, p.Spec.Node, pw1, "/etc/systemd/system", "/etc/herd"); hits != "" {
			t.Errorf("the password is in unit or environment files on %s: %s", p.Spec.Node, hits)
		}
	}
	for _, s := range fleet.ServerBoards() {
		for _, v := range []string{pw1, user} {
			if hits := grepBoard(ctx, t, s, v, "/var/lib/herd"); hits != "" {
				t.Errorf("a plain value is on disk on server %s: %s", s, hits)
			}
		}
		ls, _ := fleet.SSH(ctx, s, "", "ls -R /var/lib/herd/raft | head -20")
		t.Logf("raft files on %s:\n%s", s, ls)
	}

	// In use: not deleted.
	if out, err := fleet.Herdctl(ctx, via, "", "delete", "secret", "e2edb"); err == nil || !strings.Contains(err.Error(), "in use by deployments/vault:") {
		t.Errorf("delete of a secret in use: %v\n%s", err, out)
	}

	// A new value: the pods roll and read it; the old pods' files go.
	pw2 := randomValue(t, "pw2")
	if out, err := fleet.Herdctl(ctx, via, pw2, "create", "secret", "e2edb", "--from-file", "password=-", "--from-file", "user="+userFile, "--overwrite"); err != nil {
		t.Fatalf("overwrite secret: %v\n%s", err, out)
	}
	start := time.Now()
	next := vaultPods(ctx, t, via, rev1)
	t.Logf("pods rolled to the new secret in %v", time.Since(start).Round(time.Millisecond))
	for _, p := range next {
		journalHas(ctx, t, p, "cred-sha256 "+sha256Hex(pw2))
	}
	for _, p := range pods {
		unit := api.UnitName(p.Metadata.Name)
		err := Poll(ctx, 200*time.Millisecond, "credentials of "+unit+" removed", func(ctx context.Context) (bool, string) {
			out, err := fleet.SSH(ctx, p.Spec.Node, "", fmt.Sprintf("ls %s | grep -F %s; true", units.CredentialDir, strings.TrimSuffix(unit, api.UnitSuffix)+"."))
			return err == nil && strings.TrimSpace(out) == "", out
		})
		if err != nil {
			t.Error(err)
		}
	}
	for _, s := range fleet.ServerBoards() {
		if hits := grepBoard(ctx, t, s, pw2, "/var/lib/herd"); hits != "" {
			t.Errorf("the new value is on disk on server %s: %s", s, hits)
		}
	}

	// A missing secret: Pending, named.
	if out, err := fleet.Herdctl(ctx, via, nosecretManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply nosecret: %v\n%s", err, out)
	}
	err = Poll(ctx, 200*time.Millisecond, "nosecret pod pending, naming the secret", func(ctx context.Context) (bool, string) {
		all, err := fleet.Pods(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range all {
			if p.Spec.Owner.Name != "nosecret" {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == api.ConditionScheduled && c.Reason == "SecretMissing" && strings.Contains(c.Message, "secret e2e-missing does not exist") {
					return p.Spec.Node == "" && p.Status.Phase == api.PodPending, string(p.Status.Phase) + " on " + p.Spec.Node
				}
			}
			return false, fmt.Sprintf("%s %s %+v", p.Metadata.Name, p.Status.Phase, p.Status.Conditions)
		}
		return false, "no nosecret pod yet"
	})
	if err != nil {
		t.Error(err)
	}
}
