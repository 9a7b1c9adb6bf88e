package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
)

// MemStore is the store's state machine without Raft: the same FSM, the
// same transaction rules (all or nothing, compare-and-swap on a non-zero
// resourceVersion, generation only on a spec change, no-op writes writing
// nothing) and the same watch hub, applied in memory on one process. It is
// for tests of the API and its clients, which need a store but not a
// cluster; what it answers is what a one-server Store would answer, because
// it is the same code. Safe for concurrent use.
//
// Unlike a Raft log, a rejected transaction takes no resourceVersion.
type MemStore struct {
	fsm *fsm
	hub *hub

	mu       sync.Mutex // serialises transactions; guards the fields below
	clock    clock.Clock
	noLeader bool
	hook     func(ops []Op) error
}

// NewMemStore returns an empty in-memory store that is its own leader,
// stamping creation times with clk (clock.RealClock() when nil).
func NewMemStore(clk clock.Clock) *MemStore {
	if clk == nil {
		clk = clock.RealClock()
	}
	h := hubFor(DefaultConfig())
	return &MemStore{fsm: newFSM(h), hub: h, clock: clk}
}

// memLeaderID and memLeaderAddr are what Leader reports for a MemStore.
const (
	memLeaderID   = "mem"
	memLeaderAddr = "127.0.0.1:7947"
)

// Get returns the stored object kind/name, as Store.Get.
func (m *MemStore) Get(kind api.Kind, name string) (api.RawObject, error) {
	if !validKind(kind) {
		return api.RawObject{}, fmt.Errorf("%w: get: unknown kind %q", ErrInvalid, kind)
	}
	o, _ := m.fsm.get(kind, name)
	if o == nil {
		return api.RawObject{}, fmt.Errorf("%w: %s/%s", ErrNotFound, kind, name)
	}
	return cloneRaw(*o), nil
}

// List returns every object of kind sorted by name and the last
// resourceVersion, as Store.List.
func (m *MemStore) List(kind api.Kind) ([]api.RawObject, uint64, error) {
	if kind != "" && !validKind(kind) {
		return nil, 0, fmt.Errorf("%w: list: unknown kind %q", ErrInvalid, kind)
	}
	objs, rv := m.fsm.list(kind)
	return objs, rv, nil
}

// Watch follows kind from fromRV, as Store.Watch.
func (m *MemStore) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	if kind != "" && !validKind(kind) {
		return nil, fmt.Errorf("%w: watch: unknown kind %q", ErrInvalid, kind)
	}
	return m.hub.watch(ctx, kind, fromRV)
}

// Txn applies ops as one transaction with the FSM's rules, as Store.Txn on
// a leader, at most once per request id (WithRequestID). Without a leader (SetLeader(false)) it fails with ErrNoLeader.
func (m *MemStore) Txn(ctx context.Context, ops []Op) ([]api.RawObject, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: empty transaction", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := requestIDFor(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	hook := m.hook
	m.mu.Unlock()
	if hook != nil {
		if err := hook(ops); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.noLeader {
		return nil, fmt.Errorf("%w: mem store set to have no leader", ErrNoLeader)
	}
	data, err := json.Marshal(command{Ops: ops, Created: m.clock.Now().UTC(), RequestID: id})
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %v", ErrInvalid, err)
	}
	if max := DefaultConfig().MaxTxnBytes; len(data) > max+forwardOverhead {
		return nil, fmt.Errorf("%w: transaction of %d bytes exceeds the limit of %d", ErrInvalid, len(data), max)
	}
	// Check first, so a rejected transaction takes no index.
	var cmd command
	if err := json.Unmarshal(data, &cmd); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrInvalid, err)
	}
	next := m.fsm.appliedIndex() + 1
	m.fsm.mu.RLock()
	if id == "" || !m.fsm.requests.has(id) { // a resend of an applied id is answered by Apply
		_, err = m.fsm.plan(cmd, next)
	}
	m.fsm.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	res := m.fsm.Apply(&raft.Log{Index: next, Data: data}).(*applyResult)
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([]api.RawObject, len(res.Objects))
	for i, o := range res.Objects {
		out[i] = cloneRaw(*o)
	}
	return out, nil
}

// ReadBarrier returns at once, a MemStore being always up to date, or
// ErrNoLeader without a leader (SetLeader(false)), as Store.ReadBarrier.
func (m *MemStore) ReadBarrier(ctx context.Context) error {
	if !m.IsLeader() {
		return fmt.Errorf("%w: read barrier", ErrNoLeader)
	}
	return ctx.Err()
}

// IsLeader reports whether the store has a leader (SetLeader).
func (m *MemStore) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.noLeader
}

// Leader returns a fixed ID and address, or nothing without a leader.
func (m *MemStore) Leader() (id, addr string) {
	if !m.IsLeader() {
		return "", ""
	}
	return memLeaderID, memLeaderAddr
}

// ResourceVersion returns the last committed resourceVersion.
func (m *MemStore) ResourceVersion() uint64 { return m.fsm.appliedIndex() }

// SetLeader makes the store have a leader (writes succeed) or not (writes
// fail with ErrNoLeader).
func (m *MemStore) SetLeader(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noLeader = !ok
}

// SetTxnHook installs f, called with every transaction before it is
// applied; a non-nil error fails the transaction and writes nothing. Tests
// use it to inject a failure, or a concurrent write (f may call Txn).
func (m *MemStore) SetTxnHook(f func(ops []Op) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = f
}

// Compact forgets the watch history up to rv: watches from an older
// resourceVersion fail with ErrCompacted, as after the store dropped old
// events.
func (m *MemStore) Compact(rv uint64) {
	m.hub.mu.Lock()
	defer m.hub.mu.Unlock()
	if rv > m.hub.base {
		m.hub.base = rv
	}
}

// EndWatches ends every open watch with an api.EventRelist event, as the
// store does after restoring a snapshot.
func (m *MemStore) EndWatches() { m.hub.reset(m.fsm.appliedIndex()) }
