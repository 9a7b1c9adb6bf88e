package bootstrap

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

func TestLoadStateGeneratesOnceThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clusters", "lab")

	if _, _, err := LoadState(dir, "lab", false); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("LoadState(create=false) on nothing: err = %v, want ErrNoCluster", err)
	}
	st, created, err := LoadState(dir, "lab", true)
	if err != nil || !created {
		t.Fatalf("LoadState(create) = %v, %v", created, err)
	}
	for name, k := range map[string][]byte{"gossip": st.Secrets.GossipKey, "server": st.Secrets.ServerKey} {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(k)))
		if err != nil || len(key) != 32 {
			t.Errorf("%s key %q: %d bytes, %v", name, k, len(key), err)
		}
	}
	if bytes.Equal(st.Secrets.GossipKey, st.Secrets.ServerKey) {
		t.Error("gossip key and server key are the same")
	}
	if tok := strings.TrimSpace(string(st.Secrets.APIToken)); len(tok) < 40 {
		t.Errorf("api token %q: too short", tok)
	}
	signer, err := ssh.ParsePrivateKey(st.Secrets.SSHPrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("cluster ssh key is %s, want ed25519", signer.PublicKey().Type())
	}
	if !strings.HasSuffix(string(st.Secrets.SSHPublicKey), " herd-cluster-lab\n") {
		t.Errorf("public key line %q lacks the comment", st.Secrets.SSHPublicKey)
	}
	for name, mode := range map[string]os.FileMode{"gossip.key": 0o600, "server.key": 0o600, "cluster_ssh_key": 0o600, "cluster_ssh_key.pub": 0o600, "api.token": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, want 0700", fi.Mode().Perm())
	}

	if _, err := os.Stat(filepath.Join(dir, "cluster.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new cluster has a cluster.key: %v", err)
	}
	st.Record(StateBoard{Name: "b4", Target: "10.0.0.5:22", User: "root", Address: "10.0.0.5"})
	st.Record(StateBoard{Name: "b1", Target: "10.0.0.2:22", User: "root", Address: "10.0.0.2", Server: true, BootstrapExpect: 1})
	st.Record(StateBoard{Name: "b4", Target: "10.0.0.5:22", User: "pi", Address: "10.0.0.5"}) // update
	if err := st.Save(); err != nil {
		t.Fatal(err)
	}

	again, created, err := LoadState(dir, "lab", true)
	if err != nil || created {
		t.Fatalf("second LoadState = %v, %v; want reuse", created, err)
	}
	if diff := cmp.Diff(st.Secrets, again.Secrets); diff != "" {
		t.Errorf("secrets changed on reload (-first +second):\n%s", diff)
	}
	want := []StateBoard{
		{Name: "b1", Target: "10.0.0.2:22", User: "root", Address: "10.0.0.2", Server: true, BootstrapExpect: 1},
		{Name: "b4", Target: "10.0.0.5:22", User: "pi", Address: "10.0.0.5"},
	}
	if diff := cmp.Diff(want, again.Boards); diff != "" {
		t.Errorf("boards (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:1], again.Servers()); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}

	t.Run("other cluster name", func(t *testing.T) {
		if _, _, err := LoadState(dir, "other", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), `belongs to cluster "lab"`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("partial secrets", func(t *testing.T) {
		d := t.TempDir()
		writeFile(t, d, "gossip.key", st.Secrets.GossipKey, 0o600)
		_, _, err := LoadState(d, "lab", true)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "lacks server.key, cluster_ssh_key, cluster_ssh_key.pub") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("migrates an old folder with one cluster.key", func(t *testing.T) {
		d := t.TempDir()
		legacy := st.Secrets.GossipKey
		writeFile(t, d, "cluster.key", legacy, 0o600)
		writeFile(t, d, "cluster_ssh_key", st.Secrets.SSHPrivateKey, 0o600)
		writeFile(t, d, "cluster_ssh_key.pub", st.Secrets.SSHPublicKey, 0o644)
		ro, _, err := LoadState(d, "lab", false)
		if err != nil {
			t.Fatal(err)
		}
		if !ro.Migrated || !bytes.Equal(ro.Secrets.GossipKey, legacy) || !bytes.Equal(ro.Secrets.ServerKey, legacy) {
			t.Errorf("read-only load: migrated %v, gossip %q, server %q; want the cluster key for both", ro.Migrated, ro.Secrets.GossipKey, ro.Secrets.ServerKey)
		}
		if _, err := os.Stat(filepath.Join(d, "gossip.key")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a read-only load wrote gossip.key: %v", err)
		}
		m, _, err := LoadState(d, "lab", true)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"gossip.key", "server.key", "api.token"} {
			data, mode := readMode(t, filepath.Join(d, n))
			if mode != 0o600 || len(data) == 0 {
				t.Errorf("%s: mode %04o, %d bytes", n, mode, len(data))
			}
		}
		again, _, err := LoadState(d, "lab", true)
		if err != nil {
			t.Fatal(err)
		}
		if again.Migrated || !bytes.Equal(again.Secrets.APIToken, m.Secrets.APIToken) || !bytes.Equal(again.Secrets.ServerKey, legacy) {
			t.Errorf("after migration: migrated %v, token kept %v", again.Migrated, bytes.Equal(again.Secrets.APIToken, m.Secrets.APIToken))
		}
	})
	t.Run("mismatched key pair", func(t *testing.T) {
		d := t.TempDir()
		other, err := GenerateSecrets("lab")
		if err != nil {
			t.Fatal(err)
		}
		writeSecrets(t, d, st.Secrets)
		writeFile(t, d, "cluster_ssh_key.pub", other.SSHPublicKey, 0o600)
		if _, _, err := LoadState(d, "lab", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "does not list the key") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad server key", func(t *testing.T) {
		d := t.TempDir()
		writeSecrets(t, d, st.Secrets)
		writeFile(t, d, "server.key", []byte(strings.TrimSpace(string(st.Secrets.ServerKey))+"\nc2hvcnQ=\n"), 0o600)
		if _, _, err := LoadState(d, "lab", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "server.key: line 2: want 32 bytes") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown key in boards.toml", func(t *testing.T) {
		d := t.TempDir()
		writeSecrets(t, d, st.Secrets)
		writeFile(t, d, "boards.toml", []byte("cluster = \"lab\"\n[[board]]\nname = \"b1\"\nsever = true\n"), 0o600)
		if _, _, err := LoadState(d, "lab", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "sever") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad cluster name", func(t *testing.T) {
		if _, _, err := LoadState(t.TempDir(), "Lab_1", true); err == nil {
			t.Error("accepted cluster name Lab_1")
		}
	})
}

func TestGenerateSecretsDiffer(t *testing.T) {
	a, err := GenerateSecrets("x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateSecrets("x")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.GossipKey, b.GossipKey) || bytes.Equal(a.ServerKey, b.ServerKey) || bytes.Equal(a.SSHPrivateKey, b.SSHPrivateKey) || bytes.Equal(a.APIToken, b.APIToken) {
		t.Error("two generated secrets are equal")
	}
	if err := a.check(); err != nil {
		t.Error(err)
	}
}

func TestDefaultStateDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got, _ := DefaultStateDir(env(map[string]string{"HOME": "/home/u"}), "lab"); got != "/home/u/.config/herd/clusters/lab" {
		t.Errorf("HOME: %q", got)
	}
	if got, _ := DefaultStateDir(env(map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/x"}), "lab"); got != "/x/herd/clusters/lab" {
		t.Errorf("XDG: %q", got)
	}
	if _, err := DefaultStateDir(env(nil), "lab"); err == nil {
		t.Error("no HOME: no error")
	}
}

// writeSecrets writes sec as a state folder's files in d.
func writeSecrets(t *testing.T, d string, sec Secrets) {
	t.Helper()
	writeFile(t, d, "gossip.key", sec.GossipKey, 0o600)
	writeFile(t, d, "server.key", sec.ServerKey, 0o600)
	writeFile(t, d, "cluster_ssh_key", sec.SSHPrivateKey, 0o600)
	writeFile(t, d, "cluster_ssh_key.pub", sec.SSHPublicKey, 0o600)
	writeFile(t, d, "api.token", sec.APIToken, 0o600)
}
