package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"
)

// On-disk names under DataDir/raft.
const (
	walDir      = "wal"     // raft-wal: segment files and wal-meta.db
	boltFile    = "raft.db" // raft-boltdb: log and stable store in one file
	migratingTo = ".migrating"
	migratedTo  = ".migrated"
)

// WALSegmentSize is the size of one raft-wal segment file. raft-wal's
// default is 64 MiB; herd's log is truncated to TrailingLogs (4096
// entries, a few MB) after each snapshot, so 16 MiB segments keep a Pi's
// disk use small while rotating rarely. Segments are preallocated with
// fallocate (no bytes written).
const WALSegmentSize = 16 << 20

// diskLog is the open on-disk log and stable store.
type diskLog struct {
	kind   string
	logs   raft.LogStore
	stable raft.StableStore
	close  func() error
}

// Close closes the store's files.
func (d *diskLog) Close() error {
	if err := d.close(); err != nil {
		return fmt.Errorf("raftstore: close %s log store: %w", d.kind, err)
	}
	return nil
}

// openDiskLog opens the log store kind ("" is LogStoreWAL) in dir. When
// dir holds only the other store's data (an older herd, or a switch of
// LogStore), it is migrated first: copied into a new store beside it
// (NAME.migrating), renamed into place, and the old one renamed
// NAME.migrated (kept for a rollback; delete it once satisfied). A
// migration cut short by a crash leaves the old store in place and is
// redone at the next start.
func openDiskLog(dir, kind string, hc *hclogAdapter, log *slog.Logger) (*diskLog, error) {
	if kind == "" {
		kind = LogStoreWAL
	}
	from, to := LogStoreBolt, kind
	if kind == LogStoreBolt {
		from = LogStoreWAL
	}
	if err := os.RemoveAll(filepath.Join(dir, storeName(to)+migratingTo)); err != nil {
		return nil, fmt.Errorf("raftstore: remove an interrupted migration: %w", err)
	}
	switch have, old := exists(filepath.Join(dir, storeName(to))), exists(filepath.Join(dir, storeName(from))); {
	case have && old:
		// A migration renamed the new store into place but not the old
		// one away: finish it.
		if err := retire(dir, from); err != nil {
			return nil, err
		}
	case old:
		if err := migrateStore(dir, from, to, hc, log); err != nil {
			return nil, err
		}
	}
	return openKind(dir, storeName(to), kind, hc)
}

func storeName(kind string) string {
	if kind == LogStoreBolt {
		return boltFile
	}
	return walDir
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// openKind opens the store of kind at dir/name.
func openKind(dir, name, kind string, hc *hclogAdapter) (*diskLog, error) {
	path := filepath.Join(dir, name)
	if kind == LogStoreBolt {
		b, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: time.Second}})
		if err != nil {
			return nil, fmt.Errorf("raftstore: open %s: %w", path, err)
		}
		return &diskLog{kind: kind, logs: b, stable: b, close: b.Close}, nil
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	// raft-wal's Close leaves its meta database (bolt, with a file lock)
	// open: it is ours to close, or a reopen in this process would wait on
	// the lock for ever.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(path, wal.WithSegmentSize(WALSegmentSize), wal.WithLogger(hc.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("raftstore: open %s: %w", path, err)
	}
	return &diskLog{kind: kind, logs: w, stable: w, close: func() error { return errors.Join(w.Close(), meta.Close()) }}, nil
}

// migrateStore copies the log and stable store of kind from into a new
// store of kind to, then swaps them (see openDiskLog).
func migrateStore(dir, from, to string, hc *hclogAdapter, log *slog.Logger) error {
	start := time.Now()
	src, err := openKind(dir, storeName(from), from, hc)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := storeName(to) + migratingTo
	dst, err := openKind(dir, tmp, to, hc)
	if err != nil {
		return err
	}
	first, _ := src.logs.FirstIndex()
	last, _ := src.logs.LastIndex()
	ctx := context.Background()
	err = errors.Join(
		migrate.CopyLogs(ctx, dst.logs, src.logs, 1<<20, nil),
		migrate.CopyStable(ctx, dst.stable, src.stable, nil, nil, nil),
	)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(filepath.Join(dir, tmp))
		return fmt.Errorf("raftstore: migrate the Raft log from %s to %s: %w", from, to, err)
	}
	if err := os.Rename(filepath.Join(dir, tmp), filepath.Join(dir, storeName(to))); err != nil {
		return fmt.Errorf("raftstore: migrate the Raft log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := retire(dir, from); err != nil {
		return err
	}
	// A retired copy of the new kind, from an earlier switch, is older
	// than what was just migrated: not a rollback any more.
	if err := os.RemoveAll(filepath.Join(dir, storeName(to)+migratedTo)); err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	log.Info("migrated the Raft log store", "from", from, "to", to, "entries", entries(first, last),
		"took", time.Since(start).Round(time.Millisecond), "kept", storeName(from)+migratedTo)
	return nil
}

func entries(first, last uint64) uint64 {
	if last == 0 || last < first {
		return 0
	}
	return last - first + 1
}

// retire renames the old store of kind out of the way (NAME.migrated),
// replacing an older retired copy.
func retire(dir, kind string) error {
	old := filepath.Join(dir, storeName(kind))
	if err := os.RemoveAll(old + migratedTo); err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	if err := os.Rename(old, old+migratedTo); err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("raftstore: sync %s: %w", dir, err)
	}
	return nil
}
