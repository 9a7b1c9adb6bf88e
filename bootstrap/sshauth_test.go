package bootstrap

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herd-dev/herd/internal/testutil"
	"golang.org/x/crypto/ssh"
)

// newKeyFile writes an ed25519 key (passphrase-protected when pass != "")
// and returns its path and public key.
func newKeyFile(t *testing.T, dir, name, pass string) (string, ssh.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if pass == "" {
		block, err = ssh.MarshalPrivateKey(priv, name)
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, name, []byte(pass))
	}
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, dir, name, pem.EncodeToMemory(block), 0o600)
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return p, pub, priv
}

func keysOf(ss []ssh.Signer) []string {
	var out []string
	for _, s := range ss {
		out = append(out, ssh.FingerprintSHA256(s.PublicKey()))
	}
	return out
}

func TestAuthSigners(t *testing.T) {
	home := t.TempDir()
	sshDir := filepath.Join(home, ".ssh")
	def, defPub, _ := newKeyFile(t, sshDir, "id_ed25519", "")
	explicit, explicitPub, _ := newKeyFile(t, t.TempDir(), "explicit", "")
	locked, lockedPub, lockedPriv := newKeyFile(t, t.TempDir(), "locked", "secret")
	cfgKey, cfgPub, _ := newKeyFile(t, t.TempDir(), "from-config", "")
	_, agentPub, agentPriv := newKeyFile(t, t.TempDir(), "agent-only", "")
	fp := ssh.FingerprintSHA256
	target := Target{Arg: "b1"}

	t.Run("default key", func(t *testing.T) {
		s, kf, err := NewAuth(nil, home, "").Signers(target)
		if err != nil || kf != def || len(s) != 1 || fp(s[0].PublicKey()) != fp(defPub) {
			t.Errorf("Signers = %q, %q, %v", keysOf(s), kf, err)
		}
	})
	t.Run("explicit and config keys, no defaults", func(t *testing.T) {
		tg := target
		tg.IdentityFiles = []string{filepath.Join(home, "missing"), cfgKey}
		s, kf, err := NewAuth([]string{explicit}, home, "").Signers(tg)
		if err != nil || kf != explicit {
			t.Fatalf("Signers = %q, %q, %v", keysOf(s), kf, err)
		}
		if got, want := keysOf(s), []string{fp(explicitPub), fp(cfgPub)}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("keys %q, want %q", got, want)
		}
	})
	t.Run("explicit key missing", func(t *testing.T) {
		_, _, err := NewAuth([]string{filepath.Join(home, "nope")}, home, "").Signers(target)
		if err == nil || !strings.Contains(err.Error(), "-i key") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("passphrase-protected without agent", func(t *testing.T) {
		_, _, err := NewAuth([]string{locked}, home, "").Signers(target)
		if err == nil || !strings.Contains(err.Error(), "ssh-add "+locked) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("passphrase-protected key through the agent", func(t *testing.T) {
		a := NewAuth([]string{locked}, home, testutil.SSHAgent(t, lockedPriv, agentPriv))
		defer a.Close()
		s, kf, err := a.Signers(target)
		if err != nil || kf != locked {
			t.Fatalf("Signers = %q, %q, %v", keysOf(s), kf, err)
		}
		if got, want := keysOf(s), []string{fp(lockedPub), fp(agentPub)}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("keys %q, want %q (locked key once, through the agent)", got, want)
		}
		// The agent signer really signs.
		sig, err := s[0].Sign(rand.Reader, []byte("data"))
		if err != nil || lockedPub.Verify([]byte("data"), sig) != nil {
			t.Errorf("agent signature: %v", err)
		}
	})
	t.Run("agent only", func(t *testing.T) {
		a := NewAuth(nil, t.TempDir(), testutil.SSHAgent(t, agentPriv))
		defer a.Close()
		s, kf, err := a.Signers(target)
		if err != nil || kf != "" || len(s) != 1 || !bytes.Equal(s[0].PublicKey().Marshal(), agentPub.Marshal()) {
			t.Errorf("Signers = %q, %q, %v", keysOf(s), kf, err)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		_, _, err := NewAuth(nil, t.TempDir(), filepath.Join(t.TempDir(), "no-agent")).Signers(target)
		if !errors.Is(err, ErrNoKeys) || !strings.Contains(err.Error(), "ssh-agent at") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestLoadKnownHostsNeedsAFile(t *testing.T) {
	_, err := LoadKnownHosts([]string{filepath.Join(t.TempDir(), "known_hosts")})
	if err == nil || !strings.Contains(err.Error(), "--known-hosts") {
		t.Errorf("err = %v", err)
	}
}
