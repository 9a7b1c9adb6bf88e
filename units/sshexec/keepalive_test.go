package sshexec

import (
	"testing"
	"time"
)

func TestUntilTick(t *testing.T) {
	base := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		after, d, want time.Duration
	}{
		{0, time.Second, time.Second},
		{300 * time.Millisecond, time.Second, 700 * time.Millisecond},
		{500 * time.Millisecond, time.Second, 500 * time.Millisecond},
		{600 * time.Millisecond, time.Second, 1400 * time.Millisecond},
		{999999 * time.Microsecond, time.Second, 1000001 * time.Microsecond},
		{1200 * time.Millisecond, 2 * time.Second, 800*time.Millisecond + 2*time.Second},
	} {
		if got := untilTick(base.Add(tt.after), tt.d); got != tt.want {
			t.Errorf("untilTick(+%v, %v) = %v, want %v", tt.after, tt.d, got, tt.want)
		}
	}
	// Two connections' tickers started apart tick at the same instants.
	for _, start := range []time.Duration{0, 137 * time.Millisecond, 451 * time.Millisecond, 820 * time.Millisecond} {
		now := base.Add(start)
		if tick := now.Add(untilTick(now, time.Second)); tick.Sub(base)%time.Second != 0 {
			t.Errorf("a ticker started at +%v ticks at +%v, not on a second", start, tick.Sub(base))
		}
	}
}
