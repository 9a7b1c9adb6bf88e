package sshexec

import (
	"net"
	"syscall"
	"time"
)

// Kernel keepalives.
//
// On a TCP connection the executor leaves the quick liveness check to the
// kernel: TCP keepalive probes after KeepaliveInterval without anything
// received, then every KeepaliveInterval, the connection reset after
// KeepaliveMax unanswered. The board's kernel answers them, so no process
// on either side wakes for them (an SSH keepalive costs the leader's
// process and the board's sshd a wake-up each, several goroutine
// switches and a round of encryption; a fleet's leader sent one to every
// board every second). Silence reads the socket's TCP_INFO: an
// unanswered probe, or data sent and not acknowledged, says how long the
// board has been silent. keepalive@openssh.com requests still go, every
// SSHKeepaliveInterval, to notice an sshd that stopped answering while
// its kernel did not.

// tcpAlive is a connection's view of its kernel's keepalives.
type tcpAlive struct {
	raw  syscall.RawConn
	idle time.Duration // the keepalive idle time and interval
}

// kernelKeepalive turns the kernel's keepalives on for nc and returns
// them, or nil when nc is not a TCP connection or the platform gives no
// TCP_INFO (the executor then sends SSH keepalives every
// KeepaliveInterval, as before).
func kernelKeepalive(nc net.Conn, interval time.Duration, count int) *tcpAlive {
	tc, ok := nc.(*net.TCPConn)
	if !ok || !haveTCPInfo {
		return nil
	}
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: interval, Interval: interval, Count: count}); err != nil {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	// The kernel counts whole seconds; Go rounds up.
	return &tcpAlive{raw: raw, idle: (interval + time.Second - 1).Truncate(time.Second)}
}

// silence is how long the peer has left the connection unanswered,
// read from the socket now; 0 when nothing is outstanding or the socket
// cannot be read.
func (t *tcpAlive) silence() time.Duration {
	var (
		info tcpInfo
		err  error
	)
	if cerr := t.raw.Control(func(fd uintptr) { info, err = readTCPInfo(fd) }); cerr != nil || err != nil {
		return 0
	}
	return info.silence(t.idle)
}

// tcpInfo is what silence needs of a socket's TCP_INFO.
type tcpInfo struct {
	probes       int           // keepalive (or window) probes sent since the last ACK
	unacked      int           // segments sent and not acknowledged
	sinceAck     time.Duration // since the last ACK received
	sinceDataOut time.Duration // since new data was last sent
}

// silence is the pure reading of a TCP_INFO. A probe goes once nothing
// has come for idle, so with probes out the silence is the time since the
// last ACK less idle; with data unacknowledged, since it was sent (or
// since the last ACK, when that is more recent: data sent after a long
// quiet is answered within a round trip). A healthy LAN peer ACKs within
// a round trip plus the delayed-ACK time (≤ 40 ms on Linux).
func (i tcpInfo) silence(idle time.Duration) time.Duration {
	var s time.Duration
	if i.probes > 0 {
		s = i.sinceAck - idle
	}
	if i.unacked > 0 {
		s = max(s, min(i.sinceAck, i.sinceDataOut))
	}
	return max(0, s)
}
