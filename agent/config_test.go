package agent

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/herd-dev/herd/api"
	"github.com/spf13/pflag"
)

// TestRaftLogStoreConfig: raft_log_store is read from the file and checked
// by Validate, naming the key and the choices.
func TestRaftLogStoreConfig(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"wal", ""},
		{"bolt", ""},
		{"leveldb", `raft_log_store "leveldb": want "wal" (the default) or "bolt"`},
	} {
		path := filepath.Join(t.TempDir(), "agent.toml")
		if err := os.WriteFile(path, []byte("name = \"pi1\"\nraft_log_store = \""+c.value+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		if err := LoadConfigFile(&cfg, path); err != nil {
			t.Fatal(err)
		}
		if cfg.RaftLogStore != c.value {
			t.Errorf("raft_log_store %q read as %q", c.value, cfg.RaftLogStore)
		}
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("raft_log_store %q: Validate = %v, want %q", c.value, err, c.want)
		}
	}
}

// TestPprofConfig: pprof is off by default and read from the file and
// from --pprof.
func TestPprofConfig(t *testing.T) {
	if DefaultConfig().Pprof {
		t.Error("DefaultConfig().Pprof = true, want off")
	}
	path := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(path, []byte("name = \"pi1\"\npprof = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if err := LoadConfigFile(&cfg, path); err != nil {
		t.Fatal(err)
	}
	if !cfg.Pprof {
		t.Error("pprof = true read as false")
	}
	fs := pflag.NewFlagSet("herd agent", pflag.ContinueOnError)
	agentCmd(io.Discard).flags(fs)
	if err := fs.Parse([]string{"--pprof"}); err != nil {
		t.Fatal(err)
	}
	flagged := DefaultConfig()
	fc := DefaultConfig()
	fc.Pprof = true
	applyFlags(fs, &flagged, &fc)
	if !flagged.Pprof {
		t.Error("--pprof not applied")
	}
}

// TestTuneRuntime: the agent's GC target is DefaultGCPercent unless GOGC
// is set, GOMAXPROCS is DefaultMaxProcs unless GOMAXPROCS is set, and heap
// profile sampling is on only with pprof.
func TestTuneRuntime(t *testing.T) {
	prevGC := debug.SetGCPercent(100)
	prevRate := runtime.MemProfileRate
	prevProcs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		debug.SetGCPercent(prevGC)
		runtime.MemProfileRate = prevRate
		runtime.GOMAXPROCS(prevProcs)
	})
	env := func(gogc, maxprocs string) func(string) string {
		return func(k string) string {
			switch k {
			case "GOGC":
				return gogc
			case "GOMAXPROCS":
				return maxprocs
			}
			return ""
		}
	}
	for _, c := range []struct {
		name         string
		pprof        bool
		gogc         string
		maxprocs     string
		wantGC       int
		wantMaxProcs int // 0: left as it was
		wantRate     int
	}{
		{"defaults", false, "", "", DefaultGCPercent, DefaultMaxProcs, 0},
		{"pprof", true, "", "", DefaultGCPercent, DefaultMaxProcs, 512 * 1024},
		{"GOGC set", false, "200", "", 100, DefaultMaxProcs, 0},
		{"GOMAXPROCS set", false, "", "3", DefaultGCPercent, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			runtime.MemProfileRate = 512 * 1024
			const sentinel = 7 // what GOMAXPROCS was before, to see it left alone
			runtime.GOMAXPROCS(sentinel)
			cfg := DefaultConfig()
			cfg.Pprof = c.pprof
			tuneRuntime(cfg, env(c.gogc, c.maxprocs))
			if got := debug.SetGCPercent(100); got != c.wantGC {
				t.Errorf("GC percent %d, want %d", got, c.wantGC)
			}
			wantProcs := c.wantMaxProcs
			if wantProcs == 0 {
				wantProcs = sentinel
			}
			if got := runtime.GOMAXPROCS(0); got != wantProcs {
				t.Errorf("GOMAXPROCS %d, want %d", got, wantProcs)
			}
			if runtime.MemProfileRate != c.wantRate {
				t.Errorf("MemProfileRate %d, want %d", runtime.MemProfileRate, c.wantRate)
			}
		})
	}
}

// TestNameFromHostConfig: without a name the agent takes its host name's
// first label; a host name that makes no name is refused, naming it.
func TestNameFromHostConfig(t *testing.T) {
	for _, c := range []struct{ host, name, want string }{
		{"Pi-4.lan", "pi-4", ""},
		{"my_pi.lan", "my_pi", `from the host name "my_pi.lan"`},
	} {
		cfg := DefaultConfig()
		cfg.Name, cfg.hostName = api.NameFromHost(c.host), c.host
		if cfg.Name != c.name {
			t.Errorf("host %q: name %q, want %q", c.host, cfg.Name, c.name)
		}
		err := cfg.Validate()
		if c.want == "" && err != nil && strings.Contains(err.Error(), "name") ||
			c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "set name")) {
			t.Errorf("host %q: Validate = %v, want %q", c.host, err, c.want)
		}
	}
}
