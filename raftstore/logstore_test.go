package raftstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
)

// writePods commits pods named prefix0..prefix(n-1) through s.
func writePods(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := s.Txn(ctx, []Op{op(OpCreate, obj(api.KindPod, fmt.Sprintf("%s%d", prefix, i), 0, `{}`, "", nil))}); err != nil {
			t.Fatal(err)
		}
	}
}

func podNames(t *testing.T, s *Store) []string {
	t.Helper()
	raws, _, err := s.List(api.KindPod)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range raws {
		out = append(out, r.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != "snapshots" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestLogStoreMigrates: a data dir written with bolt opens with raft-wal
// (migrated, every committed object kept, raft.db kept as
// raft.db.migrated), and back; the term survives both ways.
func TestLogStoreMigrates(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 1, OnDisk: true, Configure: func(_ int, cfg *Config) {
		cfg.LogStore = LogStoreBolt
		cfg.SnapshotThreshold = 1 << 30 // everything stays in the log
	}})
	writePods(t, c.Stores[0], "a", 30)
	want := podNames(t, c.Stores[0])
	term := c.Stores[0].raft.CurrentTerm()
	dir := filepath.Join(c.Configs[0].DataDir, "raft")
	if d := cmp.Diff([]string{"raft.db"}, dirNames(t, dir)); d != "" {
		t.Fatalf("bolt data dir (-want +got):\n%s", d)
	}

	c.Configs[0].LogStore = "" // the default: raft-wal
	s := c.Restart(0)
	c.Leader()
	if d := cmp.Diff(want, podNames(t, s)); d != "" {
		t.Errorf("objects after the migration to raft-wal (-want +got):\n%s", d)
	}
	if got := s.raft.CurrentTerm(); got < term {
		t.Errorf("term %d after the migration, was %d", got, term)
	}
	if d := cmp.Diff([]string{"raft.db.migrated", "wal"}, dirNames(t, dir)); d != "" {
		t.Errorf("data dir after the migration (-want +got):\n%s", d)
	}
	writePods(t, s, "b", 10)
	want = podNames(t, s)

	c.Configs[0].LogStore = LogStoreBolt
	s = c.Restart(0)
	c.Leader()
	if d := cmp.Diff(want, podNames(t, s)); d != "" {
		t.Errorf("objects after the migration back to bolt (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"raft.db", "wal.migrated"}, dirNames(t, dir)); d != "" {
		t.Errorf("data dir after migrating back (-want +got):\n%s", d)
	}
}

// TestLogStoreInterruptedMigration: a crash mid-migration leaves a
// half-written wal.migrating beside raft.db; the next start throws it
// away and migrates again. A crash after the new store was renamed into
// place (raft.db and wal both there) finishes by retiring raft.db.
func TestLogStoreInterruptedMigration(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 1, OnDisk: true, Configure: func(_ int, cfg *Config) {
		cfg.LogStore = LogStoreBolt
		cfg.SnapshotThreshold = 1 << 30
	}})
	writePods(t, c.Stores[0], "a", 20)
	want := podNames(t, c.Stores[0])
	c.Stop(0)
	dir := filepath.Join(c.Configs[0].DataDir, "raft")
	if err := os.MkdirAll(filepath.Join(dir, "wal.migrating"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wal.migrating", "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Configs[0].LogStore = LogStoreWAL
	s := c.Restart(0)
	c.Leader()
	if d := cmp.Diff(want, podNames(t, s)); d != "" {
		t.Errorf("objects after the redone migration (-want +got):\n%s", d)
	}
	c.Stop(0)
	// Put raft.db back as if the crash came right after the rename.
	if err := os.Rename(filepath.Join(dir, "raft.db.migrated"), filepath.Join(dir, "raft.db")); err != nil {
		t.Fatal(err)
	}
	s = c.Restart(0)
	c.Leader()
	if d := cmp.Diff(want, podNames(t, s)); d != "" {
		t.Errorf("objects after finishing the rename (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"raft.db.migrated", "wal"}, dirNames(t, dir)); d != "" {
		t.Errorf("data dir (-want +got):\n%s", d)
	}
}

func TestLogStoreConfig(t *testing.T) {
	cfg := TestConfig(t, "n", TestKey("n"))
	cfg.LogStore = "leveldb"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `LogStore "leveldb"`) {
		t.Errorf("Validate = %v, want the LogStore named", err)
	}
}

// TestWALTailTruncationSurvivesRestart: a follower that was a leader
// clears the log suffix it never committed (a tail truncation), then is
// killed; its log must open again. raft-wal v0.4.0 sealed the segment
// without an index block there and could not read index 1 after a
// restart (hashicorp/raft-wal#31): raft panicked at start.
func TestWALTailTruncationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	hc := newHCLog(testLogger(t), "raft", nil)
	d, err := openDiskLog(dir, LogStoreWAL, hc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := d.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := d.logs.DeleteRange(9, 10); err != nil { // "clearing log suffix"
		t.Fatal(err)
	}
	if err := d.logs.StoreLogs([]*raft.Log{{Index: 9, Term: 2, Type: raft.LogCommand, Data: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = openDiskLog(dir, LogStoreWAL, hc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, want := range []raft.Log{{Index: 1, Term: 1}, {Index: 8, Term: 1}, {Index: 9, Term: 2}} {
		var l raft.Log
		if err := d.logs.GetLog(want.Index, &l); err != nil || l.Term != want.Term {
			t.Errorf("GetLog(%d) after a restart = term %d, %v; want term %d", want.Index, l.Term, err, want.Term)
		}
	}
	if last, _ := d.logs.LastIndex(); last != 9 {
		t.Errorf("LastIndex %d, want 9", last)
	}
}
