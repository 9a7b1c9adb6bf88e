package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
)

// applyID feeds one transaction with request id id to f as entry index.
func applyID(t testing.TB, f *fsm, index uint64, id string, ops ...Op) *applyResult {
	t.Helper()
	data, err := json.Marshal(command{Ops: ops, Created: t0, RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(*applyResult)
}

func TestValidateRequestID(t *testing.T) {
	for _, id := range []string{"a", "Z9_-", strings.Repeat("x", 64), "q1w2E3-r4_"} {
		if err := ValidateRequestID(id); err != nil {
			t.Errorf("ValidateRequestID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", strings.Repeat("x", 65), "a b", "a/b", "é", "a\n", "a.b"} {
		if err := ValidateRequestID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateRequestID(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// TestFSMRequestIDAppliedOnce: a transaction resent with the id of one
// applied before is not applied again, even after another writer changed
// the object: it answers with the current objects and emits no event.
func TestFSMRequestIDAppliedOnce(t *testing.T) {
	h := newHub(64, 8)
	f := newFSM(h)
	apply(t, f, 1, op(OpCreate, obj(api.KindDeployment, "web", 0, `{"replicas":1}`, "", nil)))
	scale := op(OpUpdate, obj(api.KindDeployment, "web", 1, `{"replicas":5}`, "", nil))
	if res := applyID(t, f, 2, "scale-1", scale); res.Err != nil {
		t.Fatal(res.Err)
	}
	// Another client's write lands between the two attempts.
	other := apply(t, f, 3, op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"replicas":7}`, "", nil)))
	if other.Err != nil {
		t.Fatal(other.Err)
	}
	events := len(history(h))
	res := applyID(t, f, 4, "scale-1", scale)
	if res.Err != nil {
		t.Fatalf("resent transaction: %v", res.Err)
	}
	if d := cmp.Diff(derefAll(other.Objects), derefAll(res.Objects), rawCmp); d != "" {
		t.Errorf("resent transaction's result is not the current object (-want +got):\n%s", d)
	}
	if got, _ := f.get(api.KindDeployment, "web"); string(got.Spec) != `{"replicas":7}` || got.Metadata.ResourceVersion != 3 {
		t.Errorf("stored after the resend: rv %d spec %s, want rv 3 spec {\"replicas\":7}", got.Metadata.ResourceVersion, got.Spec)
	}
	if n := len(history(h)); n != events {
		t.Errorf("resend emitted %d events, want none", n-events)
	}
	if f.appliedIndex() != 4 {
		t.Errorf("applied index %d, want 4", f.appliedIndex())
	}

	// A resent delete of an object gone since answers with the op's own
	// object; a resent create with the stored one.
	if res := applyID(t, f, 5, "del-1", op(OpDelete, obj(api.KindDeployment, "web", 0, "", "", nil))); res.Err != nil {
		t.Fatal(res.Err)
	}
	res = applyID(t, f, 6, "del-1", op(OpDelete, obj(api.KindDeployment, "web", 0, "", "", nil)))
	if res.Err != nil || res.Objects[0].Kind != api.KindDeployment || res.Objects[0].Metadata.Name != "web" {
		t.Errorf("resent delete: %+v, %v", res.Objects, res.Err)
	}
	create := op(OpCreate, obj(api.KindService, "db", 0, `{"port":1}`, "", nil))
	first := applyID(t, f, 7, "create-1", create)
	again := applyID(t, f, 8, "create-1", create)
	if first.Err != nil || again.Err != nil {
		t.Fatalf("create and resend: %v, %v", first.Err, again.Err)
	}
	if d := cmp.Diff(derefAll(first.Objects), derefAll(again.Objects), rawCmp); d != "" {
		t.Errorf("resent create (-first +resend):\n%s", d)
	}
}

// TestFSMFailedRequestNotRecorded: a transaction that failed records
// nothing, so its resend is judged afresh and may succeed.
func TestFSMFailedRequestNotRecorded(t *testing.T) {
	f := newFSM(newHub(64, 8))
	update := op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"replicas":2}`, "", nil))
	if res := applyID(t, f, 1, "u-1", update); !errors.Is(res.Err, ErrNotFound) {
		t.Fatalf("update of a missing object: %v, want ErrNotFound", res.Err)
	}
	if f.requests.len() != 0 {
		t.Fatalf("failed transaction recorded its id: %d ids", f.requests.len())
	}
	apply(t, f, 2, op(OpCreate, obj(api.KindDeployment, "web", 0, `{"replicas":1}`, "", nil)))
	res := applyID(t, f, 3, "u-1", update)
	if res.Err != nil || res.Objects[0].Metadata.ResourceVersion != 3 {
		t.Fatalf("resend after the failure was not applied: %+v, %v", res.Objects, res.Err)
	}
	// An invalid id fails the entry, deterministically.
	if res := applyID(t, f, 4, "bad id", update); !errors.Is(res.Err, ErrInvalid) {
		t.Errorf("entry with a bad id: %v, want ErrInvalid", res.Err)
	}
}

// TestFSMRequestIDEviction: the table keeps the newest maxRequests ids and
// evicts the oldest first; an evicted id applies again.
func TestFSMRequestIDEviction(t *testing.T) {
	f := newFSM(newHub(64, 8))
	f.maxRequests = 3
	apply(t, f, 1, op(OpCreate, obj(api.KindDeployment, "web", 0, `{"v":0}`, "", nil)))
	for i := 1; i <= 5; i++ {
		if res := applyID(t, f, uint64(i+1), fmt.Sprintf("id-%d", i), op(OpUpdate, obj(api.KindDeployment, "web", 0, fmt.Sprintf(`{"v":%d}`, i), "", nil))); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	want := []appliedRequest{{"id-3", 4}, {"id-4", 5}, {"id-5", 6}}
	if d := cmp.Diff(want, f.requests.list()); d != "" {
		t.Fatalf("table (-want +got):\n%s", d)
	}
	// id-1 was evicted: its resend applies (spec changes back); id-4 not.
	if res := applyID(t, f, 7, "id-4", op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"v":4}`, "", nil))); res.Err != nil || res.Objects[0].Metadata.ResourceVersion != 6 {
		t.Errorf("remembered id-4 resent: %+v, %v", res.Objects, res.Err)
	}
	if res := applyID(t, f, 8, "id-1", op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"v":1}`, "", nil))); res.Err != nil || res.Objects[0].Metadata.ResourceVersion != 8 {
		t.Errorf("evicted id-1 resent: %+v, %v (want applied at 8)", res.Objects, res.Err)
	}
	if n := f.requests.len(); n != 3 {
		t.Errorf("table holds %d ids, want the bound 3", n)
	}
	// Many more keep the bound (and the queue compacts).
	for i := range 5000 {
		applyID(t, f, uint64(9+i), fmt.Sprintf("m-%d", i), op(OpUpdate, obj(api.KindDeployment, "web", 0, fmt.Sprintf(`{"m":%d}`, i), "", nil)))
	}
	if n, q := f.requests.len(), len(f.requests.queue); n != 3 || q > 2100 {
		t.Errorf("after 5000 more: %d ids, queue of %d", n, q)
	}
}

// TestFSMSnapshotKeepsRequestIDs: the table survives a snapshot and
// restore, and a snapshot without one (written before it existed)
// restores to an empty table.
func TestFSMSnapshotKeepsRequestIDs(t *testing.T) {
	f := newFSM(newHub(64, 8))
	apply(t, f, 1, op(OpCreate, obj(api.KindDeployment, "web", 0, `{"v":0}`, "", nil)))
	applyID(t, f, 2, "a-1", op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"v":1}`, "", nil)))
	applyID(t, f, 3, "b-2", op(OpCreate, obj(api.KindService, "db", 0, `{}`, "", nil)))
	snap := persist(t, f)

	g := newFSM(newHub(64, 8))
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f.requests.list(), g.requests.list()); d != "" {
		t.Fatalf("restored table (-want +got):\n%s", d)
	}
	if res := applyID(t, g, 4, "a-1", op(OpUpdate, obj(api.KindDeployment, "web", 0, `{"v":9}`, "", nil))); res.Err != nil || res.Objects[0].Metadata.ResourceVersion != 2 {
		t.Errorf("resend after restore: %+v, %v (want not applied, rv 2)", res.Objects, res.Err)
	}

	old := `{"format":1,"index":7,"objects":[{"kind":"deployments","metadata":{"name":"web","resourceVersion":7}}]}`
	h := newFSM(newHub(64, 8))
	applyID(t, h, 1, "x-1", op(OpCreate, obj(api.KindService, "s", 0, `{}`, "", nil)))
	if err := h.Restore(io.NopCloser(strings.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if n := h.requests.len(); n != 0 {
		t.Errorf("old snapshot restored %d ids, want 0", n)
	}

	for name, data := range map[string]string{
		"bad id":    `{"format":1,"index":3,"objects":[],"requests":[{"id":"a b","index":1}]}`,
		"order":     `{"format":1,"index":3,"objects":[],"requests":[{"id":"a","index":2},{"id":"b","index":2}]}`,
		"duplicate": `{"format":1,"index":3,"objects":[],"requests":[{"id":"a","index":1},{"id":"a","index":2}]}`,
	} {
		if err := newFSM(newHub(8, 8)).Restore(io.NopCloser(strings.NewReader(data))); err == nil {
			t.Errorf("%s: restore succeeded", name)
		}
	}
}

// TestFSMDeterminismWithRequestIDs: two FSMs fed the same log, with ids
// resent and evicted, end with the same state and table, and so does one
// restored from a snapshot half way.
func TestFSMDeterminismWithRequestIDs(t *testing.T) {
	log := randomLog(7, 400)
	r := rand.New(rand.NewPCG(7, 8))
	for i, data := range log {
		var cmd command
		if err := json.Unmarshal(data, &cmd); err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) > 0 {
			cmd.RequestID = fmt.Sprintf("r%d", r.IntN(i/2+1)) // many resent
		}
		log[i], _ = json.Marshal(cmd)
	}
	run := func(f *fsm, from, to int) {
		for i := from; i < to; i++ {
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: log[i]})
		}
	}
	mk := func() *fsm { f := newFSM(newHub(16, 8)); f.maxRequests = 20; return f }
	a, b := mk(), mk()
	run(a, 0, len(log))
	run(b, 0, len(log))
	snapA := persist(t, a)
	if !bytes.Equal(snapA, persist(t, b)) {
		t.Fatal("two FSMs fed the same log differ")
	}
	c := mk()
	run(c, 0, 200)
	d := mk()
	if err := d.Restore(io.NopCloser(bytes.NewReader(persist(t, c)))); err != nil {
		t.Fatal(err)
	}
	run(d, 200, len(log))
	if !bytes.Equal(snapA, persist(t, d)) {
		t.Fatal("FSM restored half way differs from one that applied the whole log")
	}
	if n := a.requests.len(); n != 20 {
		t.Errorf("table holds %d ids, want the bound 20", n)
	}
}

// TestStoreRequestIDThroughFollower: a write with a request id sent
// through a follower, resent after another client's write, is applied
// once; the id travels with the forwarded write.
func TestStoreRequestIDThroughFollower(t *testing.T) {
	c := NewTestCluster(t, 3)
	f := c.Stores[c.Follower()]
	leader := c.Stores[c.Leader()]
	mustTxn(t, f, op(OpCreate, deployment("web", `{"replicas":1}`)))
	ctx := WithRequestID(ctxTimeout(t, 10*time.Second), "scale-web-1")
	scale := []Op{op(OpUpdate, deployment("web", `{"replicas":5}`))}
	first, err := f.Txn(ctx, scale)
	if err != nil {
		t.Fatal(err)
	}
	other := mustTxn(t, leader, op(OpUpdate, deployment("web", `{"replicas":7}`)))
	again, err := f.Txn(ctx, scale)
	if err != nil {
		t.Fatalf("resend through the follower: %v", err)
	}
	if again[0].Metadata.ResourceVersion != other[0].Metadata.ResourceVersion || string(again[0].Spec) != `{"replicas":7}` {
		t.Errorf("resend answered rv %d spec %s, want the other write's rv %d spec {\"replicas\":7}",
			again[0].Metadata.ResourceVersion, again[0].Spec, other[0].Metadata.ResourceVersion)
	}
	// Resent straight to the leader too: still once.
	if _, err := leader.Txn(ctx, scale); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Stores {
		got := waitObject(t, s, api.KindDeployment, "web", other[0].Metadata.ResourceVersion)
		if string(got.Spec) != `{"replicas":7}` || got.Metadata.Generation != first[0].Metadata.Generation+1 {
			t.Errorf("%s: spec %s generation %d, want the other write's", s.NodeID(), got.Spec, got.Metadata.Generation)
		}
	}
	if _, err := f.Txn(WithRequestID(context.Background(), "no spaces"), scale); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid id: %v, want ErrInvalid", err)
	}
}

// TestMemStoreRequestID: MemStore deduplicates as Store does, even a
// resend the FSM's rules would reject (a create of what exists now).
func TestMemStoreRequestID(t *testing.T) {
	m := NewMemStore(clock.NowFunc(func() time.Time { return t0 }))
	ctx := WithRequestID(context.Background(), "create-web")
	create := []Op{op(OpCreate, deployment("web", `{"replicas":1}`))}
	first, err := m.Txn(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Txn(ctx, create)
	if err != nil {
		t.Fatalf("resent create: %v", err)
	}
	if d := cmp.Diff(first, again, rawCmp); d != "" {
		t.Errorf("resent create (-first +resend):\n%s", d)
	}
	if _, err := m.Txn(context.Background(), create); !errors.Is(err, ErrExists) {
		t.Errorf("create without an id: %v, want ErrExists", err)
	}
	if _, err := m.Txn(WithRequestID(context.Background(), strings.Repeat("x", 65)), create); !errors.Is(err, ErrInvalid) {
		t.Errorf("too long an id: %v, want ErrInvalid", err)
	}
	objs, _, _ := m.List("")
	if len(objs) != 1 || objs[0].Metadata.Generation != 1 {
		t.Errorf("store holds %+v, want web once", objs)
	}
}
