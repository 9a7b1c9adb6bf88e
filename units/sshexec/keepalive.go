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
	t := time.NewTicker(interval)
	defer t.Stop()
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
		case <-t.C:
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
