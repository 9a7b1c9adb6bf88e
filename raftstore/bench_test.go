package raftstore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
)

// benchPodSpec is a pod spec of realistic size (~400 bytes of JSON).
const benchPodSpec = `{"owner":{"kind":"deployments","name":"web"},"template":{"labels":{"app":"web"},` +
	`"exec":["/usr/bin/python3","-m","http.server","--bind","0.0.0.0"],"env":{"MODE":"production","LOG":"info"},` +
	`"ports":[{"name":"http","port":0,"protocol":"tcp"}],"resources":{"memoryLimit":"64M","cpuLimit":"50%"},` +
	`"restartPolicy":"always","readiness":{"http":"/healthz","periodSeconds":5}},"revision":"5f2b9c1d","node":"pi-3"}`

// processWriteBytes is write_bytes from /proc/self/io: what this process
// caused to be written to storage (0 if unavailable).
func processWriteBytes() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// BenchmarkTxn measures committed single-create transactions per second
// through the leader: serially (latency bound) and from 16 goroutines
// (raft batches them), with 1 and 3 voters, in memory, on bolt and on
// raft-wal. On disk it also reports write_bytes of the whole process per
// 1,000 applies (every voter, with fsyncs: what reaches the SD card), and
// on bolt the growth of the leader's raft.db. scripts/bench-logstore adds
// the fsync counts (strace) and the idle and restart figures.
func BenchmarkTxn(b *testing.B) {
	for _, voters := range []int{1, 3} {
		for _, storage := range []string{"mem", LogStoreBolt, LogStoreWAL} {
			for _, parallel := range []bool{false, true} {
				mode := "serial"
				if parallel {
					mode = "parallel16"
				}
				b.Run(fmt.Sprintf("voters=%d/%s/%s", voters, storage, mode), func(b *testing.B) {
					benchTxn(b, voters, storage, parallel)
				})
			}
		}
	}
}

func benchTxn(b *testing.B, voters int, storage string, parallel bool) {
	onDisk := storage != "mem"
	c := NewTestClusterWithOptions(b, TestClusterOptions{N: voters, OnDisk: onDisk, Configure: func(_ int, cfg *Config) {
		cfg.Logger = nil
		cfg.SnapshotThreshold = 1 << 30 // measure applies, not snapshots
		if onDisk {
			cfg.LogStore = storage
		}
	}})
	leaderIdx := c.Leader()
	leader := c.Stores[leaderIdx]
	ctx := context.Background()
	var seq atomic.Int64
	txn := func() {
		n := seq.Add(1)
		o := obj(api.KindPod, "p"+strconv.FormatInt(n, 10), 0, benchPodSpec, "", map[string]string{"app": "web"})
		if _, err := leader.Txn(ctx, []Op{op(OpCreate, o)}); err != nil {
			b.Error(err)
		}
	}
	txn() // warm up connections
	dbPath := filepath.Join(c.Configs[leaderIdx].DataDir, "raft", "raft.db")
	dbBefore, ioBefore := fileSize(dbPath), processWriteBytes()

	b.ResetTimer()
	start := time.Now()
	if parallel {
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				txn()
			}
		})
	} else {
		for range b.N {
			txn()
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "applies/s")
	if onDisk && b.N >= 100 {
		per1k := func(d int64) float64 { return float64(d) * 1000 / float64(b.N) }
		if storage == LogStoreBolt {
			b.ReportMetric(per1k(fileSize(dbPath)-dbBefore), "dbGrowthB/1kApply")
		}
		b.ReportMetric(per1k(processWriteBytes()-ioBefore), "ioWriteB/1kApply")
	}
}

// BenchmarkWatchFanout100 measures how fast the FSM's events reach 100
// watchers that all read everything (FSM apply included, raft excluded).
// The history holds every event so that no watcher is relisted: this
// measures delivery, not the slow-watcher path.
func BenchmarkWatchFanout100(b *testing.B) {
	const watchers = 100
	f := newFSM(newHub(b.N+1, 128))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range watchers {
		ch, err := f.hub.watch(ctx, "", 0)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for ev := range ch {
				if ev.Type == api.EventRelist {
					b.Error("watcher relisted")
					return
				}
				if n++; n == b.N {
					return
				}
			}
		}()
	}
	entries := make([][]byte, b.N)
	for i := range entries {
		data, err := json.Marshal(command{Ops: []Op{op(OpCreate, obj(api.KindPod, "p"+strconv.Itoa(i), 0, benchPodSpec, "", nil))}, Created: t0})
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = data
	}
	b.ResetTimer()
	start := time.Now()
	for i, data := range entries {
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)*watchers/elapsed.Seconds(), "deliveries/s")
}

// BenchmarkReadBarrier measures what a linearizable read costs on top of
// a local one, on the leader (a heartbeat round) and on a follower (a
// round trip to the leader for its read index).
func BenchmarkReadBarrier(b *testing.B) {
	c := NewTestCluster(b, 3)
	leader := c.Leader()
	for _, tc := range []struct {
		name string
		s    *Store
	}{{"leader", c.Stores[leader]}, {"follower", c.Stores[(leader+1)%3]}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if err := tc.s.ReadBarrier(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReopen measures how long Open takes on a data dir whose log
// holds 4,096 entries (TrailingLogs: what a server keeps after a
// snapshot), per log store: the restart cost of a server, before Raft
// elects.
func BenchmarkReopen(b *testing.B) {
	for _, storage := range []string{LogStoreBolt, LogStoreWAL} {
		b.Run(storage, func(b *testing.B) {
			c := NewTestClusterWithOptions(b, TestClusterOptions{N: 1, OnDisk: true, Configure: func(_ int, cfg *Config) {
				cfg.Logger = nil
				cfg.LogStore = storage
				cfg.SnapshotThreshold = 1 << 30
			}})
			ctx := context.Background()
			const entries = 4096
			for j := range entries {
				if _, err := c.Stores[0].Txn(ctx, []Op{op(OpCreate, obj(api.KindPod, "p"+strconv.Itoa(j), 0, benchPodSpec, "", nil))}); err != nil {
					b.Fatal(err)
				}
			}
			c.Stop(0)
			b.ResetTimer()
			for range b.N {
				s, err := Open(c.Configs[0])
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkIdleWrites measures what an idle 3-voter cluster writes to
// disk (write_bytes of the process, every voter): Raft heartbeats are not
// logged, so this should be about nothing. Each iteration watches a 10 s
// window; run it with -benchtime 1x.
func BenchmarkIdleWrites(b *testing.B) {
	for _, storage := range []string{LogStoreBolt, LogStoreWAL} {
		b.Run(storage, func(b *testing.B) {
			c := NewTestClusterWithOptions(b, TestClusterOptions{N: 3, OnDisk: true, Configure: func(_ int, cfg *Config) {
				cfg.Logger = nil
				cfg.LogStore = storage
			}})
			if _, err := c.Stores[c.Leader()].Txn(context.Background(), []Op{op(OpCreate, obj(api.KindPod, "p", 0, benchPodSpec, "", nil))}); err != nil {
				b.Fatal(err)
			}
			const window = 10 * time.Second
			b.ResetTimer()
			var written int64
			for range b.N {
				before := processWriteBytes()
				// An observation window, not a synchronisation: nothing
				// is awaited, the disk writes of idleness are counted.
				time.Sleep(window)
				written += processWriteBytes() - before
			}
			b.ReportMetric(float64(written)/float64(b.N)*float64(time.Hour/window), "ioWriteB/idleHour")
		})
	}
}

// BenchmarkSpacedWrites measures what an isolated write costs on disk: 3
// voters on raft-wal, one create every 20 ms (a board's status change, a
// scale), so each write is a burst of its own and the leader follows it
// with a commit notice (notice.go). It reports write_bytes of the whole
// process (every voter) per write; BenchmarkTxn's serial run, whose
// writes come back to back and share one notice, is the comparison.
// scripts/bench-logstore counts its fsyncs.
func BenchmarkSpacedWrites(b *testing.B) {
	c := NewTestClusterWithOptions(b, TestClusterOptions{N: 3, OnDisk: true, Configure: func(_ int, cfg *Config) {
		cfg.Logger = nil
		cfg.SnapshotThreshold = 1 << 30
		cfg.LogStore = LogStoreWAL
	}})
	leader := c.Stores[c.Leader()]
	ctx := context.Background()
	txn := func(n int) {
		o := obj(api.KindPod, "p"+strconv.Itoa(n), 0, benchPodSpec, "", map[string]string{"app": "web"})
		if _, err := leader.Txn(ctx, []Op{op(OpCreate, o)}); err != nil {
			b.Error(err)
		}
	}
	txn(0)
	tick := time.NewTicker(20 * time.Millisecond) // the spacing is what is measured
	defer tick.Stop()
	<-tick.C
	ioBefore := processWriteBytes()
	b.ResetTimer()
	for i := range b.N {
		txn(i + 1)
		<-tick.C
	}
	b.StopTimer()
	b.ReportMetric(float64(processWriteBytes()-ioBefore)/float64(b.N), "ioWriteB/write")
}
