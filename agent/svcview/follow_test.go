package svcview

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// writeView writes v to path the way the board helper does: a temporary
// file renamed over it.
func writeView(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func endpoints(f *Feed, service string) int {
	v, _, _ := f.Current()
	for _, s := range v.Services {
		if s.Metadata.Name == service {
			return len(s.Status.Endpoints)
		}
	}
	return -1
}

func TestFollowFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run", "services.json")
	ep := api.Endpoint{Port: "http", Pod: "web-a", Node: "b1", Address: "10.0.0.1:20001"}
	// A view already there when the agent starts is read at once.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeView(t, path, Build([]*api.Service{svc("web", ep)}, nil).Encode())

	f := NewFeed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- FollowFile(ctx, path, f, testutil.Logger(t)) }()
	testutil.Until(t, 10*time.Second, "the view present at start", func() bool { return endpoints(f, "web") == 1 })

	writeView(t, path, Build([]*api.Service{svc("web", ep, ep)}, nil).Encode())
	testutil.Until(t, 10*time.Second, "the renamed view", func() bool { return endpoints(f, "web") == 2 })

	// A file that does not decode keeps the last view; a good one after
	// it is read. Another file in the folder changes nothing.
	writeView(t, path, []byte("{garbage"))
	if err := os.WriteFile(filepath.Join(dir, "run", "other"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeView(t, path, Build([]*api.Service{svc("web")}, nil).Encode())
	testutil.Until(t, 10*time.Second, "the view after a bad one", func() bool { return endpoints(f, "web") == 0 })

	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("FollowFile = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FollowFile did not return after cancel")
	}
}

func TestFollowStore(t *testing.T) {
	store := raftstore.NewMemStore(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := NewFeed()
	go FollowStore(ctx, store, f, testutil.Logger(t))
	testutil.Until(t, 10*time.Second, "the first (empty) view", func() bool { _, _, ok := f.Current(); return ok })

	raw := func(o api.Object) api.RawObject {
		r, err := api.ToRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s := svc("web", api.Endpoint{Port: "http", Pod: "web-a", Node: "b1", Address: "10.0.0.1:20001"})
	if _, err := store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpCreate, Object: raw(s)},
		{Type: raftstore.OpCreate, Object: raw(node("b1", "10.0.0.1", api.NodeReady, false))}}); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, "the service and node in the view", func() bool {
		v, _, _ := f.Current()
		return endpoints(f, "web") == 1 && len(v.Nodes) == 1
	})
}
