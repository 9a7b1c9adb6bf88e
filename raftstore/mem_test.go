package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// storeUnderTest is what both a Store and a MemStore offer.
type storeUnderTest interface {
	Get(kind api.Kind, name string) (api.RawObject, error)
	Txn(ctx context.Context, ops []Op) ([]api.RawObject, error)
}

// TestMemStoreMatchesStore runs one script of writes against a real
// one-server Store and a MemStore and wants the same answers: the same
// errors, the same generations, labels, spec and status.
func TestMemStoreMatchesStore(t *testing.T) {
	c := NewTestCluster(t, 1)
	real := c.Stores[c.Leader()]
	mem := NewMemStore(nil)
	obj := func(name, spec, status string, labels map[string]string, rv uint64) api.RawObject {
		o := api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name, Labels: labels, ResourceVersion: rv}}
		if spec != "" {
			o.Spec = json.RawMessage(spec)
		}
		if status != "" {
			o.Status = json.RawMessage(status)
		}
		return o
	}
	type step struct {
		name string
		ops  func(s storeUnderTest) []Op
	}
	rvOf := func(s storeUnderTest, name string) uint64 {
		o, err := s.Get(api.KindService, name)
		if err != nil {
			return 0
		}
		return o.Metadata.ResourceVersion
	}
	steps := []step{
		{"create", func(storeUnderTest) []Op { return []Op{{Type: OpCreate, Object: obj("a", `{"x":1}`, "", nil, 0)}} }},
		{"create again", func(storeUnderTest) []Op { return []Op{{Type: OpCreate, Object: obj("a", `{"x":1}`, "", nil, 0)}} }},
		{"same spec, other key order", func(storeUnderTest) []Op {
			return []Op{{Type: OpUpdate, Object: obj("a", `{ "x" : 1 }`, "", nil, 0)}}
		}},
		{"labels only", func(storeUnderTest) []Op {
			return []Op{{Type: OpUpdate, Object: obj("a", `{"x":1}`, "", map[string]string{"k": "v"}, 0)}}
		}},
		{"status", func(storeUnderTest) []Op {
			return []Op{{Type: OpUpdateStatus, Object: obj("a", "", `{"ok":true}`, nil, 0)}}
		}},
		{"spec change keeps status", func(s storeUnderTest) []Op {
			return []Op{{Type: OpUpdate, Object: obj("a", `{"x":2}`, "", map[string]string{"k": "v"}, rvOf(s, "a"))}}
		}},
		{"stale CAS", func(storeUnderTest) []Op { return []Op{{Type: OpUpdate, Object: obj("a", `{"x":3}`, "", nil, 1)}} }},
		{"all or nothing", func(storeUnderTest) []Op {
			return []Op{{Type: OpCreate, Object: obj("b", `{}`, "", nil, 0)}, {Type: OpDelete, Object: obj("missing", "", "", nil, 0)}}
		}},
		{"delete", func(storeUnderTest) []Op { return []Op{{Type: OpDelete, Object: obj("a", "", "", nil, 0)}} }},
		{"update gone", func(storeUnderTest) []Op { return []Op{{Type: OpUpdate, Object: obj("a", `{}`, "", nil, 0)}} }},
	}
	type answer struct {
		Err     string
		Objects []api.RawObject
		B       bool // does b exist
	}
	norm := func(objs []api.RawObject) []api.RawObject {
		for i := range objs {
			objs[i].Metadata.ResourceVersion, objs[i].Metadata.Created = 0, time.Time{}
		}
		return objs
	}
	classify := func(err error) string {
		for _, e := range []error{ErrExists, ErrNotFound, ErrConflict, ErrInvalid} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		if err != nil {
			return "other: " + err.Error()
		}
		return ""
	}
	for _, st := range steps {
		var got [2]answer
		for i, s := range []storeUnderTest{real, mem} {
			objs, err := s.Txn(t.Context(), st.ops(s))
			_, berr := s.Get(api.KindService, "b")
			got[i] = answer{Err: classify(err), Objects: norm(objs), B: berr == nil}
		}
		if diff := cmp.Diff(got[0], got[1]); diff != "" {
			t.Errorf("%s: Store and MemStore differ (-Store +MemStore):\n%s", st.name, diff)
		}
	}
}

func TestMemStoreWatchAndLeader(t *testing.T) {
	m := NewMemStore(nil)
	ctx := t.Context()
	ch, err := m.Watch(ctx, api.KindService, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Txn(ctx, []Op{{Type: OpCreate, Object: api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "a"}}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != api.EventAdded || ev.Object.Metadata.Name != "a" || ev.ResourceVersion != m.ResourceVersion() {
			t.Errorf("event %+v, want Added a at %d", ev, m.ResourceVersion())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	if _, err := m.Txn(ctx, []Op{{Type: OpCreate, Object: api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "b"}}}}); err != nil {
		t.Fatal(err)
	}
	m.Compact(m.ResourceVersion())
	if _, err := m.Watch(ctx, api.KindService, m.ResourceVersion()-1); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch before the compacted history: %v, want ErrCompacted", err)
	}
	m.SetLeader(false)
	if _, err := m.Txn(ctx, []Op{{Type: OpDelete, Object: api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "a"}}}}); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Txn without leader: %v, want ErrNoLeader", err)
	}
	if err := m.ReadBarrier(ctx); !errors.Is(err, ErrNoLeader) {
		t.Errorf("ReadBarrier without leader: %v, want ErrNoLeader", err)
	}
	if id, _ := m.Leader(); id != "" {
		t.Errorf("Leader() = %q without a leader", id)
	}
}

func TestPreviewMatchesCommit(t *testing.T) {
	m := NewMemStore(nil)
	ctx := t.Context()
	base := api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "a"}, Spec: json.RawMessage(`{"x":1}`)}
	if _, err := m.Txn(ctx, []Op{{Type: OpCreate, Object: base}}); err != nil {
		t.Fatal(err)
	}
	get := func(k api.Kind, n string) (api.RawObject, bool) {
		o, err := m.Get(k, n)
		return o, err == nil
	}
	same := base
	same.Spec = json.RawMessage(`{ "x": 1 }`)
	changed := base
	changed.Spec = json.RawMessage(`{"x":2}`)
	ops := []Op{{Type: OpUpdate, Object: same}}
	objs, ch, err := Preview(ops, get, time.Now())
	if err != nil || ch[0] || objs[0].Metadata.Generation != 1 {
		t.Errorf("Preview(no-op) = %v, %v, %v; want unchanged at generation 1", objs, ch, err)
	}
	ops = []Op{{Type: OpUpdate, Object: changed}, {Type: OpCreate, Object: api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "b"}}}}
	objs, ch, err = Preview(ops, get, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, true}, ch); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	before := m.ResourceVersion()
	out, err := m.Txn(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	if m.ResourceVersion() == before {
		t.Error("the commit took no resourceVersion")
	}
	for i := range out {
		out[i].Metadata.ResourceVersion, objs[i].Metadata.ResourceVersion = 0, 0
		out[i].Metadata.Created, objs[i].Metadata.Created = time.Time{}, time.Time{}
	}
	if diff := cmp.Diff(out, objs); diff != "" {
		t.Errorf("Preview and commit differ (-commit +preview):\n%s", diff)
	}
	if _, _, err := Preview([]Op{{Type: OpCreate, Object: base}}, get, time.Now()); !errors.Is(err, ErrExists) {
		t.Errorf("Preview(create existing) = %v, want ErrExists", err)
	}
}
