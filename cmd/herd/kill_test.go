package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// testToken is the API token of the test agents.
const testToken = "kill-test-token-0123456789"

// proc is one herd agent process.
type proc struct {
	name, dir, api string
	cmd            *exec.Cmd
}

func (p *proc) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(p.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "agent", "--config", filepath.Join(p.dir, "agent.toml"))
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); logf.Close() }()
}

// TestKill9LeaderLosesNothing runs three real agent processes, applies
// through one, kills the leader with SIGKILL, and checks that a new leader
// serves everything acknowledged, then restarts the killed agent from its
// data dir and checks it caught up.
func TestKill9LeaderLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agent processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "herd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	procs := startAgents(t, bin, dir, "k")
	t.Cleanup(func() {
		for _, p := range procs {
			if p.cmd != nil && p.cmd.Process != nil {
				p.cmd.Process.Kill()
			}
		}
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(filepath.Join(p.dir, "agent.log"))
				t.Logf("%s log:\n%s", p.name, b)
			}
		}
	})
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, "http://"+p.api)
	}
	c, err := client.New(addrs, client.Options{Token: testToken, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leaderOf := func(c *client.Client) (string, error) {
		st, err := c.Status(ctx)
		if err != nil {
			return "", err
		}
		if st.Leader == "" {
			return "", fmt.Errorf("%s sees no leader", st.Node)
		}
		return st.Leader, nil
	}
	var leader string
	testutil.Eventually(t, 20*time.Second, "a leader", func() (err error) { leader, err = leaderOf(c); return err })

	// Apply a batch of objects, one acknowledged write at a time.
	const n = 20
	for i := 0; i < n; i++ {
		svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: fmt.Sprintf("s%02d", i)},
			Spec: api.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []api.ServicePort{{Target: "http"}}}}
		if _, err := c.Apply(ctx, []api.Object{svc}, false); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	var victim *proc
	for _, p := range procs {
		if p.name == leader {
			victim = p
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, "http://"+p.api)
		}
	}
	sc, _ := client.New(survivors, client.Options{Token: testToken, Timeout: 5 * time.Second})
	testutil.Eventually(t, 20*time.Second, "a new leader", func() error {
		l, err := leaderOf(sc)
		if err != nil {
			return err
		}
		if l == leader {
			return fmt.Errorf("still %s", l)
		}
		return nil
	})
	// Every acknowledged write must show up. Reads are linearizable, but
	// the first ones after the election may fail (503) until the new
	// leader has passed its barrier, hence the wait.
	testutil.Eventually(t, 20*time.Second, "every acknowledged service on the survivors", func() error {
		items, _, err := sc.List(ctx, api.KindService)
		if err != nil {
			return err
		}
		if len(items) != n {
			return fmt.Errorf("after kill -9 of the leader: %d services, want %d", len(items), n)
		}
		return nil
	})
	// Restart the killed agent from its data dir: it serves all of them.
	victim.start(t, bin)
	vc, _ := client.New([]string{"http://" + victim.api}, client.Options{Token: testToken, Timeout: 5 * time.Second})
	testutil.Eventually(t, 20*time.Second, "the restarted agent to catch up", func() error {
		items, _, err := vc.List(ctx, api.KindService)
		if err != nil {
			return err
		}
		if len(items) != n {
			return fmt.Errorf("%d services", len(items))
		}
		return nil
	})
}

// startAgents starts three server agents named prefix1-3 (bootstrap_expect
// 3, one cluster key, the test token, each on free ports of the test's
// loopback address) from bin, with their data, config and logs under dir.
// The caller kills them in its cleanup.
func startAgents(t *testing.T, bin, dir, prefix string) []*proc {
	t.Helper()
	key, err := exec.Command(bin, "keygen").Output()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The servers use both Raft log stores (the default raft-wal, and
	// bolt), so the kill -9 tests run on each.
	logStores := []string{"wal", "bolt"}
	var procs []*proc
	var gossipAddrs []string
	for range 3 {
		gossipAddrs = append(gossipAddrs, testutil.FreeAddr(t))
	}
	for i := range 3 {
		name := fmt.Sprintf("%s%d", prefix, i+1)
		p := &proc{name: name, dir: filepath.Join(dir, name), api: testutil.FreeAddr(t)}
		if err := os.MkdirAll(p.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`name = %q
data_dir = %q
bootstrap_expect = 3
join = [%s]
cluster_key_file = %q
gossip_bind = %q
raft_bind = %q
api_listen = [%q]
api_token_file = %q
ssh_address = "127.0.0.1:22"
ssh_host_key_file = ""
raft_log_store = %q
`, p.name, filepath.Join(p.dir, "data"), `"`+strings.Join(gossipAddrs, `", "`)+`"`, keyFile, gossipAddrs[i], testutil.FreeAddr(t), p.api, tokenFile, logStores[i%len(logStores)])
		if err := os.WriteFile(filepath.Join(p.dir, "agent.toml"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		p.start(t, bin)
		procs = append(procs, p)
	}
	return procs
}
