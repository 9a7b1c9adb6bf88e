package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/raftstore"
)

// Recorder settings.
const (
	// recordDelay is how long the recorder gathers events before writing
	// them as one transaction: a failover's dozen events cost one or two
	// Raft entries, and a change is in the timeline within about this.
	recordDelay = 100 * time.Millisecond
	// recordBatch caps the events of one transaction.
	recordBatch = 128
	// recordBuffer caps the events waiting to be written; beyond it the
	// oldest are dropped (the store is down or far behind).
	recordBuffer = api.MaxEvents
	// leaderEventIndex is the EventName index of a LeaderElected event,
	// named after the applied index at which its leader started: the
	// changes at that index were recorded with the indexes below it.
	leaderEventIndex = 9999
)

// eventStore is what the recorder needs of the store.
type eventStore interface {
	List(kind api.Kind) ([]api.RawObject, uint64, error)
	Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error)
	Txn(ctx context.Context, ops []raftstore.Op) ([]api.RawObject, error)
}

// recorder turns the changes committed while this agent leads into events
// (controller.DeriveEvents) and writes them to the store, batched. It runs
// only on the leader, so each change is recorded once; a new leader starts
// from the state it finds (and a LeaderElected event), so the changes the
// old leader committed in its last recordDelay may have no events. An idle
// cluster commits no changes and so writes no events.
type recorder struct {
	store eventStore
	clock clock.Clock
	log   *slog.Logger
	node  string

	objs    map[objKey]api.Object
	pending []raftstore.Op
	lastRV  uint64 // resourceVersion of the last change seen
	lastIdx int    // events named after lastRV so far
}

type objKey struct {
	kind api.Kind
	name string
}

func newRecorder(store eventStore, clk clock.Clock, log *slog.Logger, node string) *recorder {
	return &recorder{store: store, clock: clk, log: log, node: node}
}

// run records until ctx ends.
func (r *recorder) run(ctx context.Context) error {
	rv, err := r.relist(ctx, true)
	if err != nil {
		return err
	}
	r.leaderElected(ctx, rv)
	for ctx.Err() == nil {
		events, err := r.store.Watch(ctx, "", rv)
		if errors.Is(err, raftstore.ErrCompacted) {
			rv, err = r.relist(ctx, false)
			continue
		}
		if err != nil {
			return err
		}
		if rv, err = r.follow(ctx, events); err != nil {
			return err
		}
	}
	return nil
}

// follow records events until the watch ends, then relists; it returns
// the resourceVersion to watch from next.
func (r *recorder) follow(ctx context.Context, events <-chan api.WatchEvent) (uint64, error) {
	var timer clock.Timer
	var flush <-chan time.Time
	arm := func() {
		if flush == nil && len(r.pending) > 0 {
			timer = r.clock.NewTimer(recordDelay)
			flush = timer.C()
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			// Leadership lost or stopping: a last try, briefly.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			r.flush(fctx)
			cancel()
			return 0, ctx.Err()
		case <-flush:
			flush = nil
			r.flush(ctx)
			arm()
		case ev, ok := <-events:
			if !ok || ev.Type == api.EventRelist {
				r.flush(ctx)
				return r.relist(ctx, false)
			}
			r.change(ev)
			if len(r.pending) >= recordBatch {
				r.flush(ctx)
			}
			arm()
		}
	}
}

// relist reads every object. The first time it only fills the cache; after
// a watch was lost it records what changed in between, as changes at the
// list's resourceVersion.
func (r *recorder) relist(ctx context.Context, first bool) (uint64, error) {
	raws, rv, err := r.store.List("")
	if err != nil {
		return 0, err
	}
	seen := make(map[objKey]api.Object, len(raws))
	for _, raw := range raws {
		o, err := api.FromRaw(raw)
		if err != nil {
			continue
		}
		seen[objKey{raw.Kind, raw.Metadata.Name}] = o
	}
	if !first {
		for k, o := range seen {
			r.derive(rv, r.objs[k], o)
		}
		for k, o := range r.objs {
			if seen[k] == nil {
				r.derive(rv, o, nil)
			}
		}
		r.flush(ctx)
	}
	r.objs = seen
	return rv, nil
}

// change records one watch event.
func (r *recorder) change(ev api.WatchEvent) {
	k := objKey{ev.Object.Kind, ev.Object.Metadata.Name}
	old := r.objs[k]
	if ev.Type == api.EventDeleted {
		delete(r.objs, k)
		r.derive(ev.ResourceVersion, old, nil)
		return
	}
	cur, err := api.FromRaw(ev.Object)
	if err != nil {
		return
	}
	r.objs[k] = cur
	r.derive(ev.ResourceVersion, old, cur)
}

// derive queues the events of one change at rv.
func (r *recorder) derive(rv uint64, old, cur api.Object) {
	specs := controller.DeriveEvents(old, cur, r.clock.Now())
	if rv != r.lastRV {
		r.lastRV, r.lastIdx = rv, 0
	}
	for _, s := range specs {
		if r.lastIdx >= leaderEventIndex {
			break
		}
		s.SourceVersion = rv
		r.queue(api.EventName(rv, r.lastIdx), s)
		r.lastIdx++
	}
}

// queue adds one event to the pending batch, dropping the oldest beyond
// recordBuffer.
func (r *recorder) queue(name string, s api.EventSpec) {
	e := &api.Event{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: name, Labels: api.EventLabels(s)}, Spec: s}
	if err := api.ValidateEvent(e); err != nil {
		r.log.Warn("event not recorded", "err", err)
		return
	}
	raw, err := api.ToRaw(e)
	if err != nil {
		return
	}
	if len(r.pending) >= recordBuffer {
		r.pending = r.pending[1:]
	}
	r.pending = append(r.pending, raftstore.Op{Type: raftstore.OpCreate, Object: raw})
}

// flush writes the pending events, recordBatch per transaction. A batch
// the store refuses is dropped: events are for people, and a retry could
// only be refused again.
func (r *recorder) flush(ctx context.Context) {
	for len(r.pending) > 0 {
		n := min(len(r.pending), recordBatch)
		batch := r.pending[:n]
		id := "ev-" + batch[0].Object.Metadata.Name
		wctx, cancel := context.WithTimeout(raftstore.WithRequestID(ctx, id), 5*time.Second)
		_, err := r.store.Txn(wctx, batch)
		cancel()
		if err != nil && !errors.Is(err, raftstore.ErrExists) {
			if errors.Is(err, raftstore.ErrNoLeader) || errors.Is(err, raftstore.ErrClosed) || ctx.Err() != nil {
				return // keep them for the next flush, if any
			}
			r.log.Warn("events dropped", "count", n, "err", err)
		}
		r.pending = r.pending[n:]
	}
}

// leaderElected records that this agent leads from applied index rv.
func (r *recorder) leaderElected(ctx context.Context, rv uint64) {
	s := api.EventSpec{
		Time:   r.clock.Now(),
		Object: api.OwnerRef{Kind: api.KindNode, Name: r.node},
		Reason: api.ReasonLeaderElected, Type: api.EventNormal, Node: r.node,
		Message: fmt.Sprintf("%s leads from index %d; the controllers resync", r.node, rv),
	}
	r.queue(api.EventName(rv, leaderEventIndex), s)
	r.flush(ctx)
}
