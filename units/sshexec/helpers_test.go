package sshexec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// pinned is a HostKeyLookup over a fixed table.
func pinned(nodes map[string]*sshdtest.Server) HostKeyLookup {
	return HostKeyLookupFunc(func(node string) (string, ssh.PublicKey, error) {
		s, ok := nodes[node]
		if !ok {
			return "", nil, errUnknownNode(node)
		}
		return s.Addr, s.HostKey, nil
	})
}

type errUnknownNode string

func (e errUnknownNode) Error() string { return "no such node " + string(e) }

// newTestExecutor returns an executor for srv under the node name "b1",
// closed at cleanup. mutate may adjust the config.
func newTestExecutor(t testing.TB, srv *sshdtest.Server, mutate func(*Config)) *Executor {
	t.Helper()
	cfg := DefaultConfig()
	cfg.User = srv.User
	cfg.Signers = []ssh.Signer{srv.ClientSigner}
	cfg.HostKeys = pinned(map[string]*sshdtest.Server{"b1": srv})
	cfg.Logger = testutil.Logger(t)
	cfg.Jitter = func() float64 { return 0.5 }
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testCtx is a context that ends with the test, bounded so that a hang
// fails the test instead of the whole run.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// returnsWith waits (up to 20 s) for the error an operation sends on
// errc and checks that it is want; stuck is the failure when none comes.
func returnsWith(t testing.TB, errc <-chan error, want error, stuck string) {
	t.Helper()
	select {
	case err := <-errc:
		if !errors.Is(err, want) {
			t.Errorf("err = %v, want %v", err, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(stuck)
	}
}
