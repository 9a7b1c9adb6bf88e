package fakestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/httpapi/fakestore"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func obj(name, spec, status string, rv uint64, labels map[string]string) api.RawObject {
	o := api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
	if spec != "" {
		o.Spec = json.RawMessage(spec)
	}
	if status != "" {
		o.Status = json.RawMessage(status)
	}
	return o
}

func op(t raftstore.OpType, o api.RawObject) raftstore.Op { return raftstore.Op{Type: t, Object: o} }

func TestTxnSemantics(t *testing.T) {
	type step struct {
		ops     []raftstore.Op
		err     error
		wantGen int64
		wantRV  uint64
		status  string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"create then exists", []step{
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{"x":1}`, "", 0, nil))}, wantGen: 1, wantRV: 1},
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{"x":1}`, "", 0, nil))}, err: raftstore.ErrExists},
		}},
		{"update bumps generation only on spec change", []step{
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{"x":1}`, "", 0, nil))}, wantGen: 1, wantRV: 1},
			{ops: []raftstore.Op{op(raftstore.OpUpdateStatus, obj("a", "", `{"ok":true}`, 0, nil))}, wantGen: 1, wantRV: 2, status: `{"ok":true}`},
			{ops: []raftstore.Op{op(raftstore.OpUpdate, obj("a", `{"x":1}`, "", 2, map[string]string{"k": "v"}))}, wantGen: 1, wantRV: 3, status: `{"ok":true}`},
			{ops: []raftstore.Op{op(raftstore.OpUpdate, obj("a", `{ "x": 2 }`, "", 0, map[string]string{"k": "v"}))}, wantGen: 2, wantRV: 4, status: `{"ok":true}`},
			{ops: []raftstore.Op{op(raftstore.OpUpdate, obj("a", `{"x":2}`, "", 0, map[string]string{"k": "v"}))}, wantGen: 2, wantRV: 4, status: `{"ok":true}`},
		}},
		{"cas", []step{
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{}`, "", 0, nil))}, wantGen: 1, wantRV: 1},
			{ops: []raftstore.Op{op(raftstore.OpUpdate, obj("a", `{"x":1}`, "", 7, nil))}, err: raftstore.ErrConflict},
			{ops: []raftstore.Op{op(raftstore.OpDelete, obj("a", "", "", 7, nil))}, err: raftstore.ErrConflict},
			{ops: []raftstore.Op{op(raftstore.OpDelete, obj("a", "", "", 1, nil))}, wantGen: 1, wantRV: 2},
			{ops: []raftstore.Op{op(raftstore.OpUpdate, obj("a", `{}`, "", 0, nil))}, err: raftstore.ErrNotFound},
		}},
		{"all or nothing", []step{
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{}`, "", 0, nil)), op(raftstore.OpUpdate, obj("b", `{}`, "", 0, nil))}, err: raftstore.ErrNotFound},
			{ops: []raftstore.Op{op(raftstore.OpCreate, obj("a", `{}`, "", 0, nil))}, wantGen: 1, wantRV: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fakestore.New(func() time.Time { return t0 })
			for i, st := range tc.steps {
				out, err := s.Txn(context.Background(), st.ops)
				if !errors.Is(err, st.err) {
					t.Fatalf("step %d: err %v, want %v", i, err, st.err)
				}
				if err != nil {
					continue
				}
				got := out[0]
				if got.Metadata.Generation != st.wantGen || got.Metadata.ResourceVersion != st.wantRV ||
					string(got.Status) != st.status || !got.Metadata.Created.Equal(t0) {
					t.Errorf("step %d: got %+v status %s, want generation %d rv %d status %q",
						i, got.Metadata, got.Status, st.wantGen, st.wantRV, st.status)
				}
			}
			if tc.name == "all or nothing" {
				if _, err := s.Get(api.KindService, "a"); err != nil {
					t.Errorf("after the failed txn and the retry: %v", err)
				}
			}
		})
	}
}

func TestWatch(t *testing.T) {
	s := fakestore.New(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range []string{"a", "b"} {
		if _, err := s.Txn(ctx, []raftstore.Op{op(raftstore.OpCreate, obj(n, `{}`, "", 0, nil))}); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := s.Watch(ctx, api.KindService, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, []raftstore.Op{op(raftstore.OpDelete, obj("a", "", "", 0, nil))}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		ev := <-ch
		got = append(got, string(ev.Type)+" "+ev.Object.Metadata.Name)
	}
	if d := cmp.Diff([]string{"ADDED b", "DELETED a"}, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	s.EndWatches()
	if ev := <-ch; ev.Type != api.EventRelist {
		t.Errorf("after EndWatches: %s, want RELIST", ev.Type)
	}
	if _, ok := <-ch; ok {
		t.Error("channel open after RELIST")
	}
	s.Compact(3)
	if _, err := s.Watch(ctx, "", 2); !errors.Is(err, raftstore.ErrCompacted) {
		t.Errorf("watch from before compaction: %v, want ErrCompacted", err)
	}
}
