package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// evKey summarises an event for comparisons.
type evKey struct {
	Type api.EventType
	RV   uint64
	Kind api.Kind
	Name string
}

func keyOf(ev api.WatchEvent) evKey {
	return evKey{ev.Type, ev.ResourceVersion, ev.Object.Kind, ev.Object.Metadata.Name}
}

// recv reads n events from ch, failing after a deadline.
func recv(t *testing.T, ch <-chan api.WatchEvent, n int) []evKey {
	t.Helper()
	var out []evKey
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events: %v", len(out), n, out)
			}
			out = append(out, keyOf(ev))
		case <-timeout:
			t.Fatalf("timed out after %d of %d events: %v", len(out), n, out)
		}
	}
	return out
}

// recvClosed drains ch until it is closed and returns what it held.
func recvClosed(t *testing.T, ch <-chan api.WatchEvent) []evKey {
	t.Helper()
	var out []evKey
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, keyOf(ev))
		case <-timeout:
			t.Fatalf("channel not closed; got %v", out)
		}
	}
}

// createPods applies one create per index in [from, to], named p<index>.
func createPods(t testing.TB, f *fsm, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		res := apply(t, f, i, op(OpCreate, obj(api.KindPod, fmt.Sprintf("p%d", i), 0, `{}`, "", nil)))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
}

func added(kind api.Kind, rv uint64) evKey {
	return evKey{api.EventAdded, rv, kind, fmt.Sprintf("p%d", rv)}
}

func TestWatchResumeAndFollow(t *testing.T) {
	f := newFSM(newHub(64, 8))
	createPods(t, f, 1, 10)
	ctx := t.Context()

	tests := []struct {
		name   string
		fromRV uint64
		want   []evKey
	}{
		{"from a resourceVersion", 6, []evKey{added(api.KindPod, 7), added(api.KindPod, 8), added(api.KindPod, 9), added(api.KindPod, 10), added(api.KindPod, 11)}},
		{"from the current index", 10, []evKey{added(api.KindPod, 11)}},
		{"zero means from now", 0, []evKey{added(api.KindPod, 11)}},
	}
	var chans []<-chan api.WatchEvent
	for _, tt := range tests {
		ch, err := f.hub.watch(ctx, "", tt.fromRV)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		chans = append(chans, ch)
	}
	createPods(t, f, 11, 11)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, recv(t, chans[i], len(tt.want))); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func TestWatchFromFutureResourceVersion(t *testing.T) {
	// A follower that lags behind the leader the client listed from.
	f := newFSM(newHub(64, 8))
	createPods(t, f, 1, 3)
	ch, err := f.hub.watch(t.Context(), "", 5)
	if err != nil {
		t.Fatal(err)
	}
	createPods(t, f, 4, 6)
	if d := cmp.Diff([]evKey{added(api.KindPod, 6)}, recv(t, ch, 1)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func TestWatchKindFilter(t *testing.T) {
	f := newFSM(newHub(64, 8))
	ch, err := f.hub.watch(t.Context(), api.KindNode, 0)
	if err != nil {
		t.Fatal(err)
	}
	createPods(t, f, 1, 2)
	apply(t, f, 3, op(OpCreate, obj(api.KindNode, "n1", 0, `{}`, "", nil)))
	want := []evKey{{api.EventAdded, 3, api.KindNode, "n1"}}
	if d := cmp.Diff(want, recv(t, ch, 1)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func TestWatchMultiOpTransaction(t *testing.T) {
	f := newFSM(newHub(3, 8))
	mk := func(name string) Op { return op(OpCreate, obj(api.KindPod, name, 0, `{}`, "", nil)) }
	apply(t, f, 1, mk("x"))
	apply(t, f, 2, mk("a"), mk("b"), mk("c")) // evicts x@1
	ch, err := f.hub.watch(t.Context(), "", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []evKey{{api.EventAdded, 2, api.KindPod, "a"}, {api.EventAdded, 2, api.KindPod, "b"}, {api.EventAdded, 2, api.KindPod, "c"}}
	if d := cmp.Diff(want, recv(t, ch, 3)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	apply(t, f, 3, mk("d")) // evicts a@2: entry 2 is no longer complete
	if _, err := f.hub.watch(t.Context(), "", 1); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch from 1 with entry 2 partly evicted: %v, want ErrCompacted", err)
	}
	ch2, err := f.hub.watch(t.Context(), "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]evKey{{api.EventAdded, 3, api.KindPod, "d"}}, recv(t, ch2, 1)); d != "" {
		t.Errorf("events from 2 (-want +got):\n%s", d)
	}
}

func TestWatchCompacted(t *testing.T) {
	f := newFSM(newHub(4, 8))
	createPods(t, f, 1, 10) // history keeps RVs 7..10
	tests := []struct {
		fromRV  uint64
		wantErr error
		want    []evKey
	}{
		{fromRV: 2, wantErr: ErrCompacted},
		{fromRV: 5, wantErr: ErrCompacted},
		{fromRV: 6, want: []evKey{added(api.KindPod, 7), added(api.KindPod, 8), added(api.KindPod, 9), added(api.KindPod, 10)}},
		{fromRV: 9, want: []evKey{added(api.KindPod, 10)}},
		{fromRV: 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("from ", tt.fromRV), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ch, err := f.hub.watch(ctx, "", tt.fromRV)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got := recv(t, ch, len(tt.want))
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			cancel()
			if rest := recvClosed(t, ch); len(rest) != 0 {
				t.Errorf("unexpected events %v", rest)
			}
		})
	}
}

func TestWatchSlowWatcherRelists(t *testing.T) {
	f := newFSM(newHub(8, 2))
	ch, err := f.hub.watch(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads while 200 events go by; the FSM must not block.
	createPods(t, f, 1, 200)
	got := recvClosed(t, ch)
	if len(got) == 0 || got[len(got)-1].Type != api.EventRelist {
		t.Fatalf("last event is not RELIST: %v", got)
	}
	if rv := got[len(got)-1].RV; rv < uint64(len(got)-1) || rv > 200 {
		t.Errorf("RELIST resourceVersion %d, want the index when the watcher fell behind", rv)
	}
	// What came before the RELIST is an in-order prefix of the events.
	for i, ev := range got[:len(got)-1] {
		if want := added(api.KindPod, uint64(i+1)); ev != want {
			t.Fatalf("event %d is %v, want %v", i, ev, want)
		}
	}
	if len(got) > 200 {
		t.Errorf("got %d events, more than were published", len(got))
	}
}

func TestWatchEndsOnCancelCloseAndRestore(t *testing.T) {
	t.Run("context cancelled", func(t *testing.T) {
		f := newFSM(newHub(8, 8))
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := f.hub.watch(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		recvClosed(t, ch)
		testutil.Until(t, 5*time.Second, "watcher goroutine to end", func() bool { return f.hub.watchers() == 0 })
	})
	t.Run("hub closed", func(t *testing.T) {
		f := newFSM(newHub(8, 8))
		ch, err := f.hub.watch(t.Context(), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		f.hub.close()
		if got := recvClosed(t, ch); len(got) != 0 {
			t.Errorf("unexpected events %v", got)
		}
		if _, err := f.hub.watch(t.Context(), "", 0); !errors.Is(err, ErrClosed) {
			t.Errorf("watch after close: %v, want ErrClosed", err)
		}
	})
	t.Run("restore", func(t *testing.T) {
		src := newFSM(newHub(8, 8))
		createPods(t, src, 1, 5)
		snap := persist(t, src)

		f := newFSM(newHub(8, 8))
		createPods(t, f, 1, 2)
		chans := make([]<-chan api.WatchEvent, 3)
		for i := range chans {
			var err error
			if chans[i], err = f.hub.watch(t.Context(), "", 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatal(err)
		}
		for i, ch := range chans {
			want := []evKey{{Type: api.EventRelist, RV: 5}}
			if d := cmp.Diff(want, recvClosed(t, ch)); d != "" {
				t.Errorf("watcher %d (-want +got):\n%s", i, d)
			}
		}
		// History before the restore is gone; the restored index is the
		// new starting point.
		if _, err := f.hub.watch(t.Context(), "", 1); !errors.Is(err, ErrCompacted) {
			t.Errorf("watch from before the snapshot: %v, want ErrCompacted", err)
		}
		ch, err := f.hub.watch(t.Context(), "", 5)
		if err != nil {
			t.Fatal(err)
		}
		createPods(t, f, 6, 6)
		if d := cmp.Diff([]evKey{added(api.KindPod, 6)}, recv(t, ch, 1)); d != "" {
			t.Errorf("events after restore (-want +got):\n%s", d)
		}
	})
}

func TestWaitApplied(t *testing.T) {
	f := newFSM(newHub(8, 8))
	done := make(chan error, 1)
	go func() { done <- f.hub.waitApplied(t.Context(), 3) }()
	createPods(t, f, 1, 3)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitApplied did not return")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.hub.waitApplied(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("waitApplied with a cancelled context: %v", err)
	}
}

func TestWatchEventsAreCopies(t *testing.T) {
	f := newFSM(newHub(8, 8))
	ch1, _ := f.hub.watch(t.Context(), "", 0)
	ch2, _ := f.hub.watch(t.Context(), "", 0)
	apply(t, f, 1, op(OpCreate, obj(api.KindPod, "a", 0, `{"x":1}`, "", map[string]string{"k": "v"})))
	ev1 := <-ch1
	ev1.Object.Metadata.Labels["k"] = "changed"
	ev1.Object.Spec[2] = 'y'
	ev2 := <-ch2
	if ev2.Object.Metadata.Labels["k"] != "v" || string(ev2.Object.Spec) != `{"x":1}` {
		t.Errorf("a watcher's change leaked to another: %+v", ev2.Object)
	}
	if o, _ := f.get(api.KindPod, "a"); o.Metadata.Labels["k"] != "v" || string(o.Spec) != `{"x":1}` {
		t.Errorf("a watcher's change leaked into the store: %+v", o)
	}
}

// TestWatchHistoryGrows: the ring starts small and grows as events come,
// keeping every retained event in order across the growth and the
// wrap-around at the limit.
func TestWatchHistoryGrows(t *testing.T) {
	f := newFSM(newHub(100, 256))
	if got := len(f.hub.ring); got != hubMinSlots {
		t.Fatalf("a new hub has %d slots, want %d", got, hubMinSlots)
	}
	createPods(t, f, 1, 150) // the limit keeps 51..150
	if got := len(f.hub.ring); got != 100 {
		t.Errorf("after 150 events the ring has %d slots, want the limit 100", got)
	}
	if _, err := f.hub.watch(t.Context(), "", 49); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch from 49: %v, want ErrCompacted", err)
	}
	ch, err := f.hub.watch(t.Context(), "", 50)
	if err != nil {
		t.Fatal(err)
	}
	var want []evKey
	for rv := uint64(51); rv <= 150; rv++ {
		want = append(want, added(api.KindPod, rv))
	}
	if d := cmp.Diff(want, recv(t, ch, len(want))); d != "" {
		t.Errorf("events from 50 (-want +got):\n%s", d)
	}
}

// TestWatchHistoryBytes: big objects are dropped from the history by their
// bytes long before the limit on events; a watch from before them
// relists, one from after them gets every later event.
func TestWatchHistoryBytes(t *testing.T) {
	c := DefaultConfig()
	c.WatchHistory, c.WatchHistoryBytes, c.WatchBuffer = 4096, 64<<10, 64
	f := newFSM(hubFor(c))
	spec := fmt.Sprintf(`{"exec":[%q]}`, bytes.Repeat([]byte("x"), 10<<10)) // ≈10 KiB each
	for i := uint64(1); i <= 20; i++ {
		res := apply(t, f, i, op(OpCreate, obj(api.KindPod, fmt.Sprintf("p%d", i), 0, spec, "", nil)))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	f.hub.mu.Lock()
	kept, held := f.hub.next-f.hub.head, f.hub.bytes
	f.hub.mu.Unlock()
	if held > c.WatchHistoryBytes || kept < 5 || kept > 6 {
		t.Fatalf("history keeps %d events of %d bytes, want 5–6 events within %d bytes", kept, held, c.WatchHistoryBytes)
	}
	first := 21 - kept
	if _, err := f.hub.watch(t.Context(), "", first-2); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch from %d: %v, want ErrCompacted", first-2, err)
	}
	ch, err := f.hub.watch(t.Context(), "", first-1)
	if err != nil {
		t.Fatal(err)
	}
	var want []evKey
	for rv := first; rv <= 20; rv++ {
		want = append(want, added(api.KindPod, rv))
	}
	if d := cmp.Diff(want, recv(t, ch, len(want))); d != "" {
		t.Errorf("events from %d (-want +got):\n%s", first-1, d)
	}
}
