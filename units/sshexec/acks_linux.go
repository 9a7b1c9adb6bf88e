//go:build linux

package sshexec

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// newAckClock returns an ackClock for nc when nc is a TCP connection whose
// kernel reports TCP_INFO, else nil (a pipe in a test, a tunnel, an
// emulator such as qemu-user that hands back an empty TCP_INFO).
func newAckClock(nc net.Conn) *ackClock {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	a := &ackClock{read: func() (acks, bool) { return readAcks(raw) }}
	if _, ok := a.read(); !ok {
		return nil
	}
	return a
}

// readAcks reads TCP_INFO of raw's socket. An established connection's
// retransmission timeout is never 0 (Linux's floor is 200 ms), so an
// all-zero answer means the kernel did not fill it in.
func readAcks(raw syscall.RawConn) (acks, bool) {
	var info *unix.TCPInfo
	var err error
	if cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil || info.Rto == 0 {
		return acks{}, false
	}
	return acks{unacked: int(info.Unacked), lastAck: time.Duration(info.Last_ack_recv) * time.Millisecond}, true
}
