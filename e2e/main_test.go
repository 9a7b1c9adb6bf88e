//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The suite's lab: four boards, b1-b3 Raft servers, b4 a worker.
const (
	labBoards  = 4
	labServers = 3
)

// fleet is the lab every test of the package drives; TestMain brings it up
// once and takes it down at the end.
var fleet *Fleet

// stopLab takes the lab down (once, whoever calls first: TestMain at the
// end, the signal handler, the timeout watchdog). A panic in a test skips
// TestMain's deferred call: the reaper (startReaper) takes the lab down
// then. No test may call it: the tests after it need the lab.
var stopLab = func() {}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: needs root (network namespaces, systemd-nspawn): sudo make e2e")
		return 1
	}
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	for _, b := range []string{"herd", "herdctl"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: bin/%s missing: run make build first (make e2e does)\n", b)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "herd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[e2e %6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	fleet = NewFleet(root, dir, labBoards, labServers, logf)
	if fleet.LabScript, err = SnapshotLab(root, dir); err != nil {
		logf("copying scripts/lab: %v", err)
		return 1
	}
	// A panic outside a test's goroutine, the -timeout panic or a SIGKILL
	// skip every deferred call: a reaper process takes the lab down when
	// this one ends without saying goodbye.
	bye, err := startReaper(root, dir)
	if err != nil {
		logf("reaper: %v", err)
		return 1
	}
	var once sync.Once
	stopLab = func() {
		once.Do(func() {
			defer bye()
			t0 := time.Now()
			if err := fleet.Stop(); err != nil {
				logf("lab down: %v", err)
			} else {
				logf("lab down in %.1fs", time.Since(t0).Seconds())
			}
			os.RemoveAll(dir)
		})
	}
	defer stopLab()

	OnInterrupt(func(s os.Signal) {
		logf("%v: taking the lab down", s)
		stopLab()
		os.Exit(130)
	})
	// -timeout panics without running deferred functions: take the lab
	// down a minute before it fires.
	if tf := flag.Lookup("test.timeout"); tf != nil {
		if d, ok := tf.Value.(flag.Getter).Get().(time.Duration); ok && d > 2*time.Minute {
			time.AfterFunc(d-time.Minute, func() {
				logf("about to hit -timeout %v: taking the lab down", d)
				stopLab()
				os.Exit(1)
			})
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := fleet.Start(ctx); err != nil {
		logf("starting the lab: %v", err)
		return 1
	}
	logf("lab up and herd bootstrapped in %.1fs", time.Since(start).Seconds())
	code := m.Run()
	logf("suite done in %.1fs", time.Since(start).Seconds())
	return code
}

// startReaper starts a shell, in its own process group (a Ctrl-C does not
// reach it), that waits on a pipe from this process: EOF without a "q"
// first (this process died) makes it remove dir and run scripts/lab down. The returned
// function sends the "q" (the lab is already down).
func startReaper(root, dir string) (func(), error) {
	cmd := exec.Command("/bin/sh", "-c", `read -r word; [ "$word" = q ] && exit 0; rm -rf "$1"; exec "$0/scripts/lab" down >/dev/null 2>&1`, root, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait() }()
	return func() {
		fmt.Fprintln(w, "q")
		w.Close()
	}, nil
}
