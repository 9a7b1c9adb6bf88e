package testutil

import (
	"bytes"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Logger returns a debug-level slog.Logger writing to t.Log until the
// test's cleanup runs; later writes (from goroutines that outlive the test)
// are dropped.
func Logger(t testing.TB) *slog.Logger { return LevelLogger(t, slog.LevelDebug) }

// LevelLogger is Logger for records at level and above.
func LevelLogger(t testing.TB, level slog.Leveler) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// Eventually polls cond until it returns nil, failing the test with the
// last error once within has passed. The pause between polls is a polling
// interval, not a synchronisation.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Until is Eventually for a condition that only says yes or no.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}
