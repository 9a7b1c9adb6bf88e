package gossip

import (
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

var debugLog = flag.Bool("gossip.debug", false, "log memberlist debug output in tests")

func newTestLogger(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if *debugLog {
		level = slog.LevelDebug
	}
	return testutil.LevelLogger(t, level)
}

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// testMeta returns a small valid Meta for node name.
func testMeta(name string) Meta {
	return Meta{
		SSHAddr: "127.0.0.1:22",
		BoardFacts: api.BoardFacts{
			Arch:              "arm64",
			ArchVariant:       "arm64",
			KernelArch:        "aarch64",
			Cgroup:            "v2",
			CgroupControllers: []string{"cpu", "memory"},
			Model:             "test board " + name,
			MemoryBytes:       1 << 30,
			CPUs:              4,
		},
		Labels:  map[string]string{"name": name},
		Version: "test",
	}
}

// testConfig returns a local config for name with key.
func testConfig(t testing.TB, name string, key []byte) Config {
	cfg := DefaultLocalConfig()
	cfg.Name = name
	cfg.Key = key
	cfg.Meta = testMeta(name)
	cfg.Logger = newTestLogger(t)
	return cfg
}

// startNode starts a Gossip from cfg and shuts it down at the end of the
// test.
func startNode(t testing.TB, cfg Config) *Gossip {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = g.Shutdown() })
	return g
}

// waitEvent reads g's events until one matches or the deadline passes.
func waitEvent(t testing.TB, g *Gossip, within time.Duration, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case ev, ok := <-g.Events():
			if !ok {
				t.Fatalf("events closed; saw %v", seen)
			}
			if match(ev) {
				return ev
			}
			seen = append(seen, fmt.Sprintf("%s %s(%s)", ev.Type, ev.Member.Name, ev.Member.State))
		case <-timer.C:
			t.Fatalf("no matching event within %v; saw %v", within, seen)
		}
	}
}

// states summarises g's member table as "name=state ...".
func states(g *Gossip) string {
	var b strings.Builder
	for _, m := range g.Members() {
		fmt.Fprintf(&b, "%s=%s ", m.Name, m.State)
	}
	return strings.TrimSpace(b.String())
}

// memberState returns name's state in g's table, "" if absent.
func memberState(g *Gossip, name string) api.MemberState {
	for _, m := range g.Members() {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}
