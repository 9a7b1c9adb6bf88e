package gossip

import (
	"sync"
	"time"
)

// EventType says what happened to a member.
type EventType int

// Event types.
const (
	// EventJoin: a member became alive (joined, or came back).
	EventJoin EventType = iota + 1
	// EventLeave: a member left gracefully (Gossip.Leave).
	EventLeave
	// EventFail: a member was declared dead by failure detection.
	EventFail
	// EventUpdate: a member's metadata (or address) changed.
	EventUpdate
)

// String returns "join", "leave", "fail" or "update".
func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	}
	return "unknown"
}

// Event says which member changed. It is a hint, not the state: events for
// the same member may be coalesced into the latest one, so a consumer
// should re-read Members (level-triggered) rather than replay events.
type Event struct {
	Type EventType
	// Member is the member as it was right after the change.
	Member Member
	// At is when this node learned of the change (Config.Clock).
	At time.Time
}

// eventQueue delivers events without ever blocking the producer
// (memberlist's delegate callbacks). Undelivered events are kept at most one
// per member name: a newer event for a member still waiting replaces the
// older one in place. Memory is thus bounded by the number of members plus
// the output buffer.
//
// push may be called from any goroutine; run is the single pump goroutine.
type eventQueue struct {
	mu      sync.Mutex
	order   []string         // member names in arrival order
	pending map[string]Event // latest undelivered event per name

	wake    chan struct{} // capacity 1: "queue not empty"
	out     chan Event
	done    chan struct{}
	stopped chan struct{}
	stop    sync.Once
}

func newEventQueue(buffer int) *eventQueue {
	return &eventQueue{
		pending: make(map[string]Event),
		wake:    make(chan struct{}, 1),
		out:     make(chan Event, buffer),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

// push queues ev, coalescing with an undelivered event for the same member.
// It never blocks.
func (q *eventQueue) push(ev Event) {
	name := ev.Member.Name
	q.mu.Lock()
	if _, ok := q.pending[name]; !ok {
		q.order = append(q.order, name)
	}
	q.pending[name] = ev
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop removes and returns the oldest undelivered event.
func (q *eventQueue) pop() (Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return Event{}, false
	}
	name := q.order[0]
	q.order[0] = ""
	q.order = q.order[1:]
	ev := q.pending[name]
	delete(q.pending, name)
	return ev, true
}

// run moves events to out until close; it closes out when it returns.
func (q *eventQueue) run() {
	defer close(q.stopped)
	defer close(q.out)
	for {
		ev, ok := q.pop()
		if !ok {
			select {
			case <-q.wake:
				continue
			case <-q.done:
				return
			}
		}
		select {
		case q.out <- ev:
		case <-q.done:
			return
		}
	}
}

// close stops run and waits for it; undelivered events are dropped.
func (q *eventQueue) close() {
	q.stop.Do(func() { close(q.done) })
	<-q.stopped
}
