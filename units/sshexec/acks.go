package sshexec

import (
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// acks is what the kernel says of a TCP connection's sent data: how many
// segments are still unacknowledged, and how long ago the last
// acknowledgement arrived.
type acks struct {
	unacked int
	lastAck time.Duration
}

// ackClock measures a board's silence from the kernel's TCP
// acknowledgements of what the executor sent (TCP_INFO, Linux) instead of
// from SSH replies: a board whose kernel still acknowledges is reachable,
// and a keepalive that wants no reply wakes nothing on its way back.
type ackClock struct {
	// read returns the connection's acks; false when the kernel would not
	// say.
	read func() (acks, bool)
	// since is when the first byte still possibly unacknowledged was
	// written (UnixNano): set by a write that found nothing outstanding.
	since atomic.Int64
}

// wrote notes a write about to go out at now: it starts the wait unless
// earlier data is still unacknowledged (then the wait began with that).
func (a *ackClock) wrote(now time.Time) {
	if s, ok := a.read(); !ok || s.unacked == 0 || a.since.Load() == 0 {
		a.since.Store(now.UnixNano())
	}
}

// silence is how long, at now, the peer has left data unacknowledged: 0
// when everything sent was acknowledged (or the kernel would not say).
func (a *ackClock) silence(now time.Time) time.Duration {
	s, ok := a.read()
	if !ok {
		return 0
	}
	return ackSilence(s, a.since.Load(), now)
}

// ackSilence is the silence of a connection in state s whose oldest
// unacknowledged write began at since (UnixNano, 0 for none): the time
// since that write, but no more than the time since the peer last
// acknowledged anything (a peer acknowledging a long transfer piece by
// piece is not silent).
func ackSilence(s acks, since int64, now time.Time) time.Duration {
	if s.unacked == 0 || since == 0 {
		return 0
	}
	return max(0, min(now.Sub(time.Unix(0, since)), s.lastAck))
}

// ackedConn is a connection whose writes an ackClock times.
type ackedConn struct {
	net.Conn
	clock *ackClock
}

func (c ackedConn) Write(p []byte) (int, error) {
	c.clock.wrote(time.Now())
	return c.Conn.Write(p)
}

// keepAliveAcked is KeepAlive for a connection timed by a: every interval
// it sends a keepalive@openssh.com request that wants no reply (the
// board's sshd ignores it; its kernel acknowledges it), and closes c once
// a reports max intervals of silence (ErrKeepaliveTimeout), or when a
// send hangs that long. It returns nil when c closed for another reason.
func keepAliveAcked(c *ssh.Client, a *ackClock, interval time.Duration, max int) error {
	closed := closedSignal(c)
	t := newWallTicker(interval)
	defer t.stop()
	limit := time.Duration(max) * interval
	var stuck atomic.Bool
	watchdog := time.AfterFunc(time.Hour, func() {
		stuck.Store(true)
		c.Close()
	})
	watchdog.Stop()
	for {
		select {
		case <-closed:
			return nil
		case <-t.c():
			t.next()
		}
		if a.silence(time.Now()) >= limit {
			c.Close()
			return ErrKeepaliveTimeout
		}
		watchdog.Reset(limit)
		_, _, err := c.SendRequest("keepalive@openssh.com", false, nil)
		watchdog.Stop()
		if stuck.Load() {
			return ErrKeepaliveTimeout
		}
		if err != nil {
			c.Close()
			return nil
		}
	}
}
