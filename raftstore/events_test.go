package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func eventOp(t *testing.T, rv uint64, i int) Op {
	t.Helper()
	spec, err := json.Marshal(api.EventSpec{Time: time.Unix(1, 0).UTC(), Object: api.OwnerRef{Kind: api.KindPod, Name: "web-x"}, Reason: api.ReasonBound, Type: api.EventNormal})
	if err != nil {
		t.Fatal(err)
	}
	return Op{Type: OpCreate, Object: api.RawObject{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: api.EventName(rv, i)}, Spec: spec}}
}

// TestEventsBounded: the store keeps the newest api.MaxEvents events,
// dropping the oldest in the transaction that creates one more, and says
// so to watchers of events.
func TestEventsBounded(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore(nil)
	var ops []Op
	for i := range api.MaxEvents {
		ops = append(ops, eventOp(t, 1, i))
	}
	if _, err := m.Txn(ctx, ops); err != nil {
		t.Fatal(err)
	}
	w, err := m.Watch(ctx, api.KindEvent, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Txn(ctx, []Op{eventOp(t, 2, 0), eventOp(t, 2, 1)}); err != nil {
		t.Fatal(err)
	}
	evs, _, err := m.List(api.KindEvent)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != api.MaxEvents {
		t.Fatalf("stored %d events, want %d", len(evs), api.MaxEvents)
	}
	if got, want := evs[0].Metadata.Name, api.EventName(1, 2); got != want {
		t.Errorf("oldest kept = %s, want %s", got, want)
	}
	var got []string
	for range 4 {
		ev := <-w
		got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Object.Metadata.Name))
	}
	want := []string{"ADDED " + api.EventName(2, 0), "ADDED " + api.EventName(2, 1), "DELETED " + api.EventName(1, 0), "DELETED " + api.EventName(1, 1)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events watch (-want +got):\n%s", diff)
	}
}

// TestEventsNotInObjectWatch: a watch or list of every kind leaves events
// out, so controllers are not woken by them.
func TestEventsNotInObjectWatch(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore(nil)
	all, err := m.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Txn(ctx, []Op{eventOp(t, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	svc := api.RawObject{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: json.RawMessage(`{}`)}
	if _, err := m.Txn(ctx, []Op{{Type: OpCreate, Object: svc}}); err != nil {
		t.Fatal(err)
	}
	if ev := <-all; ev.Object.Kind != api.KindService {
		t.Errorf("first event of a watch of every kind = %s/%s, want the service", ev.Object.Kind, ev.Object.Metadata.Name)
	}
	objs, _, err := m.List("")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Errorf("list of every kind = %d objects, want 1 (the service)", len(objs))
	}
}
