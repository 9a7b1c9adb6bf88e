package controller

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
)

// resyncDelays returns n resync pauses of a Runner whose Jitter is a source
// seeded with seed.
func resyncDelays(t *testing.T, seed uint64, n int) []time.Duration {
	st := &fakeState{w: newWorld(t)}
	cfg := DefaultRunnerConfig()
	cfg.Jitter = rand.New(rand.NewPCG(seed, seed)).Float64
	r, err := NewRunner(cfg, st, st, nil, nil)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	var out []time.Duration
	for range n {
		out = append(out, backoff.Stretch(cfg.ResyncPeriod, cfg.ResyncJitter, r.jitter()))
	}
	return out
}

func TestResyncJitterSeeded(t *testing.T) {
	a, b := resyncDelays(t, 1, 50), resyncDelays(t, 1, 50)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different pauses:\n%v\n%v", a, b)
	}
	if c := resyncDelays(t, 2, 50); slices.Equal(a, c) {
		t.Errorf("different seeds, same pauses: %v", a)
	}
	d := DefaultRunnerConfig().ResyncPeriod
	for _, got := range a {
		if got < d || got >= d+d/5 {
			t.Errorf("pause %v outside [%v, %v)", got, d, d+d/5)
		}
	}
}
