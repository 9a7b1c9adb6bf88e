package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
)

// event is what a test compares of a watch event.
type event struct {
	Type api.EventType
	Kind api.Kind
	Name string
}

// next reads n events from ch, failing on a closed channel or timeout.
func next(t *testing.T, ch <-chan api.WatchEvent, n int) ([]event, []uint64) {
	t.Helper()
	var evs []event
	var rvs []uint64
	timeout := time.After(10 * time.Second)
	for len(evs) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %v", evs)
			}
			evs = append(evs, event{ev.Type, ev.Object.Kind, ev.Object.Metadata.Name})
			rvs = append(rvs, ev.ResourceVersion)
		case <-timeout:
			t.Fatalf("timed out after events %v", evs)
		}
	}
	return evs, rvs
}

func TestWatchStreams(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.Create(ctx, deployment("old", nil)); err != nil {
		t.Fatal(err)
	}
	_, rv, err := e.c.List(ctx, api.KindDeployment)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	ch, err := e.c.Watch(wctx, api.KindDeployment, rv)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := e.c.Create(ctx, deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Create(ctx, service("web")); err != nil { // other kind: not seen
		t.Fatal(err)
	}
	if _, err := e.c.Scale(ctx, "web", 2); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, api.KindDeployment, "web"); err != nil {
		t.Fatal(err)
	}
	evs, rvs := next(t, ch, 3)
	diff(t, "events", []event{
		{api.EventAdded, api.KindDeployment, "web"},
		{api.EventModified, api.KindDeployment, "web"},
		{api.EventDeleted, api.KindDeployment, "web"},
	}, evs)
	if !(rv < rvs[0] && rvs[0] < rvs[1] && rvs[1] < rvs[2]) {
		t.Errorf("resourceVersions %v after %d are not increasing", rvs, rv)
	}

	cancel()
	waitClosed(t, ch)

	// Resume from the first event: only the later two come again.
	ch, err = e.c.Watch(ctx, api.KindDeployment, rvs[0])
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = next(t, ch, 2)
	diff(t, "resumed events", []event{
		{api.EventModified, api.KindDeployment, "web"},
		{api.EventDeleted, api.KindDeployment, "web"},
	}, evs)
}

func waitClosed(t *testing.T, ch <-chan api.WatchEvent) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch channel not closed")
		}
	}
}

func TestWatchAllKindsAndSelector(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	all, err := e.c.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := e.raw(t, "GET", "/v1/deployments?watch=1&selector=bad", "")
	if code != http.StatusBadRequest {
		t.Errorf("watch with a bad selector: %d, want 400", code)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/deployments?watch=true&selector=team%3Dops", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}
	ops := deployment("ops", nil)
	ops.Metadata.Labels = map[string]string{"team": "ops"}
	for _, o := range []api.Object{deployment("web", nil), service("web"), ops} {
		if _, err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := next(t, all, 3)
	diff(t, "all kinds", []event{
		{api.EventAdded, api.KindDeployment, "web"},
		{api.EventAdded, api.KindService, "web"},
		{api.EventAdded, api.KindDeployment, "ops"},
	}, evs)
	// The selected stream's first line is the ops deployment.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	ev := decodeEvent(t, line)
	if ev.Object.Metadata.Name != "ops" {
		t.Errorf("selected watch's first event is %s/%s, want deployments/ops", ev.Object.Kind, ev.Object.Metadata.Name)
	}
}

func TestWatchCompacted(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := e.c.Create(ctx, deployment(n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	e.store.Compact(3)
	_, err := e.c.Watch(ctx, api.KindDeployment, 1)
	apiErr(t, err, http.StatusGone, "compacted")
	if _, err := e.c.Watch(ctx, api.KindDeployment, 3); err != nil {
		t.Errorf("watch from the compaction point: %v", err)
	}
}

func TestWatchRelist(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ch, err := e.c.Watch(ctx, api.KindDeployment, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.store.EndWatches()
	select {
	case ev := <-ch:
		if ev.Type != api.EventRelist {
			t.Errorf("event %s, want RELIST", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no RELIST event")
	}
	waitClosed(t, ch)
}

func TestWatchHeartbeat(t *testing.T) {
	e := newEnv(t, func(c *httpapi.Config) { c.Heartbeat = time.Millisecond })
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", e.srv.URL+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "\n" {
		t.Errorf("first line of an idle watch = %q, %v; want a blank heartbeat line", line, err)
	}
}
