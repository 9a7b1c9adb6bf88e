package unitwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
)

// board is a fake board: its units, a source the test fires, and the
// reports the watcher sent (opened with the board's key).
type board struct {
	t      *testing.T
	signer ssh.Signer
	seq    string

	mu      sync.Mutex
	units   []units.UnitState
	seqSeen []unitreport.Mark // the seq file at each collection
	sent    []unitreport.Report
	failing bool

	changed chan chan<- struct{} // the channel the source was handed
	fail    chan error           // makes the source's Watch return
}

func newBoard(t *testing.T) *board {
	return &board{t: t, signer: testutil.SSHSigner(t), seq: filepath.Join(t.TempDir(), "run", "unitreport.seq"),
		changed: make(chan chan<- struct{}, 4), fail: make(chan error)}
}

func (b *board) Watch(ctx context.Context, changed chan<- struct{}) error {
	b.changed <- changed
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-b.fail:
		return err
	}
}

func (b *board) collect(context.Context) ([]units.UnitState, error) {
	raw, err := os.ReadFile(b.seq)
	if err != nil {
		return nil, err
	}
	m, err := unitreport.ParseSeqFile(raw)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seqSeen = append(b.seqSeen, m)
	if b.failing {
		return nil, errors.New("systemctl: broken")
	}
	return append([]units.UnitState(nil), b.units...), nil
}

func (b *board) send(_ context.Context, body []byte) {
	r, err := unitreport.Open(body, func(string) (ssh.PublicKey, error) { return b.signer.PublicKey(), nil })
	if err != nil {
		b.t.Errorf("the watcher sent a report that does not open: %v", err)
		return
	}
	b.mu.Lock()
	b.sent = append(b.sent, r)
	b.mu.Unlock()
}

func (b *board) reports() []unitreport.Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]unitreport.Report(nil), b.sent...)
}

func (b *board) set(us ...units.UnitState) {
	b.mu.Lock()
	b.units = us
	b.mu.Unlock()
}

var t0 = time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)

func start(t *testing.T, b *board, epochFile string) (*Watcher, *clocktest.Clock, chan<- struct{}) {
	t.Helper()
	clk := clocktest.New(t0)
	cfg := DefaultConfig(b.seq)
	cfg.Node, cfg.Signer, cfg.EpochFile = "b4", b.signer, epochFile
	cfg.Collect, cfg.Send, cfg.Source = b.collect, b.send, b
	cfg.Clock, cfg.Logger = clk, testutil.Logger(t)
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, clk, <-b.changed
}

func waitReports(t *testing.T, b *board, n int) []unitreport.Report {
	t.Helper()
	testutil.Until(t, 10*time.Second, "the watcher's reports", func() bool { return len(b.reports()) >= n })
	rs := b.reports()
	if len(rs) != n {
		t.Fatalf("%d reports, want %d: %+v", len(rs), n, rs)
	}
	return rs
}

func TestWatcherReportsChanges(t *testing.T) {
	b := newBoard(t)
	running := units.UnitState{Unit: "herd-web-1.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: 10}
	b.set(running)
	epochFile := filepath.Join(t.TempDir(), "unitreport.epoch")
	w, clk, changed := start(t, b, epochFile)
	epoch := t0.Unix()

	// At start: one report, at once.
	rs := waitReports(t, b, 1)
	want := unitreport.Report{Node: "b4", Mark: unitreport.Mark{Epoch: epoch, Seq: 1}, Units: []units.UnitState{running}}
	if diff := cmp.Diff(want, rs[0]); diff != "" {
		t.Errorf("first report (-want +got):\n%s", diff)
	}

	// A burst of changes within Settle makes one report, after Settle.
	restarted := running
	restarted.MainPID, restarted.NRestarts = 11, 1
	b.set(restarted)
	changed <- struct{}{}
	clk.WaitTimer(t, t0.Add(w.cfg.Settle))
	select {
	case changed <- struct{}{}:
	default:
	}
	clk.Advance(w.cfg.Settle)
	rs = waitReports(t, b, 2)
	if rs[1].Mark != (unitreport.Mark{Epoch: epoch, Seq: 2}) || rs[1].Units[0].NRestarts != 1 {
		t.Errorf("report after the restart = %+v", rs[1])
	}

	// No change: a report every Resend, so the leader keeps counting the
	// board as reporting.
	now := t0.Add(w.cfg.Settle)
	clk.WaitTimer(t, now.Add(w.cfg.Resend))
	clk.Advance(w.cfg.Resend)
	rs = waitReports(t, b, 3)
	if rs[2].Mark.Seq != 3 {
		t.Errorf("resent report mark = %v, want seq 3", rs[2].Mark)
	}

	// The seq file held each report's mark while it was collected.
	b.mu.Lock()
	seen := append([]unitreport.Mark(nil), b.seqSeen...)
	b.mu.Unlock()
	for i, r := range rs {
		if seen[i] != r.Mark {
			t.Errorf("collection %d saw seq file %v, report carries %v", i, seen[i], r.Mark)
		}
	}
}

// TestWatcherEpochRises: each start takes a higher epoch than the last,
// even when the board's clock went back.
func TestWatcherEpochRises(t *testing.T) {
	epochFile := filepath.Join(t.TempDir(), "unitreport.epoch")
	if err := os.WriteFile(epochFile, []byte("1999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBoard(t)
	w, _, _ := start(t, b, epochFile)
	if got := w.Mark().Epoch; got != 2000000000 {
		t.Errorf("epoch after a start with a later recorded epoch = %d, want 2000000000", got)
	}
	raw, err := os.ReadFile(epochFile)
	if err != nil || string(raw) != "2000000000\n" {
		t.Errorf("epoch file = %q, %v", raw, err)
	}
	rs := waitReports(t, b, 1)
	if !rs[0].Mark.After(unitreport.Mark{Epoch: 1999999999, Seq: 1 << 40}) {
		t.Errorf("first report %v is not after every report of the previous start", rs[0].Mark)
	}
}

// TestWatcherRetries: a failed collection is retried with backoff, and a
// source that fails is started again and followed by a report at once.
func TestWatcherRetries(t *testing.T) {
	b := newBoard(t)
	b.failing = true
	w, clk, _ := start(t, b, filepath.Join(t.TempDir(), "e"))
	clk.WaitTimer(t, t0.Add(w.cfg.RetryMin))
	if n := len(b.reports()); n != 0 {
		t.Fatalf("%d reports from a failing collection", n)
	}
	b.mu.Lock()
	b.failing = false
	b.mu.Unlock()
	clk.Advance(w.cfg.RetryMin)
	waitReports(t, b, 1)

	b.fail <- errors.New("connection to systemd lost")
	clk.WaitTimer(t, clk.Now().Add(w.cfg.RetryMin))
	clk.Advance(w.cfg.RetryMin)
	<-b.changed // started again
	rs := waitReports(t, b, 2)
	if rs[1].Mark.Seq <= rs[0].Mark.Seq {
		t.Errorf("report after the source restarted: mark %v after %v", rs[1].Mark, rs[0].Mark)
	}
}
