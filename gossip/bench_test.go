package gossip

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

var (
	soakTime = flag.Duration("gossip.soak", 30*time.Second, "how long BenchmarkLANLoss runs the lossy cluster")
	soakLoss = flag.Float64("gossip.loss", 0.10, "UDP packet loss of BenchmarkLANLoss (TCP dials fail 3x as often)")
)

func BenchmarkEncodeMeta(b *testing.B) {
	m := fullMeta()
	for b.Loop() {
		if _, err := EncodeMeta(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMeta(b *testing.B) {
	enc, err := EncodeMeta(fullMeta())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := DecodeMeta(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBootstrapPeers50(b *testing.B) {
	var members []Member
	for i := range 50 {
		if i < 5 {
			members = append(members, server(fmt.Sprintf("s%02d", i), 3))
		} else {
			members = append(members, worker(fmt.Sprintf("w%02d", i)))
		}
	}
	for b.Loop() {
		if _, ok, err := BootstrapPeers("s00", 3, members); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkEventQueuePush(b *testing.B) {
	q := newEventQueue(64)
	go q.run()
	defer q.close()
	go func() {
		for range q.out {
		}
	}()
	ev := Event{Type: EventUpdate, Member: Member{Name: "a"}}
	for b.Loop() {
		q.push(ev)
	}
}

// lossyTransport drops outgoing UDP packets with probability loss and fails
// TCP dials with probability dialLoss, standing in for a lossy link (a
// dropped SYN or segment costs TCP a retransmit of 200 ms to 1 s, longer
// than what a failure-detection probe has left).
type lossyTransport struct {
	memberlist.NodeAwareTransport
	loss, dialLoss float64
	mu             sync.Mutex
	rnd            *rand.Rand
}

func (t *lossyTransport) drop(p float64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rnd.Float64() < p
}

func (t *lossyTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.drop(t.loss) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *lossyTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.drop(t.loss) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

var errDialDropped = errors.New("lossy: dial dropped")

func (t *lossyTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.drop(t.dialLoss) {
		return nil, errDialDropped
	}
	return t.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (t *lossyTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.drop(t.dialLoss) {
		return nil, errDialDropped
	}
	return t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
}

// countingHandler counts memberlist's suspicion and refutation messages
// (which it logs at debug level) and passes records on to next.
type countingHandler struct {
	next               slog.Handler
	suspected, refutes *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case strings.HasPrefix(r.Message, "Suspect ") && strings.Contains(r.Message, "has failed"):
		h.suspected.Add(1)
	case strings.HasPrefix(r.Message, "Refuting a suspect"):
		h.refutes.Add(1)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.next = h.next.WithAttrs(as)
	return h
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}

// lanSuspected and lanRefutes count suspicions and refutations of lanNodes.
var lanSuspected, lanRefutes atomic.Int64

// lanNode starts a loopback node with the LAN timings (not the fast local
// ones), optionally over a lossy transport.
func lanNode(b *testing.B, name string, key []byte, loss float64, seed uint64) *Gossip {
	b.Helper()
	cfg := DefaultLANConfig()
	cfg.Name = name
	cfg.Key = key
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Meta = testMeta(name)
	cfg.Logger = slog.New(countingHandler{next: newTestLogger(b).Handler(), suspected: &lanSuspected, refutes: &lanRefutes})
	if loss > 0 {
		cfg.wrapTransport = func(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			return &lossyTransport{NodeAwareTransport: t, loss: loss, dialLoss: 3 * loss, rnd: rand.New(rand.NewPCG(seed, 42))}
		}
	}
	g, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Shutdown() })
	return g
}

func joinTo(b *testing.B, g, seed *Gossip) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := g.Join(ctx, []string{seed.LocalMember().Address()}); err != nil {
		b.Fatal(err)
	}
}

// detect shuts victim down and returns how long until every survivor has
// seen a fail event for it.
func detect(b *testing.B, survivors []*Gossip, victim *Gossip) time.Duration {
	b.Helper()
	name := victim.LocalMember().Name
	start := time.Now()
	_ = victim.Shutdown()
	b.Logf("%s stopped at %s (shutdown took %v)", name, start.Format("15:04:05.000"), time.Since(start))
	for _, g := range survivors {
		waitEvent(b, g, 30*time.Second, func(ev Event) bool {
			return ev.Type == EventFail && ev.Member.Name == name
		})
	}
	return time.Since(start)
}

func drain(g *Gossip) {
	for {
		select {
		case <-g.Events():
		default:
			return
		}
	}
}

func reportDetect(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(ds)), "ms-detect-mean")
	b.ReportMetric(float64(ds[len(ds)-1].Milliseconds()), "ms-detect-max")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDetectLAN measures, with the LAN preset on loopback, the time
// from a node's abrupt stop (no leave) until all four others report it
// failed. Each iteration adds a fresh victim to a 4-node cluster.
func BenchmarkDetectLAN(b *testing.B) {
	key := newKey(b)
	var survivors []*Gossip
	for i := range 4 {
		g := lanNode(b, fmt.Sprintf("s%d", i), key, 0, 0)
		if i > 0 {
			joinTo(b, g, survivors[0])
		}
		survivors = append(survivors, g)
	}
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		victim := lanNode(b, fmt.Sprintf("victim%d", i), key, 0, 0)
		joinTo(b, victim, survivors[0])
		testutil.Eventually(b, 30*time.Second, "gossip to agree", func() error {
			for _, g := range survivors {
				if memberState(g, victim.LocalMember().Name) != api.MemberAlive {
					return errors.New(states(g))
				}
			}
			return nil
		})
		for _, g := range survivors {
			drain(g)
		}
		ds = append(ds, detect(b, survivors, victim))
	}
	reportDetect(b, ds)
}

// BenchmarkLANLoss runs 5 nodes with the LAN preset over a link that drops
// -gossip.loss (10%) of UDP packets and three times that share of TCP dials
// for -gossip.soak, counts members falsely suspected and falsely declared
// dead, then measures detection of a real stop under the same loss.
func BenchmarkLANLoss(b *testing.B) {
	for b.Loop() {
		key := newKey(b)
		var nodes []*Gossip
		for i := range 5 {
			g := lanNode(b, fmt.Sprintf("l%d", i), key, *soakLoss, uint64(i+1))
			if i > 0 {
				joinTo(b, g, nodes[0])
			}
			nodes = append(nodes, g)
		}
		testutil.Eventually(b, 30*time.Second, "gossip to agree", func() error {
			for _, g := range nodes {
				if g.NumMembers() != len(nodes) {
					return errors.New(states(g))
				}
			}
			return nil
		})
		for _, g := range nodes {
			drain(g)
		}
		lanSuspected.Store(0)
		lanRefutes.Store(0)
		falseDeaths := 0
		end := time.After(*soakTime)
	soak:
		for {
			select {
			case <-end:
				break soak
			default:
			}
			for _, g := range nodes {
				select {
				case ev := <-g.Events():
					if ev.Type == EventFail || ev.Type == EventLeave {
						falseDeaths++
						b.Logf("false death: %s saw %s %s", g.LocalMember().Name, ev.Member.Name, ev.Type)
					}
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		b.ReportMetric(float64(falseDeaths), "false-deaths")
		b.ReportMetric(float64(lanSuspected.Load()), "false-suspicions")
		b.ReportMetric(float64(lanRefutes.Load()), "refutes")
		d := detect(b, nodes[:4], nodes[4])
		b.ReportMetric(float64(d.Milliseconds()), "ms-detect-under-loss")
		b.ReportMetric(0, "ns/op")
		for _, g := range nodes {
			_ = g.Shutdown()
		}
	}
}
