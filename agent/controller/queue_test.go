package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newQueue(t *testing.T, cfg controller.QueueConfig) (*controller.Queue, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(t0)
	q, err := controller.NewQueue(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.ShutDown)
	return q, clk
}

// noBucket is the default config without the shared token bucket, so
// delays are the per-key backoff alone.
func noBucket() controller.QueueConfig {
	c := controller.DefaultQueueConfig()
	c.QPS = 0
	return c
}

// get returns the next key, failing the test if none is ready within 10 s.
func get(t *testing.T, q *controller.Queue) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, shut := q.Get(ctx)
	if shut {
		t.Fatal("Get: shut down or timed out")
	}
	return k
}

func TestQueueDedup(t *testing.T) {
	q, _ := newQueue(t, noBucket())
	for _, k := range []string{"a", "b", "a", "c", "b", "a"} {
		q.Add(k)
	}
	if q.Len() != 3 {
		t.Fatalf("Len = %d, want 3", q.Len())
	}
	var got []string
	for range 3 {
		k := get(t, q)
		got = append(got, k)
		q.Done(k)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if q.Len() != 0 {
		t.Errorf("Len = %d after draining, want 0", q.Len())
	}
}

func TestQueueReAddWhileProcessing(t *testing.T) {
	q, _ := newQueue(t, noBucket())
	q.Add("a")
	k := get(t, q)
	q.Add("a")
	q.Add("a")
	if q.Len() != 0 {
		t.Fatalf("Len = %d while a is processed, want 0 (not handed out twice)", q.Len())
	}
	q.Done(k)
	if q.Len() != 1 {
		t.Fatalf("Len = %d after Done, want 1 (re-queued once)", q.Len())
	}
	k = get(t, q)
	q.Done(k)
	if q.Len() != 0 {
		t.Errorf("Len = %d, want 0", q.Len())
	}
}

func TestQueueNoConcurrentProcessingOfOneKey(t *testing.T) {
	q, _ := newQueue(t, noBucket())
	const workers, keys, adds = 4, 5, 400
	var inFlight [keys]atomic.Int32
	var violations, processed atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shut := q.Get(ctx)
				if shut {
					return
				}
				var i int
				fmt.Sscanf(k, "k%d", &i)
				if inFlight[i].Add(1) > 1 {
					violations.Add(1)
				}
				for range 100 { // a little work, widening the window
					_ = q.Len()
				}
				inFlight[i].Add(-1)
				processed.Add(1)
				q.Done(k)
			}
		})
	}
	for n := range adds {
		q.Add(fmt.Sprintf("k%d", n%keys))
	}
	testutil.Until(t, 10*time.Second, "the queue to drain", func() bool { return q.Len() == 0 && processed.Load() > 0 })
	// Every key is processed at least once after its last Add: add a
	// marker round and wait for it.
	before := processed.Load()
	for i := range keys {
		q.Add(fmt.Sprintf("k%d", i))
	}
	testutil.Until(t, 10*time.Second, "the last round", func() bool { return processed.Load() >= before+1 && q.Len() == 0 })
	cancel()
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Errorf("%d times a key was processed by two workers at once", v)
	}
}

func TestQueueBackoffGrowthAndForget(t *testing.T) {
	cfg := noBucket()
	cfg.MaxDelay = 40 * time.Millisecond
	q, clk := newQueue(t, cfg)
	now := t0
	for i, want := range []time.Duration{5, 10, 20, 40, 40} {
		want *= time.Millisecond
		q.AddRateLimited("k")
		clk.WaitTimer(t, now.Add(want))
		if q.Len() != 0 {
			t.Fatalf("retry %d: ready before its delay", i)
		}
		clk.Advance(want)
		now = now.Add(want)
		q.Done(get(t, q))
		if n := q.NumRequeues("k"); n != i+1 {
			t.Errorf("NumRequeues = %d, want %d", n, i+1)
		}
	}
	q.Forget("k")
	if n := q.NumRequeues("k"); n != 0 {
		t.Errorf("NumRequeues after Forget = %d, want 0", n)
	}
	q.AddRateLimited("k")
	clk.WaitTimer(t, now.Add(5*time.Millisecond))
	// Another key has its own backoff.
	q.AddRateLimited("other")
	q.AddRateLimited("other")
	clk.WaitTimer(t, now.Add(5*time.Millisecond))
}

func TestQueueTokenBucket(t *testing.T) {
	cfg := controller.DefaultQueueConfig()
	cfg.QPS, cfg.Burst = 1, 1
	q, clk := newQueue(t, cfg)
	q.AddRateLimited("a") // takes the one token: per-key delay only
	q.AddRateLimited("b") // waits a second for the next token
	clk.WaitTimer(t, t0.Add(5*time.Millisecond))
	clk.Advance(5 * time.Millisecond)
	if k := get(t, q); k != "a" {
		t.Fatalf("first = %q, want a", k)
	}
	if q.Len() != 0 {
		t.Fatal("b ready before the bucket refilled")
	}
	clk.WaitTimer(t, t0.Add(time.Second))
	clk.Advance(time.Second - 5*time.Millisecond)
	if k := get(t, q); k != "b" {
		t.Fatalf("second = %q, want b", k)
	}
}

func TestQueueAddAfterOrdering(t *testing.T) {
	q, clk := newQueue(t, noBucket())
	ms := time.Millisecond
	q.AddAfter("a", 30*ms)
	q.AddAfter("b", 10*ms)
	q.AddAfter("c", 20*ms)
	q.AddAfter("b", 50*ms) // keeps the earlier due time
	q.AddAfter("d", 0)     // at once
	if k := get(t, q); k != "d" {
		t.Fatalf("immediate key = %q, want d", k)
	}
	var got []string
	for _, step := range []time.Duration{10, 10, 10} {
		next := clk.Now().Add(step * ms)
		clk.WaitTimer(t, next)
		if q.Len() != 0 {
			t.Fatalf("a key is ready before %v", next)
		}
		clk.Advance(step * ms)
		k := get(t, q)
		got = append(got, k)
		q.Done(k)
	}
	if diff := cmp.Diff([]string{"b", "c", "a"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// An earlier AddAfter moves a waiting key forward.
	q.AddAfter("e", time.Hour)
	q.AddAfter("e", ms)
	clk.WaitTimer(t, clk.Now().Add(ms))
	clk.Advance(ms)
	if k := get(t, q); k != "e" {
		t.Errorf("moved-forward key = %q, want e", k)
	}
}

func TestQueueShutDownUnblocksGet(t *testing.T) {
	q, _ := newQueue(t, noBucket())
	done := make(chan bool)
	for range 3 {
		go func() {
			_, shut := q.Get(context.Background())
			done <- shut
		}()
	}
	q.ShutDown()
	for range 3 {
		select {
		case shut := <-done:
			if !shut {
				t.Error("Get returned a key after ShutDown, want shutdown")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Get still blocked after ShutDown")
		}
	}
	q.Add("x")
	if q.Len() != 0 {
		t.Error("Add after ShutDown queued a key")
	}
	if !q.ShuttingDown() {
		t.Error("ShuttingDown = false")
	}
	q.ShutDown() // idempotent
}

func TestQueueGetContextCancel(t *testing.T) {
	q, _ := newQueue(t, noBucket())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() {
		_, shut := q.Get(ctx)
		done <- shut
	}()
	cancel()
	select {
	case shut := <-done:
		if !shut {
			t.Error("Get returned a key on cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get still blocked after cancel")
	}
}

func TestQueueConfigValidate(t *testing.T) {
	bad := []controller.QueueConfig{
		{BaseDelay: 0, MaxDelay: time.Second},
		{BaseDelay: time.Second, MaxDelay: time.Millisecond},
		{BaseDelay: time.Millisecond, MaxDelay: time.Second, QPS: -1},
		{BaseDelay: time.Millisecond, MaxDelay: time.Second, QPS: 1, Burst: 0},
	}
	for _, c := range bad {
		if _, err := controller.NewQueue(c, nil); !errors.Is(err, controller.ErrInvalidQueueConfig) {
			t.Errorf("New(%+v) err = %v, want ErrInvalidConfig", c, err)
		}
	}
	if err := controller.DefaultQueueConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig invalid: %v", err)
	}
}
