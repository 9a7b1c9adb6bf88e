// Package clock is herd's one Clock: the time and timers behind a small
// interface, real in production, driven by hand in tests (clocktest).
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Everything outside pure code that
// reads the time for a decision takes one (the work queue, the controller
// runner, the placer, the HTTP API, gossip, the raftstore, the SSH
// executor's dial backoff, artifact fetches' backoff), so tests can drive
// time by hand (package clocktest). Socket deadlines and the libraries'
// own timers (raft, memberlist) use the real clock.
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed (at once for d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C is the channel the time is sent on when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// it (false if it had already fired or been stopped).
	Stop() bool
}

// RealClock returns the Clock of package time.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// NowFunc is a Clock whose Now is the function and whose timers are real:
// for code that only stamps times (the raftstore's Created) and tests that
// fix those stamps.
type NowFunc func() time.Time

// Now returns f().
func (f NowFunc) Now() time.Time { return f() }

// NewTimer returns a real timer.
func (NowFunc) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// Sleep waits d on c, or until ctx ends: it reports whether d passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
