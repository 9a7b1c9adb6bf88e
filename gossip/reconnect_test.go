package gossip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// partition cuts one address off from everyone while cut is set: packets
// and dials to it, and from the node that owns it, go nowhere.
type partition struct {
	cut    atomic.Bool
	victim atomic.Value // string: the cut-off node's address
}

func (p *partition) blocks(self bool, to string) bool {
	if !p.cut.Load() {
		return false
	}
	v, _ := p.victim.Load().(string)
	return self || to == v
}

type partitionTransport struct {
	memberlist.NodeAwareTransport
	p    *partition
	self func() bool // whether this node is the cut-off one
}

func (t *partitionTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.p.blocks(t.self(), addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *partitionTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.p.blocks(t.self(), addr.Addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

func (t *partitionTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.p.blocks(t.self(), addr) {
		return nil, errors.New("partition: unreachable")
	}
	return t.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (t *partitionTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.p.blocks(t.self(), addr.Addr) {
		return nil, errors.New("partition: unreachable")
	}
	return t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
}

func TestReconnectHealsPartition(t *testing.T) {
	key := newKey(t)
	p := &partition{}
	var nodes []*Gossip
	for i := range 3 {
		cfg := testConfig(t, fmt.Sprintf("n%d", i), key)
		// memberlist keeps gossiping to a dead member for
		// GossipToTheDeadTime, which can heal a short partition by
		// itself; make it short so that only Reconnect can.
		cfg.Timing.GossipToTheDeadTime = 300 * time.Millisecond
		isVictim := i == 2
		cfg.wrapTransport = func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			return &partitionTransport{NodeAwareTransport: nt, p: p, self: func() bool { return isVictim }}
		}
		if i > 0 {
			cfg.Join = []string{nodes[0].LocalMember().Address()}
		}
		g := startNode(t, cfg)
		if i > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), joinWithin)
			if _, err := g.Join(ctx, nil); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		nodes = append(nodes, g)
	}
	waitAllAlive(t, nodes)
	p.victim.Store(nodes[2].LocalMember().Address())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, g := range nodes {
		go g.Reconnect(ctx)
	}

	stateOf := func(g *Gossip, name string) api.MemberState {
		for _, m := range g.Members() {
			if m.Name == name {
				return m.State
			}
		}
		return ""
	}
	p.cut.Store(true)
	testutil.Eventually(t, 10*time.Second, "gossip to agree", func() error {
		if s := stateOf(nodes[0], "n2"); s != api.MemberDead {
			return errors.New("n0 sees n2 " + string(s))
		}
		if s := stateOf(nodes[2], "n0"); s != api.MemberDead {
			return errors.New("n2 sees n0 " + string(s))
		}
		return nil
	})
	// Stay cut until gossip to the dead has stopped on both sides.
	time.Sleep(3 * nodes[0].cfg.Timing.GossipToTheDeadTime) // lets memberlist's own window lapse; not synchronisation
	p.cut.Store(false)
	waitAllAlive(t, nodes)
}
