package svcview

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
)

// Writer writes the view's bytes to Path on one board (the agent adapts
// its SSH executor's no-follow file write).
type Writer interface {
	WriteView(ctx context.Context, node string, content []byte) error
}

// Publisher backoff after a failed write to a board.
const (
	publishBackoffMin = time.Second
	publishBackoffMax = 30 * time.Second
)

// Publisher writes the feed's view to every Ready worker that does not
// have it yet. It runs on the leader only.
type Publisher struct {
	feed  *Feed
	w     Writer
	clock clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	boards map[string]*boardState
	wake   chan struct{}
	wg     sync.WaitGroup
}

// boardState is what the Publisher knows of one board.
type boardState struct {
	written  [sha256.Size]byte // hash of the view last written there
	has      bool
	busy     bool
	failures int
	retryAt  time.Time
}

// NewPublisher returns a Publisher of feed's views through w. A nil clock
// is the real one, a nil logger discards.
func NewPublisher(feed *Feed, w Writer, clk clock.Clock, log *slog.Logger) *Publisher {
	if clk == nil {
		clk = clock.RealClock()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{feed: feed, w: w, clock: clk, log: log, boards: make(map[string]*boardState), wake: make(chan struct{}, 1)}
}

// Run writes views until ctx ends, then waits for the writes in flight and
// returns ctx's error.
func (p *Publisher) Run(ctx context.Context) error {
	changes, stop := p.feed.Subscribe()
	defer stop()
	defer p.wg.Wait()
	for {
		next := p.sync(ctx)
		var (
			retry <-chan time.Time
			t     clock.Timer
		)
		if !next.IsZero() {
			t = p.clock.NewTimer(next.Sub(p.clock.Now()))
			retry = t.C()
		}
		select {
		case <-ctx.Done():
		case <-changes:
		case <-p.wake:
		case <-retry:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// sync starts a write to every worker whose copy is out of date and
// returns the earliest time a failed board may be retried (zero: none).
func (p *Publisher) sync(ctx context.Context) time.Time {
	v, enc, ok := p.feed.Current()
	if !ok {
		return time.Time{}
	}
	sum := sha256.Sum256(enc)
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	workers := v.Workers()
	keep := make(map[string]bool, len(workers))
	var next time.Time
	for _, name := range workers {
		keep[name] = true
		b := p.boards[name]
		if b == nil {
			b = &boardState{}
			p.boards[name] = b
		}
		switch {
		case b.busy || (b.has && b.written == sum):
			continue
		case now.Before(b.retryAt):
			if next.IsZero() || b.retryAt.Before(next) {
				next = b.retryAt
			}
			continue
		}
		b.busy = true
		p.wg.Add(1)
		go p.write(ctx, name, enc, sum)
	}
	// A board that is not a Ready worker is forgotten: when it returns it
	// is written again (it may have rebooted with an empty /run).
	for name, b := range p.boards {
		if !keep[name] && !b.busy {
			delete(p.boards, name)
		}
	}
	return next
}

func (p *Publisher) write(ctx context.Context, node string, enc []byte, sum [sha256.Size]byte) {
	defer p.wg.Done()
	err := p.w.WriteView(ctx, node, enc)
	p.mu.Lock()
	if b := p.boards[node]; b != nil {
		b.busy = false
		if err == nil {
			b.written, b.has, b.failures, b.retryAt = sum, true, 0, time.Time{}
		} else {
			b.has = false
			b.failures++
			b.retryAt = p.clock.Now().Add(retryAfter(b.failures))
		}
	}
	p.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		p.log.Warn("service view: write to board failed; retrying", "node", node, "err", err)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// retryAfter is the pause after the n-th failure in a row (n ≥ 1).
func retryAfter(n int) time.Duration {
	return backoff.Double(n, publishBackoffMin, publishBackoffMax)
}
