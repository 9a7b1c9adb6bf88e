package controller

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
	"golang.org/x/time/rate"
)

// ErrInvalidQueueConfig: a QueueConfig failed Validate.
var ErrInvalidQueueConfig = errors.New("controller: invalid queue config")

// QueueConfig tunes a Queue's retry behaviour.
type QueueConfig struct {
	// BaseDelay is the first per-key retry delay; each further failure of
	// the same key doubles it.
	BaseDelay time.Duration
	// MaxDelay caps the per-key delay.
	MaxDelay time.Duration
	// QPS and Burst size the token bucket shared by every AddRateLimited
	// call. QPS 0 disables the bucket.
	QPS   float64
	Burst int
}

// DefaultQueueConfig returns 5 ms doubling up to 30 s per key, and an overall
// bucket of 10 retries per second with a burst of 100.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{BaseDelay: 5 * time.Millisecond, MaxDelay: 30 * time.Second, QPS: 10, Burst: 100}
}

// Validate reports whether c is usable.
func (c QueueConfig) Validate() error {
	switch {
	case c.BaseDelay <= 0:
		return fmt.Errorf("%w: BaseDelay %v must be positive", ErrInvalidQueueConfig, c.BaseDelay)
	case c.MaxDelay < c.BaseDelay:
		return fmt.Errorf("%w: MaxDelay %v is below BaseDelay %v", ErrInvalidQueueConfig, c.MaxDelay, c.BaseDelay)
	case c.QPS < 0:
		return fmt.Errorf("%w: QPS %v is negative", ErrInvalidQueueConfig, c.QPS)
	case c.QPS > 0 && c.Burst < 1:
		return fmt.Errorf("%w: Burst %d must be at least 1 when QPS is set", ErrInvalidQueueConfig, c.Burst)
	}
	return nil
}

// Queue is a de-duplicating, rate-limited work queue of string keys. All
// methods are safe for concurrent use by any number of producers and
// workers. A worker loops on Get, processes the key, then calls Forget (on
// success) or AddRateLimited (on a retryable failure), and always Done.
type Queue struct {
	cfg     QueueConfig
	clock   clock.Clock
	limiter *rate.Limiter

	mu         sync.Mutex
	queue      []string            // ready keys, in order
	dirty      map[string]struct{} // keys that need processing (queued, or re-added while processing)
	processing map[string]struct{} // keys handed out by Get and not yet Done
	failures   map[string]int      // AddRateLimited count per key since Forget
	waiting    waitHeap            // keys added with a delay
	waitIdx    map[string]*waitItem
	shutdown   bool

	wake     chan struct{} // a key became ready (cap 1; Get passes it on)
	kick     chan struct{} // the earliest delayed key changed (cap 1)
	stop     chan struct{} // closed by ShutDown
	loopDone chan struct{} // closed when the delay loop has returned
}

// New returns a running Queue. A nil clock means clock.RealClock. Call ShutDown to
// release its goroutine.
func NewQueue(cfg QueueConfig, clk clock.Clock) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock()
	}
	q := &Queue{
		cfg:        cfg,
		clock:      clk,
		dirty:      make(map[string]struct{}),
		processing: make(map[string]struct{}),
		failures:   make(map[string]int),
		waitIdx:    make(map[string]*waitItem),
		wake:       make(chan struct{}, 1),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		loopDone:   make(chan struct{}),
	}
	if cfg.QPS > 0 {
		q.limiter = rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)
	}
	go q.delayLoop()
	return q, nil
}

// Add marks key as needing processing. It is a no-op if the key is already
// queued, or after ShutDown. A key being processed is queued again when its
// worker calls Done.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[key]; ok {
		return
	}
	q.dirty[key] = struct{}{}
	if _, ok := q.processing[key]; ok {
		return
	}
	q.queue = append(q.queue, key)
	signal(q.wake)
}

// AddAfter adds key once d has passed on the queue's clock (at once for
// d <= 0). A key already waiting keeps the earlier of its two due times.
func (q *Queue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if d <= 0 {
		q.addLocked(key)
		return
	}
	at := q.clock.Now().Add(d)
	if it, ok := q.waitIdx[key]; ok {
		if at.Before(it.at) {
			it.at = at
			heap.Fix(&q.waiting, it.index)
			signal(q.kick)
		}
		return
	}
	it := &waitItem{key: key, at: at}
	heap.Push(&q.waiting, it)
	q.waitIdx[key] = it
	signal(q.kick)
}

// AddRateLimited adds key after its retry delay: the larger of the key's
// exponential backoff (BaseDelay·2^failures, capped at MaxDelay) and the
// wait for a token from the shared bucket. Each call counts one failure of
// key until Forget.
func (q *Queue) AddRateLimited(key string) {
	q.AddAfter(key, q.when(key))
}

// when returns the next retry delay of key and counts the failure.
func (q *Queue) when(key string) time.Duration {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	now := q.clock.Now()
	q.mu.Unlock()

	d := backoff.Double(n+1, q.cfg.BaseDelay, q.cfg.MaxDelay)
	if q.limiter != nil {
		if b := q.limiter.ReserveN(now, 1).DelayFrom(now); b > d {
			d = b
		}
	}
	return d
}

// NumRequeues returns how many times key went through AddRateLimited since
// it was last forgotten.
func (q *Queue) NumRequeues(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[key]
}

// Forget resets key's backoff. Call it when the key was processed
// successfully. It does not remove the key from the queue.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// Get blocks until a key is ready and hands it to the caller, who must call
// Done(key) when finished. shutdown is true (and key empty) once ShutDown
// was called or ctx is done; the caller should then return. ShutDown does not
// drain: keys still queued are dropped.
func (q *Queue) Get(ctx context.Context) (key string, shutdown bool) {
	for {
		q.mu.Lock()
		if q.shutdown {
			q.mu.Unlock()
			return "", true
		}
		if len(q.queue) > 0 {
			key = q.queue[0]
			q.queue[0] = ""
			q.queue = q.queue[1:]
			q.processing[key] = struct{}{}
			delete(q.dirty, key)
			more := len(q.queue) > 0
			q.mu.Unlock()
			if more {
				// Pass the wake-up on to another waiting worker.
				signal(q.wake)
			}
			return key, false
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.stop:
		case <-ctx.Done():
			return "", true
		}
	}
}

// Done marks key as no longer being processed. If it was added meanwhile,
// it is queued again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if _, ok := q.dirty[key]; ok && !q.shutdown {
		q.queue = append(q.queue, key)
		signal(q.wake)
	}
}

// Len returns the number of keys ready to be handed out (not counting keys
// being processed or waiting for a delay).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Depth returns the keys ready to be handed out (Len) and those waiting
// out a delay (AddAfter, AddRateLimited).
func (q *Queue) Depth() (ready, delayed int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue), len(q.waiting)
}

// ShutDown stops the queue: every Get returns shutdown, later adds are
// ignored, and the delay goroutine exits before ShutDown returns. It may be
// called more than once.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	if !q.shutdown {
		q.shutdown = true
		close(q.stop)
	}
	q.mu.Unlock()
	<-q.loopDone
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

// delayLoop moves delayed keys into the queue when they are due. It arms
// one timer, for the earliest due key, at a time, and keeps it while that
// due time stays the earliest (a key added behind it changes nothing).
func (q *Queue) delayLoop() {
	defer close(q.loopDone)
	var timer clock.Timer
	var fire <-chan time.Time
	var armed time.Time // the due time timer is armed for
	disarm := func() {
		if timer != nil {
			timer.Stop()
			timer, fire = nil, nil
		}
	}
	defer disarm()
	for {
		q.mu.Lock()
		now := q.clock.Now()
		for len(q.waiting) > 0 && !q.waiting[0].at.After(now) {
			it := heap.Pop(&q.waiting).(*waitItem)
			delete(q.waitIdx, it.key)
			q.addLocked(it.key)
		}
		switch {
		case len(q.waiting) == 0:
			disarm()
		case timer == nil || !q.waiting[0].at.Equal(armed):
			disarm()
			armed = q.waiting[0].at
			timer = q.clock.NewTimer(armed.Sub(now))
			fire = timer.C()
		}
		q.mu.Unlock()

		select {
		case <-q.stop:
			return
		case <-q.kick:
		case <-fire:
			timer, fire = nil, nil // spent
		}
	}
}

// signal does a non-blocking send on a capacity-1 channel.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitItem is a key due at a time.
type waitItem struct {
	key   string
	at    time.Time
	index int
}

// waitHeap orders waiting keys by due time, then key (so equal due times
// come out in a fixed order).
type waitHeap []*waitItem

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key < h[j].key
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waitHeap) Push(x any) {
	it := x.(*waitItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *waitHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
