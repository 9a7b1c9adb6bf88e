package raftstore

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
)

// command is one Raft log entry: a transaction, stamped by the leader.
type command struct {
	Ops     []Op      `json:"ops"`
	Created time.Time `json:"created"`
	// RequestID, when set, makes the transaction apply at most once: an
	// entry whose id is in the FSM's table of applied ids is not applied
	// again (see fsm.requests). Entries without one apply as before.
	RequestID string `json:"requestID,omitempty"`
}

// applyResult is what fsm.Apply returns through raft's ApplyFuture.
type applyResult struct {
	// Index is the log index of the entry.
	Index uint64
	// Objects are the objects as stored, in op order (shared with the FSM:
	// clone before handing them out).
	Objects []*api.RawObject
	// Err is the transaction's error; nothing was written when it is set.
	Err error
}

type objKey struct {
	kind api.Kind
	name string
}

func (k objKey) String() string { return string(k.kind) + "/" + k.name }

// fsm is the deterministic state machine. Stored *api.RawObjects are never
// mutated once stored: a write stores a new object. Per-kind maps are
// copy-on-write so that Snapshot is O(kinds).
//
// Apply, Snapshot and Restore are called by raft from one goroutine; Get and
// List may be called concurrently from any goroutine.
type fsm struct {
	mu      sync.RWMutex
	kinds   map[api.Kind]map[string]*api.RawObject
	owned   map[api.Kind]bool // false: the map is shared with a snapshot
	applied uint64
	hub     *hub
	// requests remembers the request ids of the last maxRequests
	// successful transactions that carried one; part of the replicated
	// state (snapshots hold it), so every replica deduplicates alike.
	requests    requestTable
	maxRequests int
	// beforeApply, when set (tests only), runs before each entry is
	// applied: a test holds the leader's FSM back with it.
	beforeApply atomic.Pointer[func(index uint64)]
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(h *hub) *fsm {
	f := &fsm{hub: h, maxRequests: RequestIDHistory}
	f.reset(nil)
	f.requests = newRequestTable()
	return f
}

func (f *fsm) reset(kinds map[api.Kind]map[string]*api.RawObject) {
	if kinds == nil {
		kinds = make(map[api.Kind]map[string]*api.RawObject, len(storedKinds))
	}
	f.kinds = kinds
	f.owned = make(map[api.Kind]bool, len(storedKinds))
	for _, k := range storedKinds {
		if f.kinds[k] == nil {
			f.kinds[k] = map[string]*api.RawObject{}
		}
		f.owned[k] = true
	}
}

// Apply applies one log entry. It never fails as a whole: a rejected
// transaction is returned as applyResult.Err and changes nothing.
func (f *fsm) Apply(l *raft.Log) any {
	if hook := f.beforeApply.Load(); hook != nil {
		(*hook)(l.Index)
	}
	res := &applyResult{Index: l.Index}
	var events []api.WatchEvent
	var cmd command
	f.mu.Lock()
	defer f.mu.Unlock()
	switch err := json.Unmarshal(l.Data, &cmd); {
	case err != nil:
		res.Err = fmt.Errorf("%w: decode entry %d: %v", ErrInvalid, l.Index, err)
	case cmd.RequestID != "" && ValidateRequestID(cmd.RequestID) != nil:
		res.Err = fmt.Errorf("entry %d: %w", l.Index, ValidateRequestID(cmd.RequestID))
	case cmd.RequestID != "" && f.requests.has(cmd.RequestID):
		// Applied before (a resent write): apply nothing, answer with
		// what is stored now.
		res.Objects = f.currentObjects(cmd.Ops)
	default:
		res.Objects, events, res.Err = f.applyTxn(cmd, l.Index)
		if res.Err == nil && cmd.RequestID != "" {
			f.requests.add(cmd.RequestID, l.Index, f.maxRequests)
		}
	}
	f.applied = l.Index
	f.hub.publish(l.Index, events)
	return res
}

// currentObjects returns, for each op, the object stored now under its key,
// or the op's own object where none is: the answer to a transaction that
// was applied before. Called with f.mu held.
func (f *fsm) currentObjects(ops []Op) []*api.RawObject {
	out := make([]*api.RawObject, len(ops))
	for i, op := range ops {
		if o := f.kinds[op.Object.Kind][op.Object.Metadata.Name]; o != nil {
			out[i] = o
		} else {
			o := cloneRaw(op.Object)
			out[i] = &o
		}
	}
	return out
}

// write is one pending change of a transaction; obj nil means deleted.
type write struct {
	key objKey
	obj *api.RawObject
}

// txnPlan is the effect of one transaction, computed but not yet written.
type txnPlan struct {
	results []*api.RawObject
	events  []api.WatchEvent
	pending map[objKey]*api.RawObject // nil: deleted
	order   []objKey                  // keys of pending, in first-write order
	changed []bool                    // per op: false for a no-op
}

// applyTxn checks and applies one transaction at index. Called with f.mu
// held for writing.
func (f *fsm) applyTxn(cmd command, index uint64) ([]*api.RawObject, []api.WatchEvent, error) {
	p, err := f.plan(cmd, index)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range p.order {
		m := f.writable(k.kind)
		if o := p.pending[k]; o == nil {
			delete(m, k.name)
		} else {
			m[k.name] = o
		}
	}
	return p.results, p.events, nil
}

// plan checks one transaction at index against the current state and
// returns its effect without writing it: every rule of a write is here.
// Called with f.mu held (reading is enough).
func (f *fsm) plan(cmd command, index uint64) (txnPlan, error) {
	if len(cmd.Ops) == 0 {
		return txnPlan{}, fmt.Errorf("%w: empty transaction", ErrInvalid)
	}
	// pending holds the effect of earlier ops so later ops see them.
	p := txnPlan{pending: make(map[objKey]*api.RawObject, len(cmd.Ops)), results: make([]*api.RawObject, len(cmd.Ops)), changed: make([]bool, len(cmd.Ops))}
	lookup := func(k objKey) *api.RawObject {
		if o, ok := p.pending[k]; ok {
			return o
		}
		return f.kinds[k.kind][k.name]
	}
	for i, op := range cmd.Ops {
		if err := validateOp(op); err != nil {
			return txnPlan{}, fmt.Errorf("op %d: %w", i, err)
		}
		k := objKey{op.Object.Kind, op.Object.Metadata.Name}
		cur := lookup(k)
		next, ev, err := applyOp(op, cur, k, index, cmd.Created)
		if err != nil {
			return txnPlan{}, err
		}
		if ev == "" { // no-op
			p.results[i] = cur
			continue
		}
		p.changed[i] = true
		if _, seen := p.pending[k]; !seen {
			p.order = append(p.order, k)
		}
		p.pending[k] = next
		if ev == api.EventDeleted {
			p.results[i] = cur
			p.events = append(p.events, api.WatchEvent{Type: ev, ResourceVersion: index, Object: *cur})
		} else {
			p.results[i] = next
			p.events = append(p.events, api.WatchEvent{Type: ev, ResourceVersion: index, Object: *next})
		}
	}
	f.boundEvents(&p, index)
	return p, nil
}

// boundEvents adds to p the deletes of the oldest events (their names sort
// oldest first) that keep at most api.MaxEvents stored once p is applied.
// Called with f.mu held.
func (f *fsm) boundEvents(p *txnPlan, index uint64) {
	stored := f.kinds[api.KindEvent]
	n := len(stored)
	for k, o := range p.pending {
		if k.kind != api.KindEvent {
			continue
		}
		_, was := stored[k.name]
		switch {
		case o != nil && !was:
			n++
		case o == nil && was:
			n--
		}
	}
	if n <= api.MaxEvents {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		if n <= api.MaxEvents {
			return
		}
		k := objKey{api.KindEvent, name}
		if _, touched := p.pending[k]; touched {
			continue
		}
		p.pending[k] = nil
		p.order = append(p.order, k)
		p.events = append(p.events, api.WatchEvent{Type: api.EventDeleted, ResourceVersion: index, Object: *stored[name]})
		n--
	}
}

// writable returns kind's map, cloning it first if a snapshot shares it.
func (f *fsm) writable(kind api.Kind) map[string]*api.RawObject {
	m := f.kinds[kind]
	if !f.owned[kind] {
		m = maps.Clone(m)
		f.kinds[kind] = m
		f.owned[kind] = true
	}
	return m
}

// storedKinds are the kinds the store holds: the objects, then events.
var storedKinds = append(slices.Clip(api.Kinds), api.KindEvent)

// validKind reports whether k is one of storedKinds.
func validKind(k api.Kind) bool { return slices.Contains(storedKinds, k) }

// validateOp checks what can be checked without the store's contents.
func validateOp(op Op) error {
	switch op.Type {
	case OpCreate, OpUpdate, OpUpdateStatus, OpDelete:
	default:
		return fmt.Errorf("%w: unknown op type %q (want create, update, updateStatus or delete)", ErrInvalid, op.Type)
	}
	if !validKind(op.Object.Kind) {
		return fmt.Errorf("%w: %s: unknown kind %q", ErrInvalid, op.Type, op.Object.Kind)
	}
	if op.Object.Metadata.Name == "" {
		return fmt.Errorf("%w: %s %s: empty name", ErrInvalid, op.Type, op.Object.Kind)
	}
	return nil
}

// applyOp computes the effect of one op on cur (nil: absent). It returns the
// new object (nil for a delete) and the event type, or "" for a no-op.
func applyOp(op Op, cur *api.RawObject, k objKey, index uint64, created time.Time) (*api.RawObject, api.EventType, error) {
	in := op.Object
	if op.Type == OpCreate {
		if cur != nil {
			return nil, "", fmt.Errorf("%w: %s", ErrExists, k)
		}
		o := &api.RawObject{
			Kind: k.kind,
			Metadata: api.ObjectMeta{
				Name:            k.name,
				Labels:          cleanLabels(in.Metadata.Labels),
				Generation:      1,
				ResourceVersion: index,
				Created:         in.Metadata.Created,
			},
			Spec:   compactJSON(in.Spec),
			Status: compactJSON(in.Status),
		}
		if o.Metadata.Created.IsZero() {
			o.Metadata.Created = created
		}
		return o, api.EventAdded, nil
	}
	if cur == nil {
		return nil, "", fmt.Errorf("%w: %s", ErrNotFound, k)
	}
	if rv := in.Metadata.ResourceVersion; rv != 0 && rv != cur.Metadata.ResourceVersion {
		return nil, "", fmt.Errorf("%w: %s: have %d, got %d", ErrConflict, k, cur.Metadata.ResourceVersion, rv)
	}
	switch op.Type {
	case OpDelete:
		return nil, api.EventDeleted, nil
	case OpUpdate:
		labels := cleanLabels(in.Metadata.Labels)
		spec := compactJSON(in.Spec)
		specChanged := !jsonEqual(spec, cur.Spec)
		if !specChanged && maps.Equal(labels, cur.Metadata.Labels) {
			return cur, "", nil
		}
		o := *cur
		o.Metadata.Labels = labels
		o.Metadata.ResourceVersion = index
		if specChanged {
			o.Spec = spec
			o.Metadata.Generation++
		}
		return &o, api.EventModified, nil
	default: // OpUpdateStatus
		status := compactJSON(in.Status)
		if jsonEqual(status, cur.Status) {
			return cur, "", nil
		}
		o := *cur
		o.Status = status
		o.Metadata.ResourceVersion = index
		return &o, api.EventModified, nil
	}
}

// cleanLabels maps an empty label set to nil so that "no labels" has one
// representation.
func cleanLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// compactJSON returns b without insignificant whitespace; empty and null
// become nil. b is valid JSON (it was decoded from a command).
func compactJSON(b json.RawMessage) json.RawMessage {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return slices.Clone(b)
	}
	return buf.Bytes()
}

// jsonEqual reports whether a and b are the same JSON value, whatever their
// key order or whitespace. nil stands for null.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, errA := canonicalJSON(a)
	cb, errB := canonicalJSON(b)
	if errA != nil || errB != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}

// canonicalJSON re-encodes b through interface{} (numbers kept exactly),
// which sorts object keys and drops whitespace.
func canonicalJSON(b json.RawMessage) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// get returns the stored object (shared: clone before handing out).
func (f *fsm) get(kind api.Kind, name string) (*api.RawObject, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.kinds[kind][name], f.applied
}

// list returns clones of kind's objects sorted by name ("" = every kind, in
// api.Kinds order) and the last applied index.
func (f *fsm) list(kind api.Kind) ([]api.RawObject, uint64) {
	f.mu.RLock()
	kinds := []api.Kind{kind}
	if kind == "" {
		kinds = api.Kinds
	}
	var ptrs []*api.RawObject
	for _, k := range kinds {
		m := f.kinds[k]
		start := len(ptrs)
		for _, o := range m {
			ptrs = append(ptrs, o)
		}
		slices.SortFunc(ptrs[start:], func(a, b *api.RawObject) int {
			return cmp.Compare(a.Metadata.Name, b.Metadata.Name)
		})
	}
	applied := f.applied
	f.mu.RUnlock()
	out := make([]api.RawObject, len(ptrs))
	for i, o := range ptrs {
		out[i] = cloneRaw(*o)
	}
	return out, applied
}

// appliedIndex is the index of the last applied log entry.
func (f *fsm) appliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// cloneRaw deep-copies o so the caller may modify it.
func cloneRaw(o api.RawObject) api.RawObject {
	o.Metadata.Labels = maps.Clone(o.Metadata.Labels)
	o.Spec = slices.Clone(o.Spec)
	o.Status = slices.Clone(o.Status)
	return o
}

// StateFormat is the version of the replicated state's encoding: the
// snapshot (snapshotData) and the log's commands. An agent refuses to
// restore a snapshot of another format, so a fleet must never go back to
// a herd of a lower StateFormat once a higher one ran (herdctl upgrade
// refuses such a downgrade); raise it with every incompatible change.
// Format 2 added events (api.KindEvent); a herd of format 2 reads format
// 1 snapshots, which have none. Format 3 added secrets (api.KindSecret)
// and jobs (api.KindJob); it reads format 1 and 2 snapshots.
const StateFormat = 3

// oldestSnapshotFormat is the oldest snapshot format Restore reads.
const oldestSnapshotFormat = 1

// snapshotFormat is the version of the persisted snapshot encoding.
const snapshotFormat = StateFormat

// snapshotData is the persisted snapshot (Persist streams it object by
// object).
type snapshotData struct {
	Format  int              `json:"format"`
	Index   uint64           `json:"index"`
	Objects []*api.RawObject `json:"objects"`
	// Requests is the table of applied request ids, oldest first. A
	// snapshot written before it existed has none: the table starts
	// empty.
	Requests []appliedRequest `json:"requests,omitempty"`
}

// fsmSnapshot is an immutable view of the store at one index.
type fsmSnapshot struct {
	index    uint64
	kinds    map[api.Kind]map[string]*api.RawObject
	requests []appliedRequest
}

// Snapshot captures the current state in O(kinds): the per-kind maps are
// shared with the snapshot and cloned by the next write to each.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fsmSnapshot{index: f.applied, kinds: make(map[api.Kind]map[string]*api.RawObject, len(f.kinds)), requests: f.requests.list()}
	for k, m := range f.kinds {
		s.kinds[k] = m
		f.owned[k] = false
	}
	return s, nil
}

// Persist writes the snapshot as JSON, objects sorted by kind then name.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftstore: persist snapshot %d: %w", s.index, err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := fmt.Fprintf(bw, `{"format":%d,"index":%d,"objects":[`, snapshotFormat, s.index); err != nil {
		return err
	}
	first := true
	for _, kind := range storedKinds {
		m := s.kinds[kind]
		names := slices.Sorted(maps.Keys(m))
		for _, name := range names {
			b, err := json.Marshal(m[name])
			if err != nil {
				return err
			}
			if !first {
				if err := bw.WriteByte(','); err != nil {
					return err
				}
			}
			first = false
			if _, err := bw.Write(b); err != nil {
				return err
			}
		}
	}
	if _, err := bw.WriteString("]"); err != nil {
		return err
	}
	if len(s.requests) > 0 {
		b, err := json.Marshal(s.requests)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(bw, `,"requests":%s`, b); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// Restore replaces the whole state with a persisted snapshot and ends every
// watch with an EventRelist event.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var data snapshotData
	if err := json.NewDecoder(bufio.NewReader(rc)).Decode(&data); err != nil {
		return fmt.Errorf("raftstore: restore snapshot: decode: %w", err)
	}
	if data.Format > snapshotFormat {
		return fmt.Errorf("raftstore: restore snapshot: state format %d is newer than this herd's %d: run a herd of state format %d or later", data.Format, snapshotFormat, data.Format)
	}
	if data.Format < oldestSnapshotFormat {
		return fmt.Errorf("raftstore: restore snapshot: state format %d, want %d to %d", data.Format, oldestSnapshotFormat, snapshotFormat)
	}
	kinds := make(map[api.Kind]map[string]*api.RawObject, len(storedKinds))
	for i, o := range data.Objects {
		if o == nil || !validKind(o.Kind) || o.Metadata.Name == "" {
			return fmt.Errorf("raftstore: restore snapshot %d: object %d: bad kind or name", data.Index, i)
		}
		m := kinds[o.Kind]
		if m == nil {
			m = map[string]*api.RawObject{}
			kinds[o.Kind] = m
		}
		if _, dup := m[o.Metadata.Name]; dup {
			return fmt.Errorf("raftstore: restore snapshot %d: duplicate object %s/%s", data.Index, o.Kind, o.Metadata.Name)
		}
		m[o.Metadata.Name] = o
	}
	reqs, err := restoreRequests(data.Requests, f.maxRequests)
	if err != nil {
		return fmt.Errorf("raftstore: restore snapshot %d: %w", data.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reset(kinds)
	f.requests = reqs
	f.applied = data.Index
	f.hub.reset(data.Index)
	return nil
}

// Preview computes what committing ops as one transaction would store,
// against the objects get returns (the current state), without writing
// anything: the very rules a commit applies (compare-and-swap, generation
// only on a spec change, no-op writes, status kept by updates). It returns
// one object per op, as it would be stored (for a delete, its last state),
// and whether the op would change anything. The resourceVersion is not
// known before a commit: created and changed objects carry 0. Dry runs use
// it, so a dry run and a commit cannot disagree.
func Preview(ops []Op, get func(kind api.Kind, name string) (api.RawObject, bool), created time.Time) ([]api.RawObject, []bool, error) {
	f := newFSM(newHub(1, 1))
	for _, op := range ops {
		k := op.Object.Kind
		if !validKind(k) {
			continue // plan reports it
		}
		if o, ok := get(k, op.Object.Metadata.Name); ok {
			c := cloneRaw(o)
			f.kinds[k][c.Metadata.Name] = &c
		}
	}
	p, err := f.plan(command{Ops: ops, Created: created}, 0)
	if err != nil {
		return nil, nil, err
	}
	objs := make([]api.RawObject, len(ops))
	for i, o := range p.results {
		if o != nil {
			objs[i] = cloneRaw(*o)
		}
	}
	return objs, p.changed, nil
}
