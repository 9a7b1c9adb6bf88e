package raftstore

import (
	"context"
	"fmt"
)

// RequestIDHistory is how many request ids the store remembers: a write
// resent with the id of one of the last RequestIDHistory successful
// transactions that carried an id is not applied again. Every replica uses
// the same bound, so every replica evicts the same ids. Only client writes
// carry ids (the controllers' do not), and a client resends within its
// timeout (30 s by default), so 4096 covers a burst of well over 100 user
// writes a second; the table costs ≈0.45 MB when full (measured: 1.8 MB
// for 16384), which a Pi Zero's budget notices.
const RequestIDHistory = 4096

// maxRequestIDLen is the longest request id accepted.
const maxRequestIDLen = 64

// ValidateRequestID checks a request id: 1 to 64 characters of
// [A-Za-z0-9_-]. The error wraps ErrInvalid.
func ValidateRequestID(id string) error {
	if id == "" || len(id) > maxRequestIDLen {
		return fmt.Errorf("%w: request id of %d characters: want 1 to %d of [A-Za-z0-9_-]", ErrInvalid, len(id), maxRequestIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: request id %q: character %d (%q) is not one of [A-Za-z0-9_-]", ErrInvalid, id, i, c)
		}
	}
	return nil
}

type requestIDKey struct{}

// WithRequestID returns a context whose writes (Store.Txn, MemStore.Txn)
// carry the request id id: a transaction with an id applies at most once,
// however often it is sent (a retry after a broken connection or
// ErrOutcomeUnknown). A transaction whose id was already applied is not
// applied again: it succeeds with the objects stored now under its ops'
// keys (an op's own object where none is stored) and emits no events. A
// failed transaction records nothing, so a resend is judged afresh. The
// store remembers the last RequestIDHistory ids. An invalid id (see
// ValidateRequestID) fails the write with ErrInvalid; "" means none.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id WithRequestID put in ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestIDFor returns ctx's request id, validated.
func requestIDFor(ctx context.Context) (string, error) {
	id := RequestIDFrom(ctx)
	if id == "" {
		return "", nil
	}
	return id, ValidateRequestID(id)
}

// appliedRequest is one entry of the table of applied request ids.
type appliedRequest struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
}

// requestTable is the set of applied request ids, evicted oldest first by
// log index. Entries are added in log order, so the queue is sorted.
type requestTable struct {
	ids   map[string]uint64
	queue []appliedRequest // queue[head:] are live, oldest first
	head  int
}

func newRequestTable() requestTable {
	return requestTable{ids: map[string]uint64{}}
}

func (t *requestTable) has(id string) bool {
	_, ok := t.ids[id]
	return ok
}

func (t *requestTable) len() int { return len(t.ids) }

// add records id as applied at index, evicting the oldest ids beyond max.
func (t *requestTable) add(id string, index uint64, max int) {
	t.ids[id] = index
	t.queue = append(t.queue, appliedRequest{ID: id, Index: index})
	for len(t.queue)-t.head > max {
		delete(t.ids, t.queue[t.head].ID)
		t.queue[t.head] = appliedRequest{}
		t.head++
	}
	if t.head > 1024 && t.head > len(t.queue)/2 {
		t.queue = append([]appliedRequest(nil), t.queue[t.head:]...)
		t.head = 0
	}
}

// list returns a copy of the live entries, oldest first.
func (t *requestTable) list() []appliedRequest {
	return append([]appliedRequest(nil), t.queue[t.head:]...)
}

// restoreRequests rebuilds a table from a snapshot's entries, which must be
// valid, distinct and in increasing index order; only the newest max are
// kept.
func restoreRequests(entries []appliedRequest, max int) (requestTable, error) {
	t := newRequestTable()
	var last uint64
	for i, e := range entries {
		if err := ValidateRequestID(e.ID); err != nil {
			return requestTable{}, fmt.Errorf("request %d: %w", i, err)
		}
		if e.Index <= last {
			return requestTable{}, fmt.Errorf("request %d (%s): index %d not after %d", i, e.ID, e.Index, last)
		}
		if t.has(e.ID) {
			return requestTable{}, fmt.Errorf("request %d: duplicate id %s", i, e.ID)
		}
		last = e.Index
		t.add(e.ID, e.Index, max)
	}
	return t, nil
}
