package sshexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ClientConn runs the SSH client handshake on nc with cc, bounded by ctx:
// x/crypto's handshake is not context-aware, so the end of ctx (or its
// deadline) aborts it through a deadline in the past. A host key refused by
// cc.HostKeyCallback comes back as that error (not x/crypto's
// "handshake failed"), so callers can tell a wrong key from a network
// failure; the end of ctx comes back as ctx.Err(). On any failure nc is
// closed. The callback's refusal is a *HostKeyRefusedError wrapping its
// error. herd's two SSH clients, the executor and herdctl's tunnel, dial
// through it.
func ClientConn(ctx context.Context, nc net.Conn, addr string, cc *ssh.ClientConfig) (*ssh.Client, error) {
	var (
		keyMu  sync.Mutex
		keyErr error
	)
	cfg := *cc
	if check := cc.HostKeyCallback; check != nil {
		cfg.HostKeyCallback = func(host string, remote net.Addr, key ssh.PublicKey) error {
			err := check(host, remote, key)
			keyMu.Lock()
			keyErr = err
			keyMu.Unlock()
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, &cfg)
	if !stop() && err == nil {
		sc.Close()
		err = errors.New("handshake timed out")
	}
	if err != nil {
		nc.Close()
		keyMu.Lock()
		kerr := keyErr
		keyMu.Unlock()
		switch {
		case kerr != nil:
			return nil, &HostKeyRefusedError{Err: kerr}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// HostKeyRefusedError is ClientConn's error when the host key callback
// refused the server's key; Err is the callback's error.
type HostKeyRefusedError struct{ Err error }

func (e *HostKeyRefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the callback's error.
func (e *HostKeyRefusedError) Unwrap() error { return e.Err }
