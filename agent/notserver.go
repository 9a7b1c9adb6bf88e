package agent

import (
	"context"
	"errors"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// errNotServer is what a gossip-only agent's API answers for state: it
// holds no copy of it.
var errNotServer = errors.Join(raftstore.ErrNoLeader, errors.New("agent: this agent is not a server (server = false) and holds no state; point herdctl at a server"))

// notServerStore stands in for the raftstore on a gossip-only agent.
type notServerStore struct{}

func (notServerStore) ReadBarrier(context.Context) error { return errNotServer }
func (notServerStore) Get(api.Kind, string) (api.RawObject, error) {
	return api.RawObject{}, errNotServer
}
func (notServerStore) List(api.Kind) ([]api.RawObject, uint64, error) {
	return nil, 0, errNotServer
}
func (notServerStore) Txn(context.Context, []raftstore.Op) ([]api.RawObject, error) {
	return nil, errNotServer
}
func (notServerStore) Watch(context.Context, api.Kind, uint64) (<-chan api.WatchEvent, error) {
	return nil, errNotServer
}
func (notServerStore) IsLeader() bool            { return false }
func (notServerStore) Leader() (id, addr string) { return "", "" }
