package svcproxy

import (
	"time"

	"github.com/herd-dev/herd/internal/backoff"
)

// Passive health: a target whose dial failed is skipped for a backoff that
// starts at minBackoff and doubles with each further failure up to
// maxBackoff; a success forgets the failures.
const (
	minBackoff = 2 * time.Second
	maxBackoff = 30 * time.Second
)

// health is what the proxy remembers of one target's recent dials.
type health struct {
	fails int       // failures in a row
	until time.Time // skipped before this instant
}

// failed returns h after one more failed dial at now.
func (h health) failed(now time.Time) health {
	h.fails++
	return health{fails: h.fails, until: now.Add(skipFor(h.fails))}
}

// down reports whether a new connection should skip the target at now.
func (h health) down(now time.Time) bool { return now.Before(h.until) }

// skipFor is how long a target is skipped after fails failures in a row.
func skipFor(fails int) time.Duration {
	return backoff.Double(fails, minBackoff, maxBackoff)
}

// order is the round robin choice of endpoint: the indexes of n targets
// in the order a new connection tries them, and the cursor for the next
// connection. It starts at cursor (taken modulo n), puts the targets that
// are not down first and the down ones after them (so that when all are
// down they are tried anyway), and the next cursor is one past the first
// choice, which spreads connections evenly over the targets that are up.
func order(n, cursor int, down func(i int) bool) (idx []int, next int) {
	if n <= 0 {
		return nil, 0
	}
	cursor = ((cursor % n) + n) % n
	idx = make([]int, 0, n)
	var later []int
	for k := range n {
		i := (cursor + k) % n
		if down(i) {
			later = append(later, i)
		} else {
			idx = append(idx, i)
		}
	}
	idx = append(idx, later...)
	return idx, (idx[0] + 1) % n
}
