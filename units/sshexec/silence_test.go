package sshexec

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// A peer that stops answering (a board that lost power): Silence grows
// from the first unanswered keepalive, long before the connection is
// closed for it, and a command on the pooled connection fails at its
// caller's deadline instead of hanging. Here the peer is a frozen sshd,
// which only keepalives that want replies notice (its kernel still
// acknowledges): TestSilenceOfADroppedPeer is the same with
// acknowledgements.
func TestSilenceOfAPausedPeer(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.KeepaliveReplies = true
		c.KeepaliveInterval = 100 * time.Millisecond
		c.KeepaliveMax = 1000 // keep the connection: the witness must not rely on it closing
	})
	if got := e.Silence("b1"); got != 0 {
		t.Errorf("Silence before any connection = %v, want 0", got)
	}
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 20*time.Second, "keepalives to be answered", func() bool { return e.Silence("b1") < 50*time.Millisecond })

	srv.PauseConnections()
	t.Cleanup(srv.ResumeConnections)
	testutil.Until(t, 20*time.Second, "the silence to exceed 300ms", func() bool { return e.Silence("b1") > 300*time.Millisecond })

	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Run(dctx, "b1", []string{"true"})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run on a silent connection took %v, want about its 300ms deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run on a silent connection: %v, want context.DeadlineExceeded", err)
	}

	srv.ResumeConnections()
	testutil.Until(t, 20*time.Second, "the silence to end", func() bool { return e.Silence("b1") < 50*time.Millisecond })
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatalf("Run after the peer answered again: %v", err)
	}
}

// A dial to a board that lost power (no answer to the TCP SYN) counts as
// silence too, so a caller without a pooled connection need not wait out
// its deadline either.
func TestSilenceOfAHangingDial(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			<-ctx.Done() // the SYN is never answered
			return nil, ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, "b1", []string{"true"})
		errc <- err
	}()
	testutil.Until(t, 20*time.Second, "the dial's silence to exceed 200ms", func() bool { return e.Silence("b1") > 200*time.Millisecond })
	if err := <-errc; err == nil {
		t.Fatal("Run through a dial that never connects succeeded")
	}
	// The unanswered connect counts as silence for a while after it was
	// given up (silenceAfterDial), then no more: the board is dialled
	// afresh.
	testutil.Until(t, 20*time.Second, "the silence to end after the dial gave up", func() bool { return e.Silence("b1") == 0 })
}

// Right after a connect that got no answer was given up, the board still
// counts as silent (since the connect began), so the witness after a pass
// cut short while dialling need not wait out a connect of its own; a
// connect that was answered (refused) leaves no silence.
func TestSilenceAfterAnUnansweredDial(t *testing.T) {
	defer func(d time.Duration) { silenceAfterDial = d }(silenceAfterDial)
	silenceAfterDial = time.Minute
	srv := sshdtest.Start(t)
	refuse := false
	var called time.Time // when the unanswered connect began, as the dialer saw it
	e := newTestExecutor(t, srv, func(c *Config) {
		c.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if refuse {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			called = time.Now()
			<-ctx.Done() // the SYN is never answered
			return nil, ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	if _, err := e.Run(ctx, "b1", []string{"true"}); err == nil {
		t.Fatal("Run through a dial that never connects succeeded")
	}
	// The executor notes the connect's start just before it calls the
	// dialer and Silence reads the clock after this does, so the silence
	// is at least what the test measures (the 300 ms of ctx, less the
	// executor's own work before the dial).
	waited := time.Since(called)
	if got := e.Silence("b1"); got < waited {
		t.Errorf("Silence after an unanswered dial = %v, want at least the %v it waited", got, waited)
	}

	refuse = true
	e.Forget("b1") // no backoff before the next dial
	if _, err := e.Run(testCtx(t), "b1", []string{"true"}); err == nil {
		t.Fatal("Run through a refused dial succeeded")
	}
	if got := e.Silence("b1"); got != 0 {
		t.Errorf("Silence after a refused dial = %v, want 0", got)
	}
}

// A command cancelled while its board is silent (a board that lost power
// mid-command) returns at once: waiting for the board to acknowledge the
// kill (cancelGrace) would only hold up the caller, e.g. the placer's
// witness. cancelGrace is made a minute long here, so a wait for it fails
// the test at its deadline.
func TestCancelOnASilentPeerDoesNotWait(t *testing.T) {
	defer func(g time.Duration) { cancelGrace = g }(cancelGrace)
	cancelGrace = time.Minute
	for _, tc := range []struct {
		name    string
		session bool
	}{{"wrapper", false}, {"board session", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sshdtest.Start(t)
			e := helperExecutor(t, srv, func(c *Config) {
				c.BoardSession = tc.session
				c.KeepaliveReplies = true // the board is a frozen sshd
				c.KeepaliveInterval = 100 * time.Millisecond
				c.KeepaliveMax = 1000 // keep the connection: only silence may cut the wait short
			})
			started := filepath.Join(t.TempDir(), "started")
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := e.Run(ctx, "b1", []string{"sh", "-c", `: > "$1"; exec sleep 60`, "x", started})
				errc <- err
			}()
			testutil.Until(t, 20*time.Second, "the command to start", func() bool {
				_, err := os.Stat(started)
				return err == nil
			})
			srv.PauseConnections()
			t.Cleanup(srv.ResumeConnections)
			testutil.Until(t, 20*time.Second, "the silence to exceed cancelSilence", func() bool { return e.Silence("b1") > cancelSilence })
			cancel()
			returnsWith(t, errc, context.Canceled, "Run cancelled on a silent board waited for the board (cancelGrace)")
		})
	}
}

// Starting the board session on a connection that went silent (the board
// lost power after the dial) gives up with the caller's context instead
// of waiting for the keepalives to close the connection.
func TestBoardSessionStartOnASilentPeer(t *testing.T) {
	srv := sshdtest.Start(t)
	e := sessionExecutor(t, srv, func(c *Config) {
		c.KeepaliveInterval = 100 * time.Millisecond
		c.KeepaliveMax = 1000 // the connection stays: only the context may end the start
	})
	ctx := testCtx(t)
	// Stream stays on the wrapper: the connection is up, no session yet.
	if err := e.Stream(ctx, "b1", []string{"true"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	srv.PauseConnections()
	t.Cleanup(srv.ResumeConnections)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Run(dctx, "b1", []string{"true"})
		errc <- err
	}()
	returnsWith(t, errc, context.DeadlineExceeded, "Run kept waiting for the board session to start on a silent connection")
	srv.ResumeConnections()
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatalf("Run after the peer answered again: %v", err)
	}
}
