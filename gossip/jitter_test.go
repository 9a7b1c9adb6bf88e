package gossip

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pauses returns n spread join/reconnect pauses of a Gossip whose Jitter is
// a source seeded with seed.
func pauses(t *testing.T, seed uint64, n int) []time.Duration {
	cfg := testConfig(t, "n1", newKey(t))
	cfg.Jitter = rand.New(rand.NewPCG(seed, seed)).Float64
	g := startNode(t, cfg)
	var out []time.Duration
	for range n {
		out = append(out, spread(time.Second, g.jitter()))
	}
	return out
}

func TestJitterSeeded(t *testing.T) {
	a, b := pauses(t, 1, 50), pauses(t, 1, 50)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different pauses:\n%v\n%v", a, b)
	}
	if c := pauses(t, 2, 50); slices.Equal(a, c) {
		t.Errorf("different seeds, same pauses: %v", a)
	}
	for _, got := range a {
		if got < 800*time.Millisecond || got >= 1200*time.Millisecond {
			t.Errorf("pause %v outside [0.8s, 1.2s)", got)
		}
	}
}
