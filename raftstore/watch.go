package raftstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/herd-dev/herd/api"
)

// watchBatch is how many events a watcher takes from the history per lock.
const watchBatch = 64

// hub keeps a bounded history of events in a ring and lets watchers follow
// it. The history is bounded twice: by a number of events and by the bytes
// they hold on to (eventBytes), whichever binds first; the ring grows as it
// fills, so a quiet store does not hold a full ring of empty slots.
// Publishing appends to the ring and wakes the watchers; it never waits
// for them, so a slow watcher cannot stall the FSM. Each watcher is one
// goroutine with a cursor into the ring: it copies events out under the lock
// and sends them on its buffered channel outside it. A watcher whose cursor
// falls off the end of the ring (it is more than the history behind) gets an
// EventRelist and its channel is closed; so do all watchers when the state is
// restored from a snapshot.
//
// Safe for concurrent use.
type hub struct {
	mu     sync.Mutex
	ring   []api.WatchEvent // slot seq%len(ring) holds event seq
	limit  int              // at most this many events retained
	limitB int              // and at most this many bytes (eventBytes), 0: no bound
	bytes  int              // eventBytes of the retained events
	head   uint64           // seq of the oldest retained event
	next   uint64           // seq the next event gets
	base   uint64           // events with RV <= base may be missing
	lastRV uint64           // last applied index
	epoch  uint64           // bumped by reset: every watcher must relist
	notify chan struct{}    // closed and replaced on every publish
	closed bool
	done   chan struct{} // closed by close
	buffer int
	active int // running watchers
}

// hubMinSlots is the ring's size before it first grows.
const hubMinSlots = 64

// hubFor returns the hub of a store configured by c: history bounded by
// WatchHistory events and WatchHistoryBytes.
func hubFor(c Config) *hub {
	h := newHub(c.WatchHistory, c.WatchBuffer)
	h.limitB = c.WatchHistoryBytes
	return h
}

// newHub returns a hub keeping up to history events, with no bound on
// their bytes, and watch channels of the given buffer.
func newHub(history, buffer int) *hub {
	return &hub{
		ring:   make([]api.WatchEvent, min(history, hubMinSlots)),
		limit:  history,
		notify: make(chan struct{}),
		done:   make(chan struct{}),
		buffer: buffer,
	}
}

// publish records the events of the entry at rv (possibly none) and wakes
// watchers and waitApplied callers.
func (h *hub) publish(rv uint64, events []api.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range events {
		n := eventBytes(ev)
		for h.next > h.head && (h.next-h.head == uint64(h.limit) || (h.limitB > 0 && h.bytes+n > h.limitB)) {
			h.evict()
		}
		if h.next-h.head == uint64(len(h.ring)) {
			h.grow()
		}
		h.ring[h.next%uint64(len(h.ring))] = ev
		h.bytes += n
		h.next++
	}
	h.lastRV = rv
	close(h.notify)
	h.notify = make(chan struct{})
}

// eventBytes is roughly what a retained event holds on to: its slot and
// its object's name, labels and JSON. A history bounded by it cannot
// grow with the size of the objects written.
func eventBytes(ev api.WatchEvent) int {
	o := ev.Object
	n := int(unsafe.Sizeof(ev)) + len(o.Kind) + len(o.Metadata.Name) + len(o.Spec) + len(o.Status)
	for k, v := range o.Metadata.Labels {
		n += len(k) + len(v)
	}
	return n
}

// evict drops the oldest retained event; watches resuming from before it
// must relist. h.mu held.
func (h *hub) evict() {
	slot := h.head % uint64(len(h.ring))
	h.base = h.ring[slot].ResourceVersion
	h.bytes -= eventBytes(h.ring[slot])
	h.ring[slot] = api.WatchEvent{}
	h.head++
}

// grow doubles the ring (up to the limit on events), keeping each
// retained event at its sequence number's slot. h.mu held.
func (h *hub) grow() {
	ring := make([]api.WatchEvent, min(2*len(h.ring), h.limit))
	for seq := h.head; seq < h.next; seq++ {
		ring[seq%uint64(len(ring))] = h.ring[seq%uint64(len(h.ring))]
	}
	h.ring = ring
}

// reset drops the history after a snapshot restore at rv and makes every
// running watcher end with EventRelist.
func (h *hub) reset(rv uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring = make([]api.WatchEvent, min(h.limit, hubMinSlots))
	h.bytes = 0
	h.head = h.next
	h.base = rv
	h.lastRV = rv
	h.epoch++
	close(h.notify)
	h.notify = make(chan struct{})
}

// close ends every watch; later watches fail with ErrClosed.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// last returns the last applied index.
func (h *hub) last() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastRV
}

// watchers returns the number of running watchers.
func (h *hub) watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active
}

// waitApplied waits until the entry at index has been applied.
func (h *hub) waitApplied(ctx context.Context, index uint64) error {
	for {
		h.mu.Lock()
		if h.lastRV >= index {
			h.mu.Unlock()
			return nil
		}
		ch, closed := h.notify, h.closed
		h.mu.Unlock()
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-h.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watch starts a watcher for kind ("" = every object kind, not events) delivering every event with
// RV > fromRV; fromRV 0 means from now.
func (h *hub) watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	w := &watcher{
		h:     h,
		ctx:   ctx,
		kind:  kind,
		minRV: fromRV,
		epoch: h.epoch,
		out:   make(chan api.WatchEvent, h.buffer),
	}
	switch {
	case fromRV == 0 || fromRV >= h.lastRV:
		w.cursor = h.next
	case fromRV < h.base:
		return nil, fmt.Errorf("%w: resourceVersion %d is older than the retained history (from %d)", ErrCompacted, fromRV, h.base)
	default:
		n := int(h.next - h.head)
		size := uint64(len(h.ring))
		i := sort.Search(n, func(i int) bool {
			return h.ring[(h.head+uint64(i))%size].ResourceVersion > fromRV
		})
		w.cursor = h.head + uint64(i)
	}
	h.active++
	go w.run()
	return w.out, nil
}

// watcher is one Watch: a goroutine following the hub's ring.
type watcher struct {
	h      *hub
	ctx    context.Context
	kind   api.Kind
	minRV  uint64
	epoch  uint64
	cursor uint64
	out    chan api.WatchEvent
}

// take copies up to watchBatch matching events after the cursor. relist is
// set when the watcher fell behind or the state was restored.
func (w *watcher) take(buf []api.WatchEvent) (events []api.WatchEvent, relist api.WatchEvent, caughtUp bool, wake <-chan struct{}) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch != w.epoch || w.cursor < h.head {
		return nil, api.WatchEvent{Type: api.EventRelist, ResourceVersion: h.lastRV}, false, nil
	}
	size := uint64(len(h.ring))
	events = buf[:0]
	for n := 0; w.cursor < h.next && n < watchBatch; n++ {
		ev := h.ring[w.cursor%size]
		w.cursor++
		if ev.ResourceVersion <= w.minRV || !w.matches(ev.Object.Kind) {
			continue
		}
		events = append(events, ev)
	}
	return events, api.WatchEvent{}, w.cursor == h.next, h.notify
}

// matches reports whether the watcher follows kind: its own kind, or for
// "" every object kind (events are followed only by name).
func (w *watcher) matches(kind api.Kind) bool {
	if w.kind == "" {
		return kind != api.KindEvent
	}
	return kind == w.kind
}

func (w *watcher) run() {
	defer func() {
		w.h.mu.Lock()
		w.h.active--
		w.h.mu.Unlock()
		close(w.out)
	}()
	var buf []api.WatchEvent
	for {
		events, relist, caughtUp, wake := w.take(buf)
		for i := range events {
			ev := events[i]
			ev.Object = cloneRaw(ev.Object)
			events[i] = api.WatchEvent{} // drop the reference to the ring's copy
			if !w.send(ev) {
				return
			}
		}
		buf = events
		if relist.Type != "" {
			w.send(relist)
			return
		}
		if !caughtUp {
			continue
		}
		select {
		case <-wake:
		case <-w.ctx.Done():
			return
		case <-w.h.done:
			return
		}
	}
}

func (w *watcher) send(ev api.WatchEvent) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	case <-w.h.done:
		return false
	}
}
