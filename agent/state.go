package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

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
	decoded   map[objectKey]decoded // the objects of cached, by kind and name

	// started is when this leader term's state began: a member already
	// dead then counts as down since started (a new leader witnesses it
	// afresh before its pods are lost).
	started time.Time
	// wmu guards witnesses and witnessSubs.
	wmu sync.Mutex
	// witnesses holds the placer's latest SSH witness of each board.
	witnesses   map[string]controller.Witness
	witnessSubs map[chan string]struct{}
}

var (
	_ controller.State  = (*clusterState)(nil)
	_ controller.Writer = (*clusterState)(nil)
)

func newClusterState(store *raftstore.Store, g *gossip.Gossip, n *notifier) *clusterState {
	s := &clusterState{store: store, gossip: g, n: n, started: time.Now(),
		witnesses: map[string]controller.Witness{}, witnessSubs: map[chan string]struct{}{}}
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
	c, err := s.snapshotObjects()
	if err != nil {
		return nil, err
	}
	ms := s.gossip.Members()
	c.Members = s.witnessed(memberInfos(ms), ms)
	s.version++
	c.Version = s.version
	s.cached, s.cachedGen = c, gen
	return c, nil
}

// snapshotObjects reads every stored object into a new Cluster. An object
// whose resourceVersion is the one the last snapshot decoded is taken from
// that snapshot instead of being decoded again: snapshots are never
// modified (controller.State), so two snapshots may share an object, and a
// status write costs the next snapshot one decode, not one per object.
// Called with s.mu held.
func (s *clusterState) snapshotObjects() (*controller.Cluster, error) {
	c := &controller.Cluster{}
	next := make(map[objectKey]decoded, len(s.decoded))
	for _, k := range api.Kinds {
		raws, _, err := s.store.List(k)
		if err != nil {
			return nil, err
		}
		for _, r := range raws {
			key := objectKey{k, r.Metadata.Name}
			d, ok := s.decoded[key]
			if !ok || d.rv != r.Metadata.ResourceVersion {
				o, err := api.FromRaw(r)
				if err != nil {
					return nil, fmt.Errorf("agent: stored %s/%s: %w", k, r.Metadata.Name, err)
				}
				d = decoded{rv: r.Metadata.ResourceVersion, obj: o}
			}
			next[key] = d
			c.Add(d.obj)
		}
	}
	s.decoded = next
	return c, nil
}

// objectKey names a stored object.
type objectKey struct {
	kind api.Kind
	name string
}

// decoded is a stored object as the last snapshot decoded it.
type decoded struct {
	rv  uint64
	obj api.Object
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
		State: m.State,
		Facts: controller.NodeFacts{
			BoardFacts:  m.Meta.BoardFacts,
			RaftAddress: m.Meta.RaftAddr,
			SSHAddress:  m.Meta.SSHAddr,
			HostKey:     m.Meta.HostKey,
			Version:     m.Meta.Version,
			Server:      m.Meta.Server,
			Labels:      m.Meta.Labels,
		},
	}
}

// witnessed sets DownSince and Witness on every member gossip does not
// call alive (ms: the same members, by name, for their Since).
func (s *clusterState) witnessed(infos []controller.MemberInfo, ms []gossip.Member) []controller.MemberInfo {
	since := make(map[string]time.Time, len(ms))
	for _, m := range ms {
		since[m.Name] = m.Since
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for i := range infos {
		m := &infos[i]
		if m.State == api.MemberAlive {
			continue
		}
		m.DownSince = since[m.Name]
		if m.DownSince.Before(s.started) {
			m.DownSince = s.started
		}
		m.Witness = s.witnesses[m.Name]
	}
	return infos
}

// recordWitness is the placer's Config.RecordWitness: it keeps the latest
// witness of node (with the time of the last success, OKAt) for the node
// controller and wakes node's key.
func (s *clusterState) recordWitness(node string, w controller.Witness) {
	s.wmu.Lock()
	if w.Err == "" {
		w.OKAt = w.At
	} else {
		w.OKAt = s.witnesses[node].OKAt
	}
	s.witnesses[node] = w
	s.gen.Add(1)
	for ch := range s.witnessSubs {
		select {
		case ch <- node:
		default: // full: the watcher's next tick looks again
		}
	}
	s.wmu.Unlock()
}

// witnessTick is how often Watch wakes the nodes whose witness is awaited
// or may go stale, so controller.WitnessGrace is enforced even when no
// witness comes (no SSH, a stuck check).
const witnessTick = time.Second

// awaitingWitness returns the members not alive for which a verdict may
// still change with time alone: down for at most twice WitnessGrace, or
// with a successful witness at most that old.
func (s *clusterState) awaitingWitness(now time.Time) []string {
	ms := s.gossip.Members()
	infos := s.witnessed(memberInfos(ms), ms)
	var out []string
	for _, m := range infos {
		if m.State != api.MemberDead {
			continue
		}
		okRecent := !m.Witness.OKAt.IsZero() && now.Sub(m.Witness.OKAt) <= 2*controller.WitnessGrace
		if now.Sub(m.DownSince) <= 2*controller.WitnessGrace || okRecent {
			out = append(out, m.Name)
		}
	}
	return out
}

// witnessTicker ticks every witnessTick while gossip calls a member dead:
// with none, no witness is awaited and nothing changes with time alone.
type witnessTicker struct {
	*time.Ticker
	on bool
}

func newWitnessTicker(states map[string]api.MemberState) *witnessTicker {
	t := &witnessTicker{Ticker: time.NewTicker(witnessTick), on: true}
	t.pace(states)
	return t
}

// pace starts or stops the ticks for the members' states.
func (t *witnessTicker) pace(states map[string]api.MemberState) {
	if dead := anyDead(states); dead != t.on {
		t.on = dead
		if dead {
			t.Reset(witnessTick)
		} else {
			t.Stop()
		}
	}
}

// anyDead reports whether gossip calls any member dead: only then may a
// witness be awaited (awaitingWitness).
func anyDead(states map[string]api.MemberState) bool {
	for _, st := range states {
		if st == api.MemberDead {
			return true
		}
	}
	return false
}

// Watch implements controller.State: store events and gossip member
// changes, as keys to look at; witnesses recorded by the placer, and
// every witnessTick the nodes awaiting one, as their nodes' keys.
func (s *clusterState) Watch(ctx context.Context) (<-chan controller.Change, error) {
	events, err := s.store.Watch(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	gossipCh, unsub := s.n.subscribe()
	witnessCh := make(chan string, 64)
	s.wmu.Lock()
	s.witnessSubs[witnessCh] = struct{}{}
	// Witnesses taken before this watch began (a new leader's placer
	// witnesses a dead board while its controllers make their first
	// pass, before they watch) are news to it: their nodes are looked at
	// again now, not at the next tick or witness, a second later.
	for node := range s.witnesses {
		select {
		case witnessCh <- node:
		default: // full: the tick looks again
		}
	}
	s.wmu.Unlock()
	out := make(chan controller.Change, 64)
	last := gossip.States(s.gossip.Members())
	tick := newWitnessTicker(last)
	go func() {
		defer close(out)
		defer unsub()
		defer tick.Stop()
		defer func() {
			s.wmu.Lock()
			delete(s.witnessSubs, witnessCh)
			s.wmu.Unlock()
		}()
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
			case node := <-witnessCh:
				if !send(controller.Change{Kind: api.KindNode, Name: node}) {
					return
				}
			case now := <-tick.C:
				for _, node := range s.awaitingWitness(now) {
					if !send(controller.Change{Kind: api.KindNode, Name: node}) {
						return
					}
				}
			case <-gossipCh:
				s.gen.Add(1)
				now := gossip.States(s.gossip.Members())
				changed := gossip.StateChanges(last, now)
				last = now
				tick.pace(last)
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
