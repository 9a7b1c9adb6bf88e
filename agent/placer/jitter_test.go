package placer

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
)

// observeDelays returns n ObserveInterval pauses of a Placer whose Jitter is
// a source seeded with seed.
func observeDelays(t *testing.T, seed uint64, n int) []time.Duration {
	h := newHarness(t, func(c *Config) {
		c.ObserveJitter = 0.2
		c.Jitter = rand.New(rand.NewPCG(seed, seed)).Float64
	})
	cfg := h.p.cfg
	var out []time.Duration
	for range n {
		out = append(out, backoff.Stretch(cfg.ObserveInterval, cfg.ObserveJitter, h.p.jitter()))
	}
	return out
}

func TestObserveJitterSeeded(t *testing.T) {
	a, b := observeDelays(t, 1, 50), observeDelays(t, 1, 50)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different pauses:\n%v\n%v", a, b)
	}
	if c := observeDelays(t, 2, 50); slices.Equal(a, c) {
		t.Errorf("different seeds, same pauses: %v", a)
	}
	d := DefaultConfig().ObserveInterval
	for _, got := range a {
		if got < d || got >= d+d/5 {
			t.Errorf("pause %v outside [%v, %v)", got, d, d+d/5)
		}
	}
}
