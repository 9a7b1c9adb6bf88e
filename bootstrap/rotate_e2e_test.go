package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// boardKeys reads a key file from a lab board with the agent's reader.
func boardKeys(t *testing.T, b *labBoard, p string) [][]byte {
	t.Helper()
	keys, err := agent.ReadKeyFile(filepath.Join(b.root, p))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// gossipNode starts a memberlist node with keys (the first encrypts).
func gossipNode(t *testing.T, name string, keys [][]byte) *gossip.Gossip {
	t.Helper()
	cfg := gossip.DefaultLocalConfig()
	cfg.Name, cfg.Key, cfg.AcceptKeys = name, keys[0], keys[1:]
	cfg.Meta = gossip.Meta{SSHAddr: "127.0.0.1:22", BoardFacts: api.BoardFacts{Arch: "amd64"}, Version: "test"}
	cfg.Logger = testutil.Logger(t)
	g, err := gossip.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown() })
	return g
}

// sshLogin reports whether signer may log in to srv (authentication only:
// the forced command need not exist here).
func sshLogin(t *testing.T, l *lab, name string, signer ssh.Signer) error {
	t.Helper()
	srv := l.boards[name].srv
	c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(srv.HostKey), Timeout: 5 * time.Second})
	if err == nil {
		c.Close()
	}
	return err
}

// TestRotateEveryKey bootstraps a lab, rotates each key with Rotate and
// checks after each that every board holds only the new key, that the old
// one no longer works (gossip join, SSH login) and the new one does.
func TestRotateEveryKey(t *testing.T) {
	l := newLab(t, "b1", "b2", "b3")
	ctx := runCtx(t)
	remotes := map[string]*counting{}
	o := l.options(t, remotes, "b1", "b2", "b3")
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Failed(); len(f) > 0 {
		t.Fatal(f[0].Err)
	}
	before := res.State.Secrets
	phasesSeen := map[string][]string{}
	ro := func(key string) RotateOptions {
		return RotateOptions{Key: key, AfterPhase: func(_ context.Context, phase string, res *Result) error {
			phasesSeen[key] = append(phasesSeen[key], phase)
			// Mid-rotation, every board accepts both keys.
			if key == RotateGossip && phase != PhaseDrop {
				if n := len(boardKeys(t, l.boards["b3"], GossipKeyPath)); n != 2 {
					t.Errorf("gossip phase %s: b3 lists %d keys, want 2", phase, n)
				}
			}
			return nil
		}}
	}

	t.Run("gossip", func(t *testing.T) {
		res, err := Rotate(ctx, o, ro(RotateGossip))
		if err != nil {
			t.Fatal(err)
		}
		if diff := strings.Join(phasesSeen[RotateGossip], ","); diff != "add,switch,drop" {
			t.Errorf("phases %s", diff)
		}
		newKey := strings.TrimSpace(string(res.State.Secrets.GossipKey))
		if newKey == strings.TrimSpace(string(before.GossipKey)) || strings.Contains(newKey, "\n") {
			t.Fatalf("state gossip key %q after the rotation", newKey)
		}
		for _, n := range []string{"b1", "b2", "b3"} {
			got, _ := readMode(t, filepath.Join(l.boards[n].root, GossipKeyPath))
			if strings.TrimSpace(string(got)) != newKey {
				t.Errorf("%s gossip.key = %q, want only the new key", n, got)
			}
		}
		// A member with the boards' key file gossips with another; one
		// with the old key is shut out.
		oldKeys, err := agent.ReadKeyFile(writeFile(t, t.TempDir(), "old", before.GossipKey, 0o600))
		if err != nil {
			t.Fatal(err)
		}
		a := gossipNode(t, "a", boardKeys(t, l.boards["b1"], GossipKeyPath))
		b := gossipNode(t, "b", boardKeys(t, l.boards["b3"], GossipKeyPath))
		jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := b.Join(jctx, []string{a.LocalMember().Address()}); err != nil {
			t.Fatalf("members with the new key: %v", err)
		}
		intruder := gossipNode(t, "old", oldKeys)
		short, cancel2 := context.WithTimeout(ctx, time.Second)
		defer cancel2()
		if _, err := intruder.Join(short, []string{a.LocalMember().Address()}); !errors.Is(err, gossip.ErrJoin) {
			t.Errorf("join with the old gossip key: %v, want ErrJoin", err)
		}
	})

	t.Run("server", func(t *testing.T) {
		res, err := Rotate(ctx, o, ro(RotateServer))
		if err != nil {
			t.Fatal(err)
		}
		newKey := res.State.Secrets.ServerKey
		if bytes.Equal(newKey, before.ServerKey) {
			t.Fatal("server key unchanged")
		}
		for _, n := range []string{"b1", "b2"} {
			if got := boardKeys(t, l.boards[n], ServerKeyPath); len(got) != 1 {
				t.Errorf("%s server.key lists %d keys, want 1", n, len(got))
			}
		}
		if _, err := os.Stat(filepath.Join(l.boards["b3"].root, ServerKeyPath)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("worker b3 has a server key: %v", err)
		}
		// Two servers with the boards' key files form a cluster and commit.
		keys := [][][]byte{boardKeys(t, l.boards["b1"], ServerKeyPath), boardKeys(t, l.boards["b2"], ServerKeyPath)}
		c := raftstore.NewTestClusterWithOptions(t, raftstore.TestClusterOptions{N: 2, Configure: func(i int, cfg *raftstore.Config) {
			cfg.ServerKey, cfg.AcceptServerKeys = keys[i][0], keys[i][1:]
		}})
		c.Leader()
	})

	t.Run("ssh", func(t *testing.T) {
		oldSigner, err := ssh.ParsePrivateKey(before.SSHPrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Rotate(ctx, o, ro(RotateSSH))
		if err != nil {
			t.Fatal(err)
		}
		sec := res.State.Secrets
		newSigner, err := ssh.ParsePrivateKey(sec.SSHPrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(newSigner.PublicKey().Marshal(), oldSigner.PublicKey().Marshal()) {
			t.Fatal("ssh key unchanged")
		}
		oldB64 := strings.Fields(string(ssh.MarshalAuthorizedKey(oldSigner.PublicKey())))[1]
		newB64 := strings.Fields(string(ssh.MarshalAuthorizedKey(newSigner.PublicKey())))[1]
		for _, n := range []string{"b1", "b2", "b3"} {
			ak, _ := readMode(t, filepath.Join(l.boards[n].root, ExecAuthKeysPath))
			if strings.Contains(string(ak), oldB64) || strings.Count(string(ak), newB64) != 1 {
				t.Errorf("%s authorized_keys after the rotation:\n%s", n, ak)
			}
		}
		for _, n := range []string{"b1", "b2"} {
			got, _ := readMode(t, filepath.Join(l.boards[n].root, ClusterSSHKey))
			if !bytes.Equal(got, sec.SSHPrivateKey) {
				t.Errorf("%s holds another cluster ssh key than the new one", n)
			}
		}
		// The real sshd, given b3's authorized_keys: the new key logs in,
		// the old one is refused.
		b3 := l.boards["b3"]
		ak, _ := readMode(t, filepath.Join(b3.root, ExecAuthKeysPath))
		sshdKeys := filepath.Join(b3.srv.Dir, "authorized_keys")
		saved, _ := readMode(t, sshdKeys)
		writeFile(t, b3.srv.Dir, "authorized_keys", ak, 0o600)
		defer writeFile(t, b3.srv.Dir, "authorized_keys", saved, 0o600)
		if err := sshLogin(t, l, "b3", newSigner); err != nil {
			t.Errorf("new cluster key: %v", err)
		}
		if err := sshLogin(t, l, "b3", oldSigner); err == nil {
			t.Error("the old cluster key still logs in")
		}
	})

	t.Run("token", func(t *testing.T) {
		res, err := Rotate(ctx, o, ro(RotateToken))
		if err != nil {
			t.Fatal(err)
		}
		tok := res.State.Secrets.APIToken
		if bytes.Equal(tok, before.APIToken) {
			t.Fatal("token unchanged")
		}
		for _, n := range []string{"b1", "b2"} {
			got, _ := readMode(t, filepath.Join(l.boards[n].root, APITokenPath))
			if !bytes.Equal(got, tok) {
				t.Errorf("%s api.token = %q, want the new token", n, got)
			}
		}
		onDisk, _ := readMode(t, res.State.TokenFile())
		if !bytes.Equal(onDisk, tok) {
			t.Errorf("state api.token = %q, want the new token", onDisk)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		res, err := Rotate(ctx, o, ro(RotateMetrics))
		if err != nil {
			t.Fatal(err)
		}
		tok := res.State.Secrets.MetricsToken
		if len(tok) == 0 || bytes.Equal(tok, before.MetricsToken) {
			t.Fatal("metrics token unchanged")
		}
		for _, n := range []string{"b1", "b2", "b3"} {
			got, _ := readMode(t, filepath.Join(l.boards[n].root, MetricsTokenPath))
			if !bytes.Equal(got, tok) {
				t.Errorf("%s metrics.token = %q, want the new token", n, got)
			}
		}
		onDisk, _ := readMode(t, res.State.MetricsTokenFile())
		if !bytes.Equal(onDisk, tok) {
			t.Errorf("state metrics.token = %q, want the new token", onDisk)
		}
	})

	st, _, err := LoadState(l.stateDir, "lab", false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rotation != nil {
		t.Errorf("rotation still recorded: %+v", st.Rotation)
	}
	for _, f := range []string{stateRotateOld, stateRotateNew} {
		if _, err := os.Stat(filepath.Join(l.stateDir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left in the state folder: %v", f, err)
		}
	}
}

// TestRotateResumes: a rotation stopped after a phase goes on from it, and
// another key cannot start meanwhile.
func TestRotateResumes(t *testing.T) {
	l := newLab(t, "b1", "b2")
	ctx := runCtx(t)
	o := l.options(t, map[string]*counting{}, "b1", "b2")
	o.Servers = 1
	if res, err := Run(ctx, o); err != nil || len(res.Failed()) > 0 {
		t.Fatal(err, res.Failed())
	}
	stop := errors.New("stop here")
	_, err := Rotate(ctx, o, RotateOptions{Key: RotateGossip, AfterPhase: func(_ context.Context, phase string, _ *Result) error {
		if phase == PhaseSwitch {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, ErrRotation) || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("err %v", err)
	}
	st, _, err := LoadState(l.stateDir, "lab", false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rotation == nil || *st.Rotation != (Rotation{RotateGossip, PhaseSwitch}) {
		t.Fatalf("recorded rotation %+v, want gossip/switch", st.Rotation)
	}
	if _, err := Rotate(ctx, o, RotateOptions{Key: RotateServer}); !errors.Is(err, ErrRotation) || !strings.Contains(err.Error(), "in progress") {
		t.Errorf("another rotation meanwhile: %v", err)
	}
	var seen []string
	res, err := Rotate(ctx, o, RotateOptions{Key: RotateGossip, AfterPhase: func(_ context.Context, phase string, _ *Result) error {
		seen = append(seen, phase)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, ","); got != "switch,drop" {
		t.Errorf("resumed phases %s, want switch,drop", got)
	}
	if n := len(keyLines(res.State.Secrets.GossipKey)); n != 1 {
		t.Errorf("gossip.key lists %d keys after the rotation", n)
	}
}

// TestBootstrapMigratesOldClusters: a state folder and boards of an older
// herdctl (one cluster.key everywhere, the cluster SSH key on every board,
// unrestricted) come out split: the state keeps the old key as gossip and
// server key, the worker keeps only the gossip key, nobody keeps
// cluster.key, and the authorized_keys line is restricted.
func TestBootstrapMigratesOldClusters(t *testing.T) {
	l := newLab(t, "b1", "b2")
	ctx := runCtx(t)
	legacy, err := NewKeyLine()
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := NewSSHKey("lab")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, l.stateDir, "cluster.key", legacy, 0o600)
	writeFile(t, l.stateDir, "cluster_ssh_key", priv, 0o600)
	writeFile(t, l.stateDir, "cluster_ssh_key.pub", pub, 0o644)
	for _, n := range []string{"b1", "b2"} {
		r := l.boards[n].root
		writeFile(t, r, "etc/herd/cluster.key", legacy, 0o600)
		writeFile(t, r, "etc/herd/cluster_ssh_key", priv, 0o600)
		writeFile(t, r, "etc/herd/cluster_ssh_key.pub", pub, 0o644)
		writeFile(t, r, "root/.ssh/authorized_keys", []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop\n"+string(pub)), 0o600)
	}
	o := l.options(t, map[string]*counting{}, "b1", "b2")
	o.Servers = 1
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Failed(); len(f) > 0 {
		t.Fatal(f[0].Err)
	}
	if !res.State.Migrated || !bytes.Equal(res.State.Secrets.GossipKey, legacy) || !bytes.Equal(res.State.Secrets.ServerKey, legacy) {
		t.Errorf("migrated %v; want cluster.key as both keys", res.State.Migrated)
	}
	gone := map[string][]string{
		"b1": {ClusterKeyPath, ClusterSSHPub},
		"b2": {ClusterKeyPath, ClusterSSHPub, ClusterSSHKey, ServerKeyPath, APITokenPath},
	}
	for n, paths := range gone {
		for _, p := range paths {
			if _, err := os.Stat(filepath.Join(l.boards[n].root, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still has %s (%v)", n, p, err)
			}
		}
		// The old root entry of the cluster key is gone (the user's own
		// login stays); the executor account holds the restricted one.
		ak, _ := readMode(t, filepath.Join(l.boards[n].root, RootAuthKeysPath))
		if want := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop\n"; string(ak) != want {
			t.Errorf("%s root's authorized_keys:\n%s\nwant:\n%s", n, ak, want)
		}
		ak, _ = readMode(t, filepath.Join(l.boards[n].root, ExecAuthKeysPath))
		if want := `restrict,from="127.0.0.1",command="/usr/local/bin/herd ssh-gate" ` + string(pub); string(ak) != want {
			t.Errorf("%s %s:\n%s\nwant:\n%s", n, ExecAuthKeysPath, ak, want)
		}
	}
	if _, mode := readMode(t, filepath.Join(l.stateDir, "cluster_ssh_key.pub")); mode != 0o600 {
		t.Errorf("state cluster_ssh_key.pub mode %04o, want 0600", mode)
	}
	if got := boardKeys(t, l.boards["b1"], ServerKeyPath); len(got) != 1 {
		t.Errorf("b1 server.key: %d keys", len(got))
	}
	var removed []string
	for _, b := range res.Boards {
		removed = append(removed, b.Label+":"+strings.Join(b.Removed, ","))
	}
	if got := strings.Join(removed, " "); got != "b1:/etc/herd/cluster.key,/etc/herd/cluster_ssh_key.pub b2:/etc/herd/cluster.key,/etc/herd/cluster_ssh_key.pub,/etc/herd/cluster_ssh_key" {
		t.Errorf("removed %s", got)
	}

	// Adding a server visits every board (their from= lists change).
	var conf, known bytes.Buffer
	c0, _ := os.ReadFile(l.sshConfig)
	k0, _ := os.ReadFile(l.knownHosts)
	conf.Write(c0)
	known.Write(k0)
	l.addBoard(t, "b3", &conf, &known)
	writeFile(t, l.dir, "ssh_config", conf.Bytes(), 0o600)
	writeFile(t, l.dir, "known_hosts", known.Bytes(), 0o600)
	o = l.options(t, map[string]*counting{}, "b3")
	o.Add, o.AddServers = true, true
	res, err = Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, b := range res.Boards {
		if b.Err != nil {
			t.Errorf("%s: %v", b.Label, b.Err)
		}
		labels = append(labels, b.Label)
	}
	if got := strings.Join(labels, ","); got != "b3,b1,b2" {
		t.Errorf("--add --server visited %s, want b3,b1,b2", got)
	}
}
