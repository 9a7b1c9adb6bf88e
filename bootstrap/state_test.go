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
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(st.Secrets.ClusterKey)))
	if err != nil || len(key) != 32 {
		t.Errorf("cluster key %q: %d bytes, %v", st.Secrets.ClusterKey, len(key), err)
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
	for name, mode := range map[string]os.FileMode{"cluster.key": 0o600, "cluster_ssh_key": 0o600, "cluster_ssh_key.pub": 0o644} {
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
		writeFile(t, d, "cluster.key", st.Secrets.ClusterKey, 0o600)
		_, _, err := LoadState(d, "lab", true)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "lacks cluster_ssh_key, cluster_ssh_key.pub") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("mismatched key pair", func(t *testing.T) {
		d := t.TempDir()
		other, err := GenerateSecrets("lab")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, d, "cluster.key", st.Secrets.ClusterKey, 0o600)
		writeFile(t, d, "cluster_ssh_key", st.Secrets.SSHPrivateKey, 0o600)
		writeFile(t, d, "cluster_ssh_key.pub", other.SSHPublicKey, 0o644)
		if _, _, err := LoadState(d, "lab", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "does not match") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad cluster key", func(t *testing.T) {
		d := t.TempDir()
		writeFile(t, d, "cluster.key", []byte("c2hvcnQ=\n"), 0o600)
		writeFile(t, d, "cluster_ssh_key", st.Secrets.SSHPrivateKey, 0o600)
		writeFile(t, d, "cluster_ssh_key.pub", st.Secrets.SSHPublicKey, 0o644)
		if _, _, err := LoadState(d, "lab", true); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "32 bytes") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown key in boards.toml", func(t *testing.T) {
		d := t.TempDir()
		writeFile(t, d, "cluster.key", st.Secrets.ClusterKey, 0o600)
		writeFile(t, d, "cluster_ssh_key", st.Secrets.SSHPrivateKey, 0o600)
		writeFile(t, d, "cluster_ssh_key.pub", st.Secrets.SSHPublicKey, 0o644)
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
	if bytes.Equal(a.ClusterKey, b.ClusterKey) || bytes.Equal(a.SSHPrivateKey, b.SSHPrivateKey) {
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
