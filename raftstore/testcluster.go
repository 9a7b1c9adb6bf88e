package raftstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// TB is the part of testing.TB the test cluster helpers use; *testing.T
// and *testing.B satisfy it. raftstore takes it instead of importing
// package testing, so testing stays out of production binaries.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	TempDir() string
	Output() io.Writer
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// TestClusterOptions configures NewTestClusterWithOptions.
type TestClusterOptions struct {
	// N is the number of servers, all voters.
	N int
	// OnDisk stores each server's state in its own t.TempDir() instead of
	// memory, so Restart recovers from bolt.
	OnDisk bool
	// Configure, if set, adjusts each server's Config before Open.
	Configure func(i int, cfg *Config)
	// NoBootstrap leaves the servers unbootstrapped (and does not wait for a
	// leader).
	NoBootstrap bool
}

// TestCluster is an in-process Raft cluster on loopback TCP for tests. Use
// NewTestCluster. Its methods call t.Fatal on failure and must be called
// from the test's goroutine.
type TestCluster struct {
	t TB
	// Key is the server key every server shares.
	Key []byte
	// Stores are the servers, by index; an entry is nil while stopped.
	Stores []*Store
	// Configs are the configs the servers were (last) opened with; after
	// the first Open, BindAddr and AdvertiseAddr hold the bound address so a
	// restart keeps it.
	Configs []Config

	net *testNet
}

// TestConfig returns a Config for a test server on 127.0.0.1 with a free
// port, fast (test-only) timings and a logger writing to t.Log.
func TestConfig(t TB, nodeID string, key []byte) Config {
	cfg := DefaultConfig()
	cfg.NodeID = nodeID
	cfg.BindAddr = "127.0.0.1:0"
	cfg.ServerKey = key
	cfg.Logger = testLogger(t)
	// Fast enough for tests, slow enough for a loaded 2-core machine.
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.HeartbeatInterval = 75 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 200 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.HandshakeTimeout = 2 * time.Second
	return cfg
}

// TestKey returns a deterministic server key for tests; different seeds
// give different keys.
func TestKey(seed string) []byte {
	k := sha256.Sum256([]byte("herd test cluster key " + seed))
	return k[:]
}

// NewTestCluster starts n voting servers with in-memory state, bootstraps
// them and waits for a leader. Everything is closed when the test ends.
func NewTestCluster(t TB, n int) *TestCluster {
	t.Helper()
	return NewTestClusterWithOptions(t, TestClusterOptions{N: n})
}

// NewTestClusterWithOptions is NewTestCluster with options.
func NewTestClusterWithOptions(t TB, opts TestClusterOptions) *TestCluster {
	t.Helper()
	if opts.N < 1 {
		t.Fatalf("NewTestCluster: need at least one server, got %d", opts.N)
	}
	c := &TestCluster{t: t, Key: TestKey(t.Name()), net: newTestNet()}
	logger := testLogger(t)
	dirs := make([]string, opts.N)
	if opts.OnDisk {
		for i := range dirs {
			dirs[i] = t.TempDir()
		}
	}
	// Cleanups run last-in first-out: the servers close before the logger
	// stops and before their directories are removed.
	t.Cleanup(c.Close)
	for i := range opts.N {
		id := fmt.Sprintf("node%d", i)
		cfg := TestConfig(t, id, c.Key)
		cfg.Logger = logger
		cfg.DataDir = dirs[i]
		cfg.network = c.net.node(id)
		if opts.Configure != nil {
			opts.Configure(i, &cfg)
		}
		s, err := Open(cfg)
		if err != nil {
			t.Fatalf("NewTestCluster: open server %d: %v", i, err)
		}
		cfg.BindAddr, cfg.AdvertiseAddr = s.Addr(), s.Addr()
		c.Stores = append(c.Stores, s)
		c.Configs = append(c.Configs, cfg)
	}
	if opts.NoBootstrap {
		return c
	}
	servers := c.Servers()
	for i, s := range c.Stores {
		if err := s.Bootstrap(servers); err != nil {
			t.Fatalf("NewTestCluster: bootstrap server %d: %v", i, err)
		}
	}
	c.Leader()
	return c
}

// Servers returns the configuration of all servers as voters.
func (c *TestCluster) Servers() []Server {
	out := make([]Server, len(c.Configs))
	for i, cfg := range c.Configs {
		out[i] = Server{ID: cfg.NodeID, Address: cfg.AdvertiseAddr, Voter: true}
	}
	return out
}

// Leader waits (up to 15 s) until a running server is leader with its
// store caught up (its LeadershipChanges subscribers were told) and returns
// its index.
func (c *TestCluster) Leader() int {
	c.t.Helper()
	var idx int
	c.Eventually(15*time.Second, "a leader", func() bool {
		idx = -1
		for i, s := range c.Stores {
			if s != nil && s.IsLeader() && s.leadership.current() {
				if idx >= 0 {
					return false // two leaders in different terms; wait
				}
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

// NewLeader waits (up to 10 s) until a running server other than old
// leads, and returns its index: after old was cut off or told to hand
// leadership over, while old may still believe it leads.
func (c *TestCluster) NewLeader(old int) int {
	c.t.Helper()
	idx := -1
	c.Eventually(10*time.Second, "a new leader", func() bool {
		for i, s := range c.Stores {
			if i != old && s != nil && s.IsLeader() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// Follower returns the index of a running server that is not the leader.
func (c *TestCluster) Follower() int {
	c.t.Helper()
	leader := c.Leader()
	for i, s := range c.Stores {
		if s != nil && i != leader {
			return i
		}
	}
	c.t.Fatalf("TestCluster: no running follower")
	return -1
}

// Stop closes server i.
func (c *TestCluster) Stop(i int) {
	c.t.Helper()
	if s := c.Stores[i]; s != nil {
		if err := s.Close(); err != nil {
			c.t.Errorf("TestCluster: close server %d: %v", i, err)
		}
		c.Stores[i] = nil
	}
}

// Restart closes server i if it runs and opens it again with the same
// config (same address; same DataDir when on disk).
func (c *TestCluster) Restart(i int) *Store {
	c.t.Helper()
	c.Stop(i)
	s, err := Open(c.Configs[i])
	if err != nil {
		c.t.Fatalf("TestCluster: reopen server %d: %v", i, err)
	}
	c.Stores[i] = s
	return s
}

// Isolate cuts server i off, as if its board lost power or its process
// froze: it keeps running, but nothing it sends arrives and nothing
// reaches it; dials to and from it hang until their deadline. A leader
// steps down once its lease runs out and the others elect a new one.
func (c *TestCluster) Isolate(i int) { c.net.setCut(c.Configs[i].NodeID, true) }

// Heal reconnects server i after Isolate. Connections open while it was
// cut stay dead until their owners give up on them; new ones work.
func (c *TestCluster) Heal(i int) { c.net.setCut(c.Configs[i].NodeID, false) }

// Close heals every server and closes every running one. It is
// registered with t.Cleanup.
func (c *TestCluster) Close() {
	for i := range c.Configs {
		c.Heal(i)
	}
	var wg sync.WaitGroup
	for i, s := range c.Stores {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
		}()
		c.Stores[i] = nil
	}
	wg.Wait()
}

// Eventually polls cond every 10 ms until it holds, failing the test after
// timeout with what was awaited.
func (c *TestCluster) Eventually(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	eventually(c.t, timeout, what, cond)
}

// eventually polls cond every 10 ms until it holds, failing t after timeout
// with what was awaited. Tests use internal/testutil instead; raftstore
// cannot import it without linking package testing.
func eventually(t TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// testLogger returns a slog.Logger writing to the test's output. It
// stops writing once the test's cleanup has run, so goroutines that outlive
// the test cannot make it panic.
func testLogger(t TB) *slog.Logger {
	w := &testWriter{out: t.Output()}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	out  io.Writer
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.out.Write(p)
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
