package clocktest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/testutil"
)

// Clock is a fake clock.Clock. Time stands still until Advance. It is
// safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

var _ clock.Clock = (*Clock)(nil)

// New returns a fake clock showing t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer due d after the fake now; it fires during the
// Advance that reaches its due time (at once if d <= 0).
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the fake time forward by d and fires every timer now due,
// earliest first.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	slices.SortStableFunc(c.timers, func(a, b *timer) int { return a.at.Compare(b.at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Timers returns the due times of the armed timers, earliest first.
func (c *Clock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.timers {
		out = append(out, t.at)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// WaitTimer waits (real time, up to 10 s) until a timer due exactly at at is
// armed, so that a following Advance fires it; it fails the test otherwise.
// Use it before advancing time that a goroutine under test arms timers for.
func (c *Clock) WaitTimer(tb testing.TB, at time.Time) {
	tb.Helper()
	testutil.Until(tb, 10*time.Second, "a timer due at "+at.Format(time.StampMicro), func() bool {
		return slices.ContainsFunc(c.Timers(), at.Equal)
	})
}

type timer struct {
	clock *Clock
	at    time.Time
	ch    chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = slices.Delete(c.timers, i, i+1)
			return true
		}
	}
	return false
}
