package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// TestRecorderWritesEvents: the recorder turns committed changes into
// events in the store, named after the change and labelled by object, with
// a LeaderElected event first; after a lost watch it records what changed
// in between.
func TestRecorderWritesEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := raftstore.NewMemStore(nil)
	write := func(typ raftstore.OpType, o api.Object) {
		t.Helper()
		raw, err := api.ToRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		if cur, err := store.Get(raw.Kind, raw.Metadata.Name); err == nil {
			raw.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
		}
		if _, err := store.Txn(ctx, []raftstore.Op{{Type: typ, Object: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-abcde"},
		Spec: api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "web"}}}
	write(raftstore.OpCreate, pod)

	rec := newRecorder(store, clock.RealClock(), testutil.Logger(t), "b1")
	done := make(chan error, 1)
	go func() { done <- rec.run(ctx) }()

	reasons := func(sel map[string]string) []string {
		raws, _, err := store.List(api.KindEvent)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, raw := range raws {
			if sel != nil && (raw.Metadata.Labels[api.EventLabelKind] != sel[api.EventLabelKind] || raw.Metadata.Labels[api.EventLabelName] != sel[api.EventLabelName]) {
				continue
			}
			var s api.EventSpec
			if err := json.Unmarshal(raw.Spec, &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s.Reason)
		}
		return out
	}
	testutil.Until(t, 5*time.Second, "LeaderElected recorded", func() bool { return len(reasons(nil)) == 1 })

	pod.Spec.Node = "b4"
	pod.Status = api.PodStatus{Phase: api.PodScheduled}
	write(raftstore.OpUpdate, pod)
	write(raftstore.OpUpdateStatus, pod)
	pod.Status = api.PodStatus{Phase: api.PodRunning, Ready: true, Unit: "herd-web-abcde.service"}
	write(raftstore.OpUpdateStatus, pod)
	sel := api.OwnerRef{Kind: api.KindPod, Name: "web-abcde"}.EventSelector()
	want := []string{api.ReasonBound, api.ReasonStarted, api.ReasonReady}
	testutil.Eventually(t, 5*time.Second, "the pod's events", func() error {
		if diff := cmp.Diff(want, reasons(sel)); diff != "" {
			return &diffError{diff}
		}
		return nil
	})
	if got := reasons(nil)[0]; got != api.ReasonLeaderElected {
		t.Errorf("first event = %s, want %s", got, api.ReasonLeaderElected)
	}
	cancel()
	<-done
}

type diffError struct{ diff string }

func (e *diffError) Error() string { return "(-want +got):\n" + e.diff }
