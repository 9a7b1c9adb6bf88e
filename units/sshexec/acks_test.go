package sshexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

func TestAckSilence(t *testing.T) {
	now := time.Unix(1000, 0)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, tc := range []struct {
		name  string
		s     acks
		since int64
		want  time.Duration
	}{
		{"all acknowledged", acks{unacked: 0, lastAck: 5 * time.Second}, ago(time.Second), 0},
		{"nothing written yet", acks{unacked: 1, lastAck: time.Second}, 0, 0},
		// A write right after a quiet second: the last ack is old, but
		// the wait has only begun.
		{"a fresh write after a quiet spell", acks{unacked: 1, lastAck: time.Second}, ago(time.Millisecond), time.Millisecond},
		// A board that lost power: nothing acknowledged since the write.
		{"unanswered write", acks{unacked: 1, lastAck: 900 * time.Millisecond}, ago(400 * time.Millisecond), 400 * time.Millisecond},
		// A long transfer acknowledged piece by piece.
		{"acks still arriving", acks{unacked: 40, lastAck: 2 * time.Millisecond}, ago(3 * time.Second), 2 * time.Millisecond},
		{"clock behind the write", acks{unacked: 1, lastAck: time.Second}, now.Add(time.Second).UnixNano(), 0},
	} {
		if got := ackSilence(tc.s, tc.since, now); got != tc.want {
			t.Errorf("%s: ackSilence = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// dropFrom makes srv's board look powered off: iptables drops every
// packet its sshd sends, acknowledgements included. It returns the undo
// (also run at cleanup). Skips the test without root or iptables.
func dropFrom(t *testing.T, srv *sshdtest.Server) (undo func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (iptables)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables")
	}
	_, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	rule := []string{"INPUT", "-p", "tcp", "-s", "127.0.0.1", "--sport", port, "-j", "DROP"}
	iptables := func(op string) error {
		if out, err := exec.Command("iptables", append([]string{op}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", op, err, out)
		}
		return nil
	}
	if err := iptables("-I"); err != nil {
		t.Skip(err)
	}
	var once sync.Once
	undo = func() {
		once.Do(func() {
			if err := iptables("-D"); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

// ackedConnTo returns e's live connection to b1 once keepalives are all it
// carries (each one, finding everything before it acknowledged, starts a
// new wait), or skips the test where the kernel gives no TCP_INFO
// (qemu-user): keepalives ask for replies there.
func ackedConnTo(t *testing.T, e *Executor) *conn {
	t.Helper()
	e.mu.Lock()
	n := e.nodes["b1"]
	e.mu.Unlock()
	c := n.live()
	if c == nil || c.acks == nil {
		t.Skip("the kernel reports no TCP_INFO here: keepalives ask for replies")
	}
	waits := 0
	last := c.acks.since.Load()
	testutil.Until(t, 20*time.Second, "two keepalives acknowledged", func() bool {
		if s := c.acks.since.Load(); s != last {
			last = s
			waits++
		}
		return waits >= 2 && e.Silence("b1") < 50*time.Millisecond
	})
	return c
}

// A board whose kernel stops acknowledging (power lost, cable cut) is
// silent from the first unacknowledged keepalive, without any reply asked
// of its sshd, and stops being silent once its acknowledgements come back.
func TestSilenceOfADroppedPeer(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.KeepaliveInterval = 100 * time.Millisecond
		c.KeepaliveMax = 1000 // keep the connection: the witness must not rely on it closing
	})
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	ackedConnTo(t, e)
	undo := dropFrom(t, srv)
	testutil.Until(t, 20*time.Second, "the silence to exceed 300ms", func() bool { return e.Silence("b1") > 300*time.Millisecond })

	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := e.Run(dctx, "b1", []string{"true"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run on a silent connection: %v, want context.DeadlineExceeded", err)
	}

	undo()
	testutil.Until(t, 20*time.Second, "the silence to end", func() bool { return e.Silence("b1") == 0 })
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatalf("Run after the peer acknowledged again: %v", err)
	}
}

// KeepaliveMax intervals without an acknowledgement close the connection;
// the next call dials afresh.
func TestKeepaliveAckedDetectsDeadPeer(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.KeepaliveInterval = 100 * time.Millisecond
		c.KeepaliveMax = 3
	})
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	ackedConnTo(t, e)
	undo := dropFrom(t, srv)
	testutil.Until(t, 20*time.Second, "the keepalives to declare the peer dead", func() bool {
		return e.Stats().KeepaliveTimeouts == 1
	})
	undo()
	res, err := e.Run(ctx, "b1", []string{"echo", "fresh"})
	if err != nil || string(res.Stdout) != "fresh\n" {
		t.Fatalf("Run after dead peer: %q %v", res.Stdout, err)
	}
	if st := e.Stats(); st.Dials != 2 {
		t.Errorf("Dials = %d, want 2", st.Dials)
	}
}
