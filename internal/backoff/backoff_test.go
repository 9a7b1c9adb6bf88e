package backoff

import (
	"testing"
	"time"
)

func TestDouble(t *testing.T) {
	base, max := 100*time.Millisecond, time.Second
	for n, want := range map[int]time.Duration{
		-1: base, 0: base, 1: base, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: max, 60: max, 1 << 30: max,
	} {
		if got := Double(n, base, max); got != want {
			t.Errorf("Double(%d) = %v, want %v", n, got, want)
		}
	}
	if got := Double(3, 2*time.Second, time.Second); got != time.Second {
		t.Errorf("Double with base over max = %v, want the max", got)
	}
}

func TestStretch(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		f, r float64
		want time.Duration
	}{
		{time.Second, 0.5, 0, time.Second},
		{time.Second, 0.5, 0.5, 1250 * time.Millisecond},
		{time.Second, 0.5, 0.999, 1499500 * time.Microsecond},
		{time.Second, 0, 0.9, time.Second},
		{time.Second, -1, 0.9, time.Second},
	} {
		if got := Stretch(tt.d, tt.f, tt.r); got != tt.want {
			t.Errorf("Stretch(%v, %v, %v) = %v, want %v", tt.d, tt.f, tt.r, got, tt.want)
		}
	}
}
