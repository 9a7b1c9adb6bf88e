package raftstore

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/internal/testutil"
)

func TestPendingConnsLimits(t *testing.T) {
	p := newPendingConns()
	stranger := netip.MustParseAddr("192.0.2.1")
	for i := range maxPendingPerStranger {
		if why := p.admit(stranger); why != "" {
			t.Fatalf("stranger connection %d refused: %s", i, why)
		}
	}
	if why := p.admit(stranger); why == "" {
		t.Fatalf("stranger got connection %d, over the per-source cap %d", maxPendingPerStranger+1, maxPendingPerStranger)
	}
	// Many strangers together get maxPendingStrangers slots, no more.
	admitted := maxPendingPerStranger
	for i := 2; i < 100; i++ {
		src := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		for range maxPendingPerStranger {
			if p.admit(src) == "" {
				admitted++
			}
		}
	}
	if admitted != maxPendingStrangers {
		t.Errorf("strangers got %d slots, want %d", admitted, maxPendingStrangers)
	}
	// A known server still gets its slots, up to its own cap.
	peer := netip.MustParseAddr("10.0.0.1")
	p.markKnown(peer)
	for i := range maxPendingPerKnown {
		if why := p.admit(peer); why != "" {
			t.Fatalf("known peer connection %d refused: %s", i, why)
		}
	}
	if why := p.admit(peer); why == "" {
		t.Errorf("known peer got connection %d, over the per-source cap %d", maxPendingPerKnown+1, maxPendingPerKnown)
	}
	// A stranger that proves itself (completes a handshake) moves its
	// pending connections out of the strangers' share.
	p.markKnown(stranger)
	total, strangers, from := p.counts(stranger)
	if want := maxPendingStrangers + maxPendingPerKnown; total != want || strangers != maxPendingStrangers-maxPendingPerStranger || from != maxPendingPerStranger {
		t.Errorf("after markKnown: total %d strangers %d from source %d, want %d %d %d", total, strangers, from, want, maxPendingStrangers-maxPendingPerStranger, maxPendingPerStranger)
	}
	for range maxPendingPerStranger {
		p.release(stranger)
	}
	p.release(peer)
	if total, strangers, from := p.counts(stranger); total != maxPendingStrangers+maxPendingPerKnown-maxPendingPerStranger-1 || strangers != maxPendingStrangers-maxPendingPerStranger || from != 0 {
		t.Errorf("after release: total %d strangers %d from source %d", total, strangers, from)
	}
}

// floodSources are loopback addresses other than 127.0.0.1 (which the
// test cluster uses): on Linux all of 127.0.0.0/8 is local and each is a
// distinct source.
func floodSources(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)})
	}
	return out
}

// TestMuxKeylessFloodDoesNotStarveServers opens idle TCP connections from
// many keyless sources to the leader and shows that the per-source and
// strangers' caps hold, that followers' forwarded writes and new Raft
// connections still get through, and that the idle connections are
// dropped at the first-message deadline.
func TestMuxKeylessFloodDoesNotStarveServers(t *testing.T) {
	const deadline = 6 * time.Second
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 3, Configure: func(_ int, cfg *Config) { cfg.HandshakeTimeout = deadline }})
	leader := c.Stores[c.Leader()]
	follower := c.Stores[c.Follower()]
	addr := leader.Addr()

	sources := floodSources(20)
	var flood []net.Conn
	t.Cleanup(func() {
		for _, fc := range flood {
			fc.Close()
		}
	})
	for _, src := range sources {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		for range 2 * maxPendingPerStranger {
			fc, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("flood dial from %s: %v", src, err)
			}
			flood = append(flood, fc)
		}
	}
	// The accept loop sees every flood connection: most are refused, the
	// strangers' share is full.
	testutil.Until(t, 10*time.Second, "the strangers' share of pending slots to fill", func() bool {
		_, strangers, _ := leader.mux.pending.counts(netip.Addr{})
		return strangers == maxPendingStrangers
	})
	for _, src := range sources {
		if _, _, from := leader.mux.pending.counts(src); from > maxPendingPerStranger {
			t.Errorf("%s holds %d pending connections, over the cap %d", src, from, maxPendingPerStranger)
		}
	}

	// While the flood holds its slots, servers still get through: a
	// forwarded write (a new connection per request) and a new Raft
	// connection.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), deadline/2)
	defer cancel()
	if _, err := follower.Txn(ctx, []Op{op(OpCreate, deployment("during-flood", `{}`))}); err != nil {
		t.Fatalf("forwarded write during the flood: %v", err)
	}
	rc, err := follower.mux.Dial(raft.ServerAddress(addr), deadline/2)
	if err != nil {
		t.Fatalf("raft connection during the flood: %v", err)
	}
	rc.Close()
	if _, strangers, _ := leader.mux.pending.counts(netip.Addr{}); strangers == 0 {
		t.Fatalf("the flood was gone before the writes were tried (%s): the test proves nothing", time.Since(start))
	}

	// Idle connections are dropped at the first-message deadline: each
	// sees end of stream, well before its own read deadline.
	buf := make([]byte, 1)
	for _, fc := range flood {
		_ = fc.SetReadDeadline(time.Now().Add(3 * deadline))
		_, err := fc.Read(buf)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("flood connection from %s: read = %v, want it closed by the server", fc.LocalAddr(), err)
		}
	}
	testutil.Until(t, 5*time.Second, "no pending connections left", func() bool {
		total, _, _ := leader.mux.pending.counts(netip.Addr{})
		return total == 0
	})
}
