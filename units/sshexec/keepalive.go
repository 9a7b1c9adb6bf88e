package sshexec

import (
	"errors"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrKeepaliveTimeout: the peer left max keepalives in a row unanswered.
var ErrKeepaliveTimeout = errors.New("sshexec: peer stopped answering keepalives")

// KeepAlive sends a keepalive@openssh.com request on c every interval and
// returns once c is closed, or once max intervals passed with a request
// unanswered (ErrKeepaliveTimeout), closing c itself then. Any reply, even
// "request not understood", proves the peer alive. sent, when not nil, is
// called with the time a request goes out and with the zero time once it
// is answered (how long the peer has been silent). herd's two SSH clients,
// the executor's pool and herdctl's tunnel, watch their connections with
// it. It returns nil when c closed for another reason.
func KeepAlive(c *ssh.Client, interval time.Duration, max int, sent func(time.Time)) error {
	closed := closedSignal(c)
	t := newWallTicker(interval)
	defer t.stop()
	replied := make(chan struct{}, 1)
	inflight, missed := false, 0
	for {
		select {
		case <-closed:
			return nil
		case <-replied:
			inflight, missed = false, 0
			if sent != nil {
				sent(time.Time{})
			}
		case <-t.c():
			t.next()
			if inflight {
				missed++
				if missed >= max {
					c.Close()
					return ErrKeepaliveTimeout
				}
				continue
			}
			inflight = true
			if sent != nil {
				sent(time.Now())
			}
			go func() {
				if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
					c.Close()
					return
				}
				replied <- struct{}{}
			}()
		}
	}
}

// closedSignal returns a channel closed once c is.
func closedSignal(c *ssh.Client) <-chan struct{} {
	closed := make(chan struct{})
	go func() {
		c.Wait()
		close(closed)
	}()
	return closed
}

// wallTicker ticks about every d, on the wall clock's multiples of d: the
// keepalives of all of an agent's connections (one per board) then fall
// in one wake-up of an idle agent instead of one each. Ticks are at least
// d/2 apart, whatever the timer's and the wall clock's small disagreements.
type wallTicker struct {
	d time.Duration
	t *time.Timer
}

func newWallTicker(d time.Duration) *wallTicker {
	if d <= 0 {
		panic("sshexec: non-positive keepalive interval")
	}
	return &wallTicker{d: d, t: time.NewTimer(untilTick(time.Now(), d))}
}

func (w *wallTicker) c() <-chan time.Time { return w.t.C }

// next arms the ticker for the tick after the one just received.
func (w *wallTicker) next() { w.t.Reset(untilTick(time.Now(), w.d)) }

func (w *wallTicker) stop() { w.t.Stop() }

// untilTick is how long after now the next tick comes: at the first
// multiple of d on the wall clock that is at least d/2 away.
func untilTick(now time.Time, d time.Duration) time.Duration {
	wait := now.Truncate(d).Add(d).Sub(now)
	if wait < d/2 {
		wait += d
	}
	return wait
}
