// Package fakestore is an in-memory stand-in for *raftstore.Store, for
// tests of the HTTP API and its clients. It keeps the store's semantics:
// one resourceVersion per transaction, all-or-nothing transactions,
// compare-and-swap on a non-zero resourceVersion, ErrExists, ErrNotFound
// and ErrConflict wrapped with the object concerned, generation bumped only
// when the spec changes, updates keeping the status, updates that change
// nothing writing nothing, and a watch that replays history after a
// resourceVersion and then follows new events.
package fakestore
