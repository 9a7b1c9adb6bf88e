package unitwatch

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/internal/atomicfile"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units"
)

// Source tells a Watcher that some herd unit may have changed.
type Source interface {
	// Watch sends on changed, without blocking (changed is buffered; a
	// full channel already says "changed"), each time a herd unit's
	// state may have changed, until ctx ends (it then returns ctx's
	// error) or the source fails (it returns why; the Watcher starts it
	// again after a backoff and reports at once, since changes may have
	// been missed). Watch is called from one goroutine at a time.
	Watch(ctx context.Context, changed chan<- struct{}) error
}

// Config configures a Watcher. Start from DefaultConfig.
type Config struct {
	// Node is this board's node name.
	Node string
	// Signer is the board's SSH host key (its private half).
	Signer ssh.Signer
	// SeqFile is where the mark of the report being collected is written
	// (sshexec.ReportSeqFile).
	SeqFile string
	// EpochFile keeps the last epoch used, across restarts.
	EpochFile string
	// Collect lists the board's herd units, as the leader's listing
	// would (CollectLocal).
	Collect func(ctx context.Context) ([]units.UnitState, error)
	// Send hands a signed report to the servers. It may block for a
	// network round trip; it must not keep body.
	Send func(ctx context.Context, body []byte)
	// Source says when units changed.
	Source Source
	// Settle is how long a Watcher waits after a change for the rest of
	// its burst (a restart is several signals) before it collects.
	Settle time.Duration
	// Resend is how often a report is made without a change.
	Resend time.Duration
	// RetryMin and RetryMax bound the backoff after a failed collection or
	// a failed Source.
	RetryMin, RetryMax time.Duration
	// Clock tells the time; Logger receives what goes wrong.
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultConfig returns the settings a board's agent uses: 20 ms to
// settle, a report every minute without changes, retries from 1 s to 30 s,
// and sshexec's seq file. The caller sets Node, Signer, EpochFile,
// Collect, Send and Source.
func DefaultConfig(seqFile string) Config {
	return Config{
		SeqFile:  seqFile,
		Settle:   20 * time.Millisecond,
		Resend:   time.Minute,
		RetryMin: time.Second,
		RetryMax: 30 * time.Second,
		Clock:    clock.RealClock(),
		Logger:   slog.New(slog.DiscardHandler),
	}
}

// ErrInvalidConfig is returned by New for an unusable Config.
var ErrInvalidConfig = errors.New("unitwatch: invalid config")

func (c Config) validate() error {
	switch {
	case c.Node == "":
		return fmt.Errorf("%w: no Node", ErrInvalidConfig)
	case c.Signer == nil:
		return fmt.Errorf("%w: no Signer", ErrInvalidConfig)
	case c.SeqFile == "" || !filepath.IsAbs(c.SeqFile):
		return fmt.Errorf("%w: SeqFile %q must be an absolute path", ErrInvalidConfig, c.SeqFile)
	case c.EpochFile == "":
		return fmt.Errorf("%w: no EpochFile", ErrInvalidConfig)
	case c.Collect == nil || c.Send == nil || c.Source == nil:
		return fmt.Errorf("%w: Collect, Send and Source are required", ErrInvalidConfig)
	case c.Settle < 0 || c.Resend <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("%w: Settle %v, Resend %v, RetryMin %v, RetryMax %v", ErrInvalidConfig, c.Settle, c.Resend, c.RetryMin, c.RetryMax)
	case c.Clock == nil || c.Logger == nil:
		return fmt.Errorf("%w: no Clock or Logger", ErrInvalidConfig)
	}
	return nil
}

// Watcher reports a board's herd units to the servers. Run it once.
type Watcher struct {
	cfg Config

	mu   sync.Mutex      // guards mark: Mark may be called while Run reports
	mark unitreport.Mark // the last mark taken
}

// New returns a Watcher whose marks start at the next epoch, which it
// records in cfg.EpochFile first (so a crash never reuses an epoch).
func New(cfg Config) (*Watcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var last int64
	switch b, err := os.ReadFile(cfg.EpochFile); {
	case err == nil:
		last, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			// A torn or foreign file: the clock still moves epochs on.
			cfg.Logger.Warn("unit reports: unreadable epoch file; starting from the clock", "file", cfg.EpochFile, "err", err)
			last = 0
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("unitwatch: %w", err)
	}
	epoch := unitreport.NextEpoch(last, cfg.Clock.Now().Unix())
	if err := writeFileSynced(cfg.EpochFile, []byte(strconv.FormatInt(epoch, 10)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("unitwatch: %w", err)
	}
	return &Watcher{cfg: cfg, mark: unitreport.Mark{Epoch: epoch}}, nil
}

// Mark returns the mark of the last report begun (Seq 0 before the
// first). Safe to call while Run runs.
func (w *Watcher) Mark() unitreport.Mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mark
}

// Run reports at once, then after every change and every Resend, until
// ctx ends; it returns ctx's error.
func (w *Watcher) Run(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	restarted := make(chan struct{}, 1)
	go w.runSource(ctx, changed, restarted)

	retry := w.cfg.RetryMin
	next := time.Duration(0) // report at once
	for {
		t := w.cfg.Clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		case <-restarted:
			t.Stop()
		case <-changed:
			t.Stop()
			if !w.settle(ctx, changed) {
				return ctx.Err()
			}
		}
		if err := w.Report(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.cfg.Logger.Warn("unit report failed", "err", err, "retryIn", retry)
			next, retry = retry, min(2*retry, w.cfg.RetryMax)
			continue
		}
		next, retry = w.cfg.Resend, w.cfg.RetryMin
	}
}

// settle waits Settle for the rest of a burst of changes, and drains the
// change signal so a change within the burst does not cause a second
// report right after.
func (w *Watcher) settle(ctx context.Context, changed <-chan struct{}) bool {
	if w.cfg.Settle > 0 {
		t := w.cfg.Clock.NewTimer(w.cfg.Settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
	select {
	case <-changed:
	default:
	}
	return true
}

// Report makes one report now: the next mark into the seq file, the
// units collected, signed, sent.
func (w *Watcher) Report(ctx context.Context) error {
	last := w.Mark()
	m := unitreport.Mark{Epoch: last.Epoch, Seq: last.Seq + 1}
	if err := writeFileSynced(w.cfg.SeqFile, unitreport.FormatSeqFile(m), 0o644); err != nil {
		return fmt.Errorf("unitwatch: seq file: %w", err)
	}
	w.mu.Lock()
	w.mark = m
	w.mu.Unlock()
	us, err := w.cfg.Collect(ctx)
	if err != nil {
		return fmt.Errorf("unitwatch: listing units: %w", err)
	}
	body, err := unitreport.Sign(unitreport.Report{Node: w.cfg.Node, Mark: m, Units: us}, w.cfg.Signer, rand.Reader)
	if err != nil {
		return err
	}
	w.cfg.Send(ctx, body)
	return nil
}

// runSource runs the Source until ctx ends, starting it again after a
// backoff when it fails and signalling restarted each time it does.
func (w *Watcher) runSource(ctx context.Context, changed chan<- struct{}, restarted chan<- struct{}) {
	delay := w.cfg.RetryMin
	for {
		start := w.cfg.Clock.Now()
		err := w.cfg.Source.Watch(ctx, changed)
		if ctx.Err() != nil {
			return
		}
		if w.cfg.Clock.Now().Sub(start) > w.cfg.RetryMax {
			delay = w.cfg.RetryMin // it ran a while: a fresh failure
		}
		w.cfg.Logger.Warn("unit watch stopped; the leader lists this board over SSH meanwhile", "err", err, "retryIn", delay)
		t := w.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		delay = min(2*delay, w.cfg.RetryMax)
		select {
		case restarted <- struct{}{}:
		default:
		}
	}
}

// writeFileSynced replaces path with data (atomicfile.WriteFile),
// making its folder first.
func writeFileSynced(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, mode)
}
