package svcview

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
)

// recordingWriter records the views written per board; fail makes writes
// to a board fail.
type recordingWriter struct {
	mu     sync.Mutex
	writes map[string][][]byte
	fail   map[string]bool
}

func (w *recordingWriter) WriteView(_ context.Context, node string, content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail[node] {
		w.writes[node+"(failed)"] = append(w.writes[node+"(failed)"], content)
		return errors.New("board unreachable")
	}
	w.writes[node] = append(w.writes[node], content)
	return nil
}

func (w *recordingWriter) count(node string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes[node])
}

func (w *recordingWriter) setFail(node string, f bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail[node] = f
}

func TestPublisher(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(t0)
	w := &recordingWriter{writes: map[string][][]byte{}, fail: map[string]bool{"b4": true}}
	feed := NewFeed()
	ready := func(phase4 api.NodePhase, eps int) View {
		var e []api.Endpoint
		for range eps {
			e = append(e, api.Endpoint{Port: "http", Pod: "web-a", Node: "b3", Address: "10.0.0.3:20001"})
		}
		return Build([]*api.Service{svc("web", e...)}, []*api.Node{
			node("b1", "10.0.0.1", api.NodeReady, true), // server: follows its store
			node("b3", "10.0.0.3", api.NodeReady, false),
			node("b4", "10.0.0.4", phase4, false),
			node("b5", "10.0.0.5", api.NodeNotReady, false), // not Ready: not written
		})
	}
	feed.Set(ready(api.NodeReady, 1))
	p := NewPublisher(feed, w, clk, testutil.Logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	testutil.Until(t, 10*time.Second, "the view written to b3", func() bool { return w.count("b3") == 1 })
	// b4 fails: retried after 1 s, then 2 s.
	clk.WaitTimer(t, t0.Add(time.Second))
	clk.Advance(time.Second)
	clk.WaitTimer(t, t0.Add(3*time.Second))
	if got := w.count("b4(failed)"); got != 2 {
		t.Errorf("failed writes to b4 = %d, want 2", got)
	}
	w.setFail("b4", false)
	clk.Advance(2 * time.Second)
	testutil.Until(t, 10*time.Second, "b4 written once it answers", func() bool { return w.count("b4") == 1 })

	// An equal view writes nothing; a changed one is written to each
	// worker once.
	feed.Set(ready(api.NodeReady, 1))
	feed.Set(ready(api.NodeReady, 2))
	testutil.Until(t, 10*time.Second, "the changed view", func() bool { return w.count("b3") == 2 && w.count("b4") == 2 })

	// b4 goes away and comes back (it may have rebooted with an empty
	// /run): it gets the view again although the view did not change.
	feed.Set(ready(api.NodeNotReady, 2))
	testutil.Until(t, 10*time.Second, "b4 forgotten", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.boards["b4"] == nil
	})
	feed.Set(ready(api.NodeReady, 2))
	testutil.Until(t, 10*time.Second, "b4 written again", func() bool { return w.count("b4") == 3 })

	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := cmp.Diff([]string{"b3", "b4", "b4(failed)"}, keys(w.writes)); d != "" {
		t.Errorf("boards written (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ready(api.NodeReady, 2).Encode(), w.writes["b3"][1]); d != "" {
		t.Errorf("content written: %s", d)
	}
}

func keys(m map[string][][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, retryAfter(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("retryAfter (-want +got):\n%s", d)
	}
}
