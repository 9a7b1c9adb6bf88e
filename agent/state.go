package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/raftstore"
)

// clusterState is the controllers' and the placer's view of the cluster:
// the raftstore's objects plus gossip's members, served from a cache that
// is rebuilt when either changes. It is also their Writer: actions become
// raftstore transactions. Safe for concurrent use.
type clusterState struct {
	store  *raftstore.Store
	gossip *gossip.Gossip
	n      *notifier

	gen atomic.Uint64 // bumped by every observed change and every write

	mu        sync.Mutex
	cachedGen uint64
	cached    *controller.Cluster
	version   uint64
}

var (
	_ controller.State  = (*clusterState)(nil)
	_ controller.Writer = (*clusterState)(nil)
)

func newClusterState(store *raftstore.Store, g *gossip.Gossip, n *notifier) *clusterState {
	s := &clusterState{store: store, gossip: g, n: n}
	s.gen.Store(1)
	return s
}

// Snapshot implements controller.State.
func (s *clusterState) Snapshot(ctx context.Context) (*controller.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen.Load()
	if s.cached != nil && gen == s.cachedGen {
		return s.cached, nil
	}
	c := &controller.Cluster{}
	for _, k := range api.Kinds {
		raws, _, err := s.store.List(k)
		if err != nil {
			return nil, err
		}
		for _, r := range raws {
			o, err := api.FromRaw(r)
			if err != nil {
				return nil, fmt.Errorf("agent: stored %s/%s: %w", k, r.Metadata.Name, err)
			}
			switch o := o.(type) {
			case *api.Node:
				c.Nodes = append(c.Nodes, o)
			case *api.Deployment:
				c.Deployments = append(c.Deployments, o)
			case *api.Daemon:
				c.Daemons = append(c.Daemons, o)
			case *api.Pod:
				c.Pods = append(c.Pods, o)
			case *api.Service:
				c.Services = append(c.Services, o)
			}
		}
	}
	c.Members = memberInfos(s.gossip.Members())
	s.version++
	c.Version = s.version
	s.cached, s.cachedGen = c, gen
	return c, nil
}

func memberInfos(ms []gossip.Member) []controller.MemberInfo {
	out := make([]controller.MemberInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberInfo(m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func memberInfo(m gossip.Member) controller.MemberInfo {
	return controller.MemberInfo{
		Name:  m.Name,
		Addr:  m.Addr,
		State: controller.MemberState(m.State),
		Facts: controller.NodeFacts{
			RaftAddress: m.Meta.RaftAddr,
			SSHAddress:  m.Meta.SSHAddr,
			HostKey:     m.Meta.HostKey,
			Arch:        m.Meta.Arch,
			Model:       m.Meta.Model,
			MemoryBytes: m.Meta.MemoryBytes,
			CPUs:        m.Meta.CPUs,
			Version:     m.Meta.Version,
			Server:      m.Meta.Server,
			Labels:      m.Meta.Labels,
		},
	}
}

// Watch implements controller.State: store events and gossip member
// changes, as keys to look at.
func (s *clusterState) Watch(ctx context.Context) (<-chan controller.Change, error) {
	events, err := s.store.Watch(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	gossipCh, unsub := s.n.subscribe()
	out := make(chan controller.Change, 64)
	last := map[string]gossip.State{}
	for _, m := range s.gossip.Members() {
		last[m.Name] = m.State
	}
	go func() {
		defer close(out)
		defer unsub()
		send := func(c controller.Change) bool {
			select {
			case out <- c:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					return
				}
				s.gen.Add(1)
				if ev.Type == api.EventRelist {
					return // the Runner relists and watches again
				}
				o, err := api.FromRaw(ev.Object)
				if err != nil {
					continue
				}
				if !send(controller.Change{Kind: ev.Object.Kind, Name: ev.Object.Metadata.Name, Object: o}) {
					return
				}
			case <-gossipCh:
				s.gen.Add(1)
				now := map[string]gossip.State{}
				for _, m := range s.gossip.Members() {
					now[m.Name] = m.State
				}
				var changed []string
				for name, st := range now {
					if last[name] != st {
						changed = append(changed, name)
					}
				}
				for name := range last {
					if _, ok := now[name]; !ok {
						changed = append(changed, name)
					}
				}
				last = now
				sort.Strings(changed)
				if len(changed) == 0 {
					// Metadata changed (facts, labels): look at every node.
					changed = append(changed, "")
				}
				for _, name := range changed {
					c := controller.Change{Kind: api.KindNode, Name: name}
					if name == "" {
						c = controller.Change{}
					}
					if !send(c) {
						return
					}
				}
			}
		}
	}()
	return out, nil
}

// Apply implements controller.Writer: each of controller.Transactions is
// one raftstore transaction (a bind is the spec update and the status
// update together; a deployment's or daemon's pass is its deletes, creates
// and the status write that advances its pod counter). A write the store
// refuses as invalid is a controller.Terminal error.
func (s *clusterState) Apply(ctx context.Context, actions []controller.Action) error {
	for _, txn := range controller.Transactions(actions) {
		var ops []raftstore.Op
		for _, a := range txn {
			o, err := opsFor(a)
			if err != nil {
				return err
			}
			ops = append(ops, o...)
		}
		_, err := s.store.Txn(ctx, ops)
		s.gen.Add(1)
		what := txn[0].String()
		if len(txn) > 1 {
			what = fmt.Sprintf("transaction %s of %d actions (%s, ...)", txn[0].Txn, len(txn), what)
		}
		if errors.Is(err, raftstore.ErrInvalid) {
			// The store refused the write itself (too large, invalid):
			// retrying cannot help.
			return controller.Terminal(fmt.Errorf("agent: %s: %w", what, err))
		}
		if err != nil {
			return fmt.Errorf("agent: %s: %w", what, err)
		}
	}
	return nil
}

// opsFor maps an action to raftstore operations. A delete carries only the
// kind, name and resourceVersion, a status write those and the status: the
// store reads nothing else of them, and the reconcilers budget their
// transactions for it (controller.Writer).
func opsFor(a controller.Action) ([]raftstore.Op, error) {
	raw, err := api.ToRaw(a.Object)
	if err != nil {
		return nil, err
	}
	bare := api.RawObject{Kind: raw.Kind, Metadata: api.ObjectMeta{Name: raw.Metadata.Name, ResourceVersion: raw.Metadata.ResourceVersion}}
	switch a.Type {
	case controller.ActionCreate:
		return []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}, nil
	case controller.ActionUpdate:
		return []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}}, nil
	case controller.ActionUpdateStatus:
		bare.Status = raw.Status
		return []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: bare}}, nil
	case controller.ActionDelete:
		return []raftstore.Op{{Type: raftstore.OpDelete, Object: bare}}, nil
	case controller.ActionBind:
		status := raw
		status.Metadata.ResourceVersion = 0 // follows the update in the same txn
		return []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}, {Type: raftstore.OpUpdateStatus, Object: status}}, nil
	}
	return nil, fmt.Errorf("agent: unknown action type %q", a.Type)
}
