package fakestore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// Store is an in-memory object store. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	now     func() time.Time
	objs    map[api.Kind]map[string]api.RawObject
	rv      uint64           // last committed resourceVersion
	history []api.WatchEvent // every event, in commit order
	// compacted: watches must resume from at least this resourceVersion.
	compacted uint64
	// changed is closed and replaced on every commit and relist.
	changed   chan struct{}
	epoch     uint64 // bumped by EndWatches
	noLeader  bool
	txnHook   func(ops []raftstore.Op) error
	leaderID  string
	leaderAdr string
}

// New returns an empty store that is its own leader, stamping creation
// times with now (time.Now when nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:       now,
		objs:      map[api.Kind]map[string]api.RawObject{},
		changed:   make(chan struct{}),
		leaderID:  "fake",
		leaderAdr: "127.0.0.1:7947",
	}
}

// SetLeader makes the store have a leader (writes succeed) or not (writes
// fail with raftstore.ErrNoLeader).
func (s *Store) SetLeader(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noLeader = !ok
}

// SetTxnHook installs f, called with every transaction before it is
// applied; a non-nil error fails the transaction. Tests use it to inject
// a concurrent write or a failure.
func (s *Store) SetTxnHook(f func(ops []raftstore.Op) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txnHook = f
}

// Compact forgets the event history up to rv: watches from an older
// resourceVersion fail with raftstore.ErrCompacted.
func (s *Store) Compact(rv uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = rv
}

// EndWatches ends every open watch with an api.EventRelist event, as the
// store does after restoring a snapshot.
func (s *Store) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	s.notify()
}

// ResourceVersion returns the last committed resourceVersion.
func (s *Store) ResourceVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Get returns one object.
func (s *Store) Get(kind api.Kind, name string) (api.RawObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[kind][name]
	if !ok {
		return api.RawObject{}, fmt.Errorf("%w: %s/%s", raftstore.ErrNotFound, kind, name)
	}
	return clone(o), nil
}

// List returns the objects of kind sorted by name, and the last committed
// resourceVersion.
func (s *Store) List(kind api.Kind) ([]api.RawObject, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if api.New(kind) == nil {
		return nil, 0, fmt.Errorf("%w: unknown kind %q", raftstore.ErrInvalid, kind)
	}
	out := make([]api.RawObject, 0, len(s.objs[kind]))
	for _, name := range slices.Sorted(maps.Keys(s.objs[kind])) {
		out = append(out, clone(s.objs[kind][name]))
	}
	return out, s.rv, nil
}

// Txn applies ops atomically at one new resourceVersion and returns the
// stored object of each op (for a delete, its last state).
func (s *Store) Txn(ctx context.Context, ops []raftstore.Op) ([]api.RawObject, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	hook := s.txnHook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ops); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noLeader {
		return nil, raftstore.ErrNoLeader
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: empty transaction", raftstore.ErrInvalid)
	}
	rv := s.rv + 1
	// Work on a copy of the touched objects so that a failing op changes
	// nothing.
	work := map[api.Kind]map[string]*api.RawObject{}
	lookup := func(k api.Kind, n string) (*api.RawObject, bool) {
		if m, ok := work[k]; ok {
			if p, ok := m[n]; ok {
				return p, p != nil
			}
		}
		o, ok := s.objs[k][n]
		if !ok {
			return nil, false
		}
		c := clone(o)
		return &c, true
	}
	put := func(k api.Kind, n string, o *api.RawObject) {
		if work[k] == nil {
			work[k] = map[string]*api.RawObject{}
		}
		work[k][n] = o
	}
	var (
		out    []api.RawObject
		events []api.WatchEvent
	)
	for i, op := range ops {
		o := op.Object
		k, n := o.Kind, o.Metadata.Name
		if api.New(k) == nil || n == "" {
			return nil, fmt.Errorf("%w: op %d: kind %q name %q", raftstore.ErrInvalid, i, k, n)
		}
		cur, exists := lookup(k, n)
		if op.Type != raftstore.OpCreate {
			if !exists {
				return nil, fmt.Errorf("%w: %s/%s", raftstore.ErrNotFound, k, n)
			}
			if want := o.Metadata.ResourceVersion; want != 0 && want != cur.Metadata.ResourceVersion {
				return nil, fmt.Errorf("%w: %s/%s is at resourceVersion %d, not %d",
					raftstore.ErrConflict, k, n, cur.Metadata.ResourceVersion, want)
			}
		}
		var next api.RawObject
		ev := api.EventModified
		switch op.Type {
		case raftstore.OpCreate:
			if exists {
				return nil, fmt.Errorf("%w: %s/%s", raftstore.ErrExists, k, n)
			}
			next = clone(o)
			next.Metadata.Labels = cleanLabels(next.Metadata.Labels)
			next.Metadata.Generation = 1
			next.Spec, next.Status = compact(next.Spec), compact(next.Status)
			if next.Metadata.Created.IsZero() {
				next.Metadata.Created = s.now().UTC()
			}
			ev = api.EventAdded
		case raftstore.OpUpdate:
			next = *cur
			labels := cleanLabels(maps.Clone(o.Metadata.Labels))
			spec := compact(o.Spec)
			specChanged := !bytes.Equal(spec, cur.Spec)
			if !specChanged && maps.Equal(labels, cur.Metadata.Labels) {
				ev = "" // no-op: nothing written, no event
				break
			}
			next.Metadata.Labels = labels
			if specChanged {
				next.Metadata.Generation++
				next.Spec = spec
			}
		case raftstore.OpUpdateStatus:
			next = *cur
			status := compact(o.Status)
			if bytes.Equal(status, cur.Status) {
				ev = ""
				break
			}
			next.Status = status
		case raftstore.OpDelete:
			next = *cur
			ev = api.EventDeleted
		default:
			return nil, fmt.Errorf("%w: op %d: unknown op type %q", raftstore.ErrInvalid, i, op.Type)
		}
		next.Kind = k
		if ev != "" {
			next.Metadata.ResourceVersion = rv
		}
		if op.Type == raftstore.OpDelete {
			put(k, n, nil)
		} else {
			c := next
			put(k, n, &c)
		}
		out = append(out, clone(next))
		if ev != "" {
			events = append(events, api.WatchEvent{Type: ev, ResourceVersion: rv, Object: clone(next)})
		}
	}
	for k, m := range work {
		for n, o := range m {
			if o == nil {
				delete(s.objs[k], n)
				continue
			}
			if s.objs[k] == nil {
				s.objs[k] = map[string]api.RawObject{}
			}
			s.objs[k][n] = *o
		}
	}
	s.rv = rv
	s.history = append(s.history, events...)
	s.notify()
	return out, nil
}

// Watch follows events of kind ("" for every kind) with a resourceVersion
// greater than fromRV (0: from now on).
func (s *Store) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind != "" && api.New(kind) == nil {
		return nil, fmt.Errorf("%w: unknown kind %q", raftstore.ErrInvalid, kind)
	}
	if fromRV == 0 {
		fromRV = s.rv
	} else if fromRV < s.compacted {
		return nil, fmt.Errorf("%w: resourceVersion %d is older than %d", raftstore.ErrCompacted, fromRV, s.compacted)
	}
	pos, _ := slices.BinarySearchFunc(s.history, fromRV+1, func(e api.WatchEvent, rv uint64) int {
		return cmp.Compare(e.ResourceVersion, rv)
	})
	epoch := s.epoch
	ch := make(chan api.WatchEvent)
	go func() {
		defer close(ch)
		for {
			s.mu.Lock()
			pending := slices.Clone(s.history[pos:])
			pos = len(s.history)
			changed := s.changed
			ended := s.epoch != epoch
			s.mu.Unlock()
			for _, ev := range pending {
				if kind != "" && ev.Object.Kind != kind {
					continue
				}
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
			if ended {
				select {
				case ch <- api.WatchEvent{Type: api.EventRelist, ResourceVersion: s.ResourceVersion()}:
				case <-ctx.Done():
				}
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// ReadBarrier fails with raftstore.ErrNoLeader while the store has no
// leader (SetLeader(false)); otherwise the one copy is current.
func (s *Store) ReadBarrier(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noLeader {
		return fmt.Errorf("%w: read barrier", raftstore.ErrNoLeader)
	}
	return ctx.Err()
}

// IsLeader reports whether writes can be committed.
func (s *Store) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.noLeader
}

// Leader returns the leader's id and address, empty when there is none.
func (s *Store) Leader() (id, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noLeader {
		return "", ""
	}
	return s.leaderID, s.leaderAdr
}

func clone(o api.RawObject) api.RawObject {
	o.Metadata.Labels = maps.Clone(o.Metadata.Labels)
	o.Spec = bytes.Clone(o.Spec)
	o.Status = bytes.Clone(o.Status)
	return o
}

// compact returns b without insignificant white space; empty and null
// become nil, as the store keeps them.
func compact(b json.RawMessage) json.RawMessage {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return bytes.Clone(b)
	}
	return buf.Bytes()
}

// cleanLabels gives "no labels" one representation, nil.
func cleanLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
