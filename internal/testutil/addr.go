package testutil

import (
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"testing"
)

// TestIP is a loopback address of the test's own, 127.a.b.c from a hash of
// its name: a port FreeAddr found free there cannot be taken in the
// meantime by another package's test, nor by an outgoing connection from
// 127.0.0.1 (whose source ports come from the same ephemeral range).
func TestIP(t testing.TB) string {
	h := sha256.Sum256([]byte("herd-test/" + t.Name()))
	return fmt.Sprintf("127.%d.%d.%d", h[0]|1, h[1], h[2]%253+1)
}

var (
	givenMu sync.Mutex
	given   = map[string]bool{} // addresses FreeAddr has handed out
)

// FreeAddr returns TestIP:port for a port free there now for both TCP and
// UDP (gossip binds both), and never the same address twice in one process:
// the kernel may hand a just-closed port out again, and two agents of one
// test given the same port collide when they bind.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ip := TestIP(t)
	for range 100 {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		givenMu.Lock()
		seen := given[addr]
		given[addr] = true
		givenMu.Unlock()
		if !seen {
			return addr
		}
	}
	t.Fatalf("testutil: no free port on %s after 100 tries", ip)
	return ""
}
