package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
