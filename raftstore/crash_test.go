package raftstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

const (
	crashEnv      = "HERD_RAFTSTORE_CRASH_DIR"
	crashStoreEnv = "HERD_RAFTSTORE_CRASH_LOGSTORE"
)

// TestCrashChild is the process TestKillNineRecovers kills: it writes
// until killed, printing each acknowledged write.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestKillNineRecovers")
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.BindAddr, cfg.ServerKey, cfg.DataDir = "crash", "127.0.0.1:0", TestKey("crash"), dir
	cfg.LogStore = os.Getenv(crashStoreEnv)
	s, err := Open(cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := s.Bootstrap([]Server{{ID: "crash", Address: s.Addr(), Voter: true}}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("addr", s.Addr())
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Txn(ctx, []Op{op(OpCreate, obj(api.KindPod, fmt.Sprintf("p%d", i), 0, `{"i":`+strconv.Itoa(i)+`}`, "", nil))})
		cancel()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("ack", i)
	}
}

// TestKillNineRecovers kills a store with SIGKILL in the middle of a
// stream of writes, on each log store, and checks that every acknowledged
// write is there after a restart.
func TestKillNineRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	for _, store := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(store, func(t *testing.T) { killNineRecovers(t, store) })
	}
}

func killNineRecovers(t *testing.T, store string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashStoreEnv+"="+store)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var addr string
	acked := -1
	sc := bufio.NewScanner(out)
	for acked < 40 && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "addr":
			addr = f[1]
		case len(f) == 2 && f[0] == "ack":
			acked, _ = strconv.Atoi(f[1])
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("child: %s", sc.Text())
		}
	}
	if acked < 40 {
		t.Fatalf("child stopped after %d acks: %v", acked, sc.Err())
	}
	// kill -9 in the middle of the write stream.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	cfg := TestConfig(t, "crash", TestKey("crash"))
	cfg.DataDir, cfg.BindAddr, cfg.LogStore = dir, addr, store
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, err := s.HasExistingState(); !ok || err != nil {
		t.Fatalf("HasExistingState %v, %v", ok, err)
	}
	testutil.Until(t, 15*time.Second, "the reopened server to replay every acknowledged write", func() bool {
		objs, _, _ := s.List(api.KindPod)
		return len(objs) > acked
	})
	for i := 0; i <= acked; i++ {
		if _, err := s.Get(api.KindPod, fmt.Sprintf("p%d", i)); err != nil {
			t.Errorf("acknowledged write %d lost: %v", i, err)
		}
	}
	// And it takes new writes.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := s.Txn(ctx, []Op{op(OpCreate, obj(api.KindPod, "after-crash", 0, `{}`, "", nil))}); err != nil {
		t.Fatal(err)
	}
}
