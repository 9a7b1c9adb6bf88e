package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
)

var (
	t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	t1 = time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC)
)

// obj builds a RawObject; spec and status are JSON ("" = none).
func obj(kind api.Kind, name string, rv uint64, spec, status string, labels map[string]string) api.RawObject {
	o := api.RawObject{Kind: kind, Metadata: api.ObjectMeta{Name: name, Labels: labels, ResourceVersion: rv}}
	if spec != "" {
		o.Spec = json.RawMessage(spec)
	}
	if status != "" {
		o.Status = json.RawMessage(status)
	}
	return o
}

// stored is obj with the fields the store sets.
func stored(kind api.Kind, name string, gen int64, rv uint64, created time.Time, spec, status string, labels map[string]string) api.RawObject {
	o := obj(kind, name, rv, spec, status, labels)
	o.Metadata.Generation = gen
	o.Metadata.Created = created
	return o
}

func op(t OpType, o api.RawObject) Op { return Op{Type: t, Object: o} }

// apply feeds one transaction to f as log entry index.
func apply(t testing.TB, f *fsm, index uint64, ops ...Op) *applyResult {
	t.Helper()
	data, err := json.Marshal(command{Ops: ops, Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(*applyResult)
}

func derefAll(ps []*api.RawObject) []api.RawObject {
	var out []api.RawObject
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

// history returns the events retained by h, oldest first.
func history(h *hub) []api.WatchEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []api.WatchEvent
	for seq := h.head; seq < h.next; seq++ {
		out = append(out, h.ring[seq%uint64(len(h.ring))])
	}
	return out
}

var rawCmp = cmp.Options{
	cmp.Comparer(func(a, b json.RawMessage) bool { return jsonEqual(a, b) }),
}

func TestFSMTransactions(t *testing.T) {
	const D, P = api.KindDeployment, api.KindPod
	lbl := map[string]string{"app": "web"}
	type step struct {
		ops        []Op
		wantErr    error
		wantMsg    string // exact error text, if set
		wantObjs   []api.RawObject
		wantEvents []api.EventType
	}
	tests := []struct {
		name  string
		steps []step // step i is log index i+1
		want  []api.RawObject
	}{
		{
			name: "create stamps generation, resourceVersion and created",
			steps: []step{{
				ops:        []Op{op(OpCreate, obj(D, "web", 0, `{"replicas": 2}`, `{"replicas":0}`, lbl))},
				wantObjs:   []api.RawObject{stored(D, "web", 1, 1, t0, `{"replicas":2}`, `{"replicas":0}`, lbl)},
				wantEvents: []api.EventType{EventAdded},
			}},
			want: []api.RawObject{stored(D, "web", 1, 1, t0, `{"replicas":2}`, `{"replicas":0}`, lbl)},
		},
		{
			name: "create keeps the object's own created time",
			steps: []step{{
				ops: []Op{op(OpCreate, func() api.RawObject {
					o := obj(D, "web", 0, `{}`, "", nil)
					o.Metadata.Created = t1
					return o
				}())},
				wantObjs: []api.RawObject{stored(D, "web", 1, 1, t1, `{}`, "", nil)},
			}},
			want: []api.RawObject{stored(D, "web", 1, 1, t1, `{}`, "", nil)},
		},
		{
			name: "create of an existing object fails",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{}`, "", nil))}},
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{"x":1}`, "", nil))}, wantErr: ErrExists, wantMsg: "raftstore: already exists: deployments/web"},
			},
			want: []api.RawObject{stored(D, "web", 1, 1, t0, `{}`, "", nil)},
		},
		{
			name: "update, updateStatus and delete of a missing object fail",
			steps: []step{
				{ops: []Op{op(OpUpdate, obj(D, "web", 0, `{}`, "", nil))}, wantErr: ErrNotFound, wantMsg: "raftstore: not found: deployments/web"},
				{ops: []Op{op(OpUpdateStatus, obj(D, "web", 0, "", `{}`, nil))}, wantErr: ErrNotFound},
				{ops: []Op{op(OpDelete, obj(D, "web", 0, "", "", nil))}, wantErr: ErrNotFound},
			},
		},
		{
			name: "update with a spec change bumps generation and keeps status and created",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{"replicas":1}`, `{"ready":1}`, nil))}},
				{
					ops:        []Op{op(OpUpdate, obj(D, "web", 1, `{"replicas":3}`, `{"ready":99}`, lbl))},
					wantObjs:   []api.RawObject{stored(D, "web", 2, 2, t0, `{"replicas":3}`, `{"ready":1}`, lbl)},
					wantEvents: []api.EventType{EventModified},
				},
			},
			want: []api.RawObject{stored(D, "web", 2, 2, t0, `{"replicas":3}`, `{"ready":1}`, lbl)},
		},
		{
			name: "update of labels only keeps generation",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{"a":1,"b":2}`, "", nil))}},
				{
					ops:        []Op{op(OpUpdate, obj(D, "web", 0, "{\"b\": 2,\n \"a\": 1}", "", lbl))},
					wantObjs:   []api.RawObject{stored(D, "web", 1, 2, t0, `{"a":1,"b":2}`, "", lbl)},
					wantEvents: []api.EventType{EventModified},
				},
			},
			want: []api.RawObject{stored(D, "web", 1, 2, t0, `{"a":1,"b":2}`, "", lbl)},
		},
		{
			name: "update that changes nothing is a no-op",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{"a":1,"b":{"c":[1,2]}}`, "", lbl))}},
				{
					ops:        []Op{op(OpUpdate, obj(D, "web", 1, ` { "b" : {"c":[1, 2]}, "a":1 } `, "", map[string]string{"app": "web"}))},
					wantObjs:   []api.RawObject{stored(D, "web", 1, 1, t0, `{"a":1,"b":{"c":[1,2]}}`, "", lbl)},
					wantEvents: []api.EventType{},
				},
			},
			want: []api.RawObject{stored(D, "web", 1, 1, t0, `{"a":1,"b":{"c":[1,2]}}`, "", lbl)},
		},
		{
			name: "updateStatus keeps labels, spec and generation",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(P, "p1", 0, `{"node":"a"}`, `{"phase":"Pending"}`, lbl))}},
				{
					ops:        []Op{op(OpUpdateStatus, obj(P, "p1", 1, `{"node":"b"}`, `{"phase":"Running"}`, nil))},
					wantObjs:   []api.RawObject{stored(P, "p1", 1, 2, t0, `{"node":"a"}`, `{"phase":"Running"}`, lbl)},
					wantEvents: []api.EventType{EventModified},
				},
				{
					ops:        []Op{op(OpUpdateStatus, obj(P, "p1", 0, "", `{ "phase" : "Running" }`, nil))},
					wantObjs:   []api.RawObject{stored(P, "p1", 1, 2, t0, `{"node":"a"}`, `{"phase":"Running"}`, lbl)},
					wantEvents: []api.EventType{},
				},
			},
			want: []api.RawObject{stored(P, "p1", 1, 2, t0, `{"node":"a"}`, `{"phase":"Running"}`, lbl)},
		},
		{
			name: "delete returns the deleted object",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{}`, "", nil))}},
				{
					ops:        []Op{op(OpDelete, obj(D, "web", 1, "", "", nil))},
					wantObjs:   []api.RawObject{stored(D, "web", 1, 1, t0, `{}`, "", nil)},
					wantEvents: []api.EventType{EventDeleted},
				},
			},
		},
		{
			name: "stale resourceVersion conflicts",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "web", 0, `{}`, "", nil))}},
				{ops: []Op{op(OpUpdate, obj(D, "web", 0, `{"x":1}`, "", nil))}},
				{ops: []Op{op(OpUpdate, obj(D, "web", 1, `{"x":2}`, "", nil))}, wantErr: ErrConflict, wantMsg: "raftstore: conflict: deployments/web: have 2, got 1"},
				{ops: []Op{op(OpUpdateStatus, obj(D, "web", 1, "", `{}`, nil))}, wantErr: ErrConflict},
				{ops: []Op{op(OpDelete, obj(D, "web", 7, "", "", nil))}, wantErr: ErrConflict},
				{ops: []Op{op(OpUpdate, obj(D, "web", 2, `{"x":3}`, "", nil))}, wantObjs: []api.RawObject{stored(D, "web", 3, 6, t0, `{"x":3}`, "", nil)}},
			},
			want: []api.RawObject{stored(D, "web", 3, 6, t0, `{"x":3}`, "", nil)},
		},
		{
			name: "invalid commands",
			steps: []step{
				{ops: nil, wantErr: ErrInvalid},
				{ops: []Op{op(OpCreate, obj("widgets", "x", 0, "", "", nil))}, wantErr: ErrInvalid},
				{ops: []Op{op(OpCreate, obj(D, "", 0, "", "", nil))}, wantErr: ErrInvalid},
				{ops: []Op{op("upsert", obj(D, "web", 0, "", "", nil))}, wantErr: ErrInvalid},
			},
		},
		{
			name: "a transaction applies all or nothing",
			steps: []step{
				{ops: []Op{op(OpCreate, obj(D, "b", 0, `{}`, "", nil))}},
				{ops: []Op{
					op(OpCreate, obj(D, "a", 0, `{}`, "", nil)),
					op(OpUpdate, obj(D, "b", 0, `{"x":1}`, "", nil)),
					op(OpCreate, obj(D, "b", 0, `{}`, "", nil)),
				}, wantErr: ErrExists},
			},
			want: []api.RawObject{stored(D, "b", 1, 1, t0, `{}`, "", nil)},
		},
		{
			name: "later ops see earlier ops",
			steps: []step{
				{
					ops: []Op{
						op(OpCreate, obj(D, "a", 0, `{"v":1}`, "", nil)),
						op(OpUpdate, obj(D, "a", 1, `{"v":2}`, "", nil)),
						op(OpUpdateStatus, obj(D, "a", 1, "", `{"ok":true}`, nil)),
						op(OpCreate, obj(P, "gone", 0, `{}`, "", nil)),
						op(OpDelete, obj(P, "gone", 0, "", "", nil)),
					},
					wantObjs: []api.RawObject{
						stored(D, "a", 1, 1, t0, `{"v":1}`, "", nil),
						stored(D, "a", 2, 1, t0, `{"v":2}`, "", nil),
						stored(D, "a", 2, 1, t0, `{"v":2}`, `{"ok":true}`, nil),
						stored(P, "gone", 1, 1, t0, `{}`, "", nil),
						stored(P, "gone", 1, 1, t0, `{}`, "", nil),
					},
					wantEvents: []api.EventType{EventAdded, EventModified, EventModified, EventAdded, EventDeleted},
				},
				{
					ops: []Op{
						op(OpDelete, obj(D, "a", 1, "", "", nil)),
						op(OpCreate, obj(D, "a", 0, `{"v":9}`, "", nil)),
					},
					wantObjs: []api.RawObject{
						stored(D, "a", 2, 1, t0, `{"v":2}`, `{"ok":true}`, nil),
						stored(D, "a", 1, 2, t0, `{"v":9}`, "", nil),
					},
					wantEvents: []api.EventType{EventDeleted, EventAdded},
				},
			},
			want: []api.RawObject{stored(D, "a", 1, 2, t0, `{"v":9}`, "", nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHub(64, 8)
			f := newFSM(h)
			for i, st := range tt.steps {
				index := uint64(i + 1)
				before := len(history(h))
				res := apply(t, f, index, st.ops...)
				if res.Index != index {
					t.Errorf("step %d: index %d, want %d", i, res.Index, index)
				}
				if st.wantErr != nil {
					if !errors.Is(res.Err, st.wantErr) {
						t.Fatalf("step %d: err %v, want %v", i, res.Err, st.wantErr)
					}
					if st.wantMsg != "" && res.Err.Error() != st.wantMsg {
						t.Errorf("step %d: message %q, want %q", i, res.Err, st.wantMsg)
					}
					if got := len(history(h)) - before; got != 0 {
						t.Errorf("step %d: failed transaction produced %d events", i, got)
					}
					continue
				}
				if res.Err != nil {
					t.Fatalf("step %d: unexpected error %v", i, res.Err)
				}
				if st.wantObjs != nil {
					if d := cmp.Diff(st.wantObjs, derefAll(res.Objects), rawCmp); d != "" {
						t.Errorf("step %d: objects (-want +got):\n%s", i, d)
					}
				}
				if st.wantEvents != nil {
					var got []api.EventType
					for _, ev := range history(h)[before:] {
						got = append(got, ev.Type)
						if ev.ResourceVersion != index {
							t.Errorf("step %d: event RV %d, want %d", i, ev.ResourceVersion, index)
						}
					}
					if d := cmp.Diff(st.wantEvents, got, cmpopts.EquateEmpty()); d != "" {
						t.Errorf("step %d: events (-want +got):\n%s", i, d)
					}
				}
			}
			got, rv := f.list("")
			if len(got) == 0 {
				got = nil
			}
			if d := cmp.Diff(tt.want, got, rawCmp); d != "" {
				t.Errorf("final state (-want +got):\n%s", d)
			}
			if rv != uint64(len(tt.steps)) {
				t.Errorf("applied index %d, want %d", rv, len(tt.steps))
			}
		})
	}
}

func TestFSMUndecodableEntry(t *testing.T) {
	f := newFSM(newHub(8, 8))
	res := f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: []byte("{not json")}).(*applyResult)
	if !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", res.Err)
	}
	if f.appliedIndex() != 3 {
		t.Errorf("applied index %d, want 3", f.appliedIndex())
	}
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":[1,2]}`, "{ \"a\" : [ 1 , 2 ] }\n", true},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{``, `null`, true},
		{``, `{}`, false},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{`"x"`, `"y"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.a+"~"+tt.b, func(t *testing.T) {
			if got := jsonEqual(compactJSON(json.RawMessage(tt.a)), compactJSON(json.RawMessage(tt.b))); got != tt.want {
				t.Errorf("jsonEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func persist(t testing.TB, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func TestFSMSnapshotRestore(t *testing.T) {
	f := newFSM(newHub(64, 8))
	for i := range 20 {
		kind := api.Kinds[i%len(api.Kinds)]
		apply(t, f, uint64(i+1), op(OpCreate, obj(kind, fmt.Sprintf("o%02d", i), 0, fmt.Sprintf(`{"i":%d}`, i), "", map[string]string{"i": fmt.Sprint(i)})))
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, wantRV := f.list("")

	// Writes after Snapshot must not show in it (copy-on-write).
	apply(t, f, 21, op(OpDelete, obj(api.KindNode, "o00", 0, "", "", nil)))
	apply(t, f, 22, op(OpCreate, obj(api.KindNode, "late", 0, `{}`, "", nil)))
	apply(t, f, 23, op(OpUpdate, obj(api.KindDeployment, "o01", 0, `{"i":100}`, "", nil)))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}

	h2 := newHub(64, 8)
	g := newFSM(h2)
	apply(t, g, 1, op(OpCreate, obj(api.KindPod, "to-be-replaced", 0, `{}`, "", nil)))
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	got, gotRV := g.list("")
	if d := cmp.Diff(want, got, rawCmp); d != "" {
		t.Errorf("restored state (-want +got):\n%s", d)
	}
	if gotRV != wantRV {
		t.Errorf("restored index %d, want %d", gotRV, wantRV)
	}
	if h2.last() != wantRV {
		t.Errorf("hub index after restore %d, want %d", h2.last(), wantRV)
	}
	// The restored FSM persists to the same bytes.
	if a, b := sink.Bytes(), persist(t, g); !bytes.Equal(a, b) {
		t.Errorf("re-persisted snapshot differs:\n%s\n%s", a, b)
	}
}

func TestFSMRestoreRejectsBadSnapshots(t *testing.T) {
	tests := map[string]string{
		"garbage":   `not json`,
		"format":    `{"format":0,"index":1,"objects":[]}`,
		"newer":     `{"format":99,"index":1,"objects":[]}`,
		"bad kind":  `{"format":1,"index":1,"objects":[{"kind":"widgets","metadata":{"name":"a"}}]}`,
		"no name":   `{"format":1,"index":1,"objects":[{"kind":"pods","metadata":{}}]}`,
		"duplicate": `{"format":1,"index":1,"objects":[{"kind":"pods","metadata":{"name":"a"}},{"kind":"pods","metadata":{"name":"a"}}]}`,
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFSM(newHub(8, 8))
			apply(t, f, 1, op(OpCreate, obj(api.KindPod, "keep", 0, `{}`, "", nil)))
			if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(data)))); err == nil {
				t.Fatal("restore succeeded")
			}
			if o, _ := f.get(api.KindPod, "keep"); o == nil {
				t.Error("state changed by a failed restore")
			}
		})
	}
}

// randomLog makes a reproducible log of transactions mixing every op,
// including ones that fail.
func randomLog(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed))
	names := []string{"a", "b", "c", "d", "e"}
	types := []OpType{OpCreate, OpUpdate, OpUpdateStatus, OpDelete}
	var log [][]byte
	for i := range n {
		var ops []Op
		for range 1 + r.IntN(3) {
			o := obj(api.Kinds[r.IntN(2)], names[r.IntN(len(names))], 0,
				fmt.Sprintf(`{"v":%d,"w":"%d"}`, r.IntN(3), r.IntN(2)), fmt.Sprintf(`{"s":%d}`, r.IntN(3)),
				map[string]string{"l": fmt.Sprint(r.IntN(2))})
			if r.IntN(4) == 0 {
				o.Metadata.ResourceVersion = uint64(r.IntN(i + 1))
			}
			ops = append(ops, op(types[r.IntN(len(types))], o))
		}
		data, _ := json.Marshal(command{Ops: ops, Created: t0.Add(time.Duration(i) * time.Second)})
		log = append(log, data)
	}
	return log
}

func TestFSMDeterminism(t *testing.T) {
	log := randomLog(42, 400)
	run := func(f *fsm, from, to int) {
		for i := from; i < to; i++ {
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: log[i]})
		}
	}
	a, b := newFSM(newHub(16, 8)), newFSM(newHub(4096, 8))
	run(a, 0, len(log))
	run(b, 0, len(log))
	snapA := persist(t, a)
	if !bytes.Equal(snapA, persist(t, b)) {
		t.Fatal("two FSMs fed the same log differ")
	}
	// A third FSM restored from a snapshot half way ends equal too.
	c := newFSM(newHub(16, 8))
	run(c, 0, 200)
	mid := persist(t, c)
	d := newFSM(newHub(16, 8))
	if err := d.Restore(io.NopCloser(bytes.NewReader(mid))); err != nil {
		t.Fatal(err)
	}
	run(d, 200, len(log))
	if !bytes.Equal(snapA, persist(t, d)) {
		t.Fatal("FSM restored half way differs from one that applied the whole log")
	}
	objs, _ := a.list("")
	if len(objs) == 0 {
		t.Fatal("random log left no objects; the test proves little")
	}
}

func TestFSMSnapshotCarriesStateFormat(t *testing.T) {
	f := newFSM(newHub(8, 8))
	apply(t, f, 1, op(OpCreate, obj(api.KindPod, "a", 0, `{}`, "", nil)))
	var data snapshotData
	if err := json.Unmarshal(persist(t, f), &data); err != nil {
		t.Fatal(err)
	}
	if data.Format != StateFormat {
		t.Errorf("snapshot format %d, want StateFormat %d", data.Format, StateFormat)
	}
	older := `{"format":1,"index":7,"objects":[{"kind":"pods","metadata":{"name":"a"}}]}`
	if err := newFSM(newHub(8, 8)).Restore(io.NopCloser(strings.NewReader(older))); err != nil {
		t.Errorf("restore of a format 1 snapshot: %v", err)
	}
	newer := fmt.Sprintf(`{"format":%d,"index":1,"objects":[]}`, StateFormat+1)
	err := newFSM(newHub(8, 8)).Restore(io.NopCloser(strings.NewReader(newer)))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("state format %d is newer", StateFormat+1)) {
		t.Errorf("restore of a newer format: %v, want an error naming the format", err)
	}
}
