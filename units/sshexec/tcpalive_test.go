package sshexec

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

func TestTCPInfoSilence(t *testing.T) {
	const ms = time.Millisecond
	idle := time.Second
	tests := []struct {
		name string
		info tcpInfo
		want time.Duration
	}{
		{"quiet, nothing out", tcpInfo{sinceAck: 900 * ms, sinceDataOut: 900 * ms}, 0},
		{"a probe just sent", tcpInfo{probes: 1, sinceAck: 1000 * ms}, 0},
		{"a probe unanswered for 400ms", tcpInfo{probes: 1, sinceAck: 1400 * ms}, 400 * ms},
		{"three probes unanswered", tcpInfo{probes: 3, sinceAck: 3500 * ms}, 2500 * ms},
		{"data just sent after a long quiet", tcpInfo{unacked: 2, sinceAck: 30 * time.Second, sinceDataOut: 2 * ms}, 2 * ms},
		{"data unacknowledged for 600ms", tcpInfo{unacked: 1, sinceAck: 800 * ms, sinceDataOut: 600 * ms}, 600 * ms},
		{"data sent, an earlier ACK recent", tcpInfo{unacked: 1, sinceAck: 10 * ms, sinceDataOut: 50 * ms}, 10 * ms},
		{"a probe and data out", tcpInfo{probes: 1, unacked: 1, sinceAck: 1700 * ms, sinceDataOut: 300 * ms}, 700 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.info.silence(idle); got != tt.want {
				t.Errorf("silence(%+v) = %v, want %v", tt.info, got, tt.want)
			}
		})
	}
}

// On a TCP connection the kernel's keepalives are on: once the
// connection is quiet the kernel sends probes, the peer's kernel answers
// them, and the connection never reads as silent meanwhile.
func TestKernelKeepaliveOnTCP(t *testing.T) {
	if !haveTCPInfo {
		t.Skip("no TCP_INFO on this platform")
	}
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) { c.KeepaliveInterval = 100 * time.Millisecond }) // the kernel makes it 1 s
	if _, err := e.Run(testCtx(t), "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	c := e.nodes["b1"].live()
	e.mu.Unlock()
	if c == nil || c.tcp == nil {
		t.Fatal("the pooled connection has no kernel keepalives")
	}
	if c.tcp.idle != time.Second {
		t.Errorf("keepalive idle %v, want 100ms rounded up to the kernel's 1s", c.tcp.idle)
	}
	// The host's count of keepalive probes sent (this test's connection
	// sends one a second while quiet; others may add to it).
	start := keepalivesSent(t)
	waitFor(t, "two kernel keepalive probes", 20*time.Second, func() bool {
		if s := e.Silence("b1"); s > 300*time.Millisecond {
			t.Fatalf("Silence of a peer whose kernel answers = %v", s)
		}
		return keepalivesSent(t) >= start+2
	})
}

// keepalivesSent reads TcpExt TCPKeepAlive from /proc/net/netstat.
func keepalivesSent(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		t.Skipf("no /proc/net/netstat: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "TCPKeepAlive" && i < len(f) {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Skip("no TCPKeepAlive counter in /proc/net/netstat")
	return 0
}
