package httpapi

import (
	"context"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// Store is the object store behind the API; *raftstore.Store satisfies it.
//
// All methods must be safe for concurrent use by many requests. Get and List
// may serve local (possibly slightly stale) state; after ReadBarrier
// returns they reflect every write acknowledged anywhere before it was
// called (it fails with errors wrapping raftstore.ErrNoLeader when no
// leader confirms itself in time, ErrClosed when closed). Txn applies all ops
// atomically or none, returns the stored object of every op in op order, and
// fails with errors that wrap the raftstore sentinels (ErrNotFound,
// ErrExists, ErrConflict, ErrNoLeader, ...). Watch delivers events with a
// resourceVersion greater than fromRV (0: from now on) for kind ("" for all
// kinds) until ctx ends, and closes the channel when it ends the stream,
// sending an api.EventRelist event first when the watcher must list again.
type Store interface {
	ReadBarrier(ctx context.Context) error
	Get(kind api.Kind, name string) (api.RawObject, error)
	List(kind api.Kind) ([]api.RawObject, uint64, error)
	Txn(ctx context.Context, ops []raftstore.Op) ([]api.RawObject, error)
	Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error)
	IsLeader() bool
	Leader() (id, addr string)
}

var _ Store = (*raftstore.Store)(nil)
