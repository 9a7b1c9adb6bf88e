package backoff

import "time"

// Double is the delay after the n-th failure in a row: base, 2·base,
// 4·base, ... at most max. n below 1 counts as 1.
func Double(n int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Stretch lengthens d by the fraction r·f, r in [0, 1): into
// [d, d·(1+f)). f ≤ 0 leaves d as it is.
func Stretch(d time.Duration, f, r float64) time.Duration {
	if f <= 0 {
		return d
	}
	return d + time.Duration(r*f*float64(d))
}
