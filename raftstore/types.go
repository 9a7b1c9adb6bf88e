package raftstore

import (
	"errors"

	"github.com/herd-dev/herd/api"
)

// Sentinel errors. Callers test them with errors.Is; the store wraps them with
// the kind and name concerned.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("raftstore: not found")
	// ErrExists: a create named an object that already exists.
	ErrExists = errors.New("raftstore: already exists")
	// ErrConflict: a compare-and-swap write carried a stale resourceVersion.
	ErrConflict = errors.New("raftstore: conflict")
	// ErrNoLeader: no leader is known, so a write cannot be committed.
	ErrNoLeader = errors.New("raftstore: no leader")
	// ErrNotLeader: an operation that only the leader may do was asked of a
	// follower.
	ErrNotLeader = errors.New("raftstore: not leader")
	// ErrCompacted: a watch asked to resume from a resourceVersion older than
	// the retained event history; the caller must list again.
	ErrCompacted = errors.New("raftstore: resourceVersion compacted, list again")
	// ErrInvalid: a command was malformed (unknown op or kind, empty name).
	ErrInvalid = errors.New("raftstore: invalid command")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("raftstore: closed")
	// ErrOutcomeUnknown: a write may or may not have committed (leadership
	// lost while committing, the connection to the leader cut or the
	// leader changed after it received the request, the deadline passed):
	// read before retrying it.
	ErrOutcomeUnknown = errors.New("raftstore: outcome unknown")
)

// OpType is what one Op in a transaction does.
type OpType string

// Operation types.
const (
	// OpCreate stores a new object; ErrExists if it exists. Generation
	// becomes 1, Created is stamped by the leader if zero.
	OpCreate OpType = "create"
	// OpUpdate replaces labels and spec, keeping the stored status.
	// Generation moves only when the spec changed. With a non-zero
	// Object.Metadata.ResourceVersion it is compare-and-swap.
	OpUpdate OpType = "update"
	// OpUpdateStatus replaces the status only, keeping labels, spec and
	// generation. CAS as OpUpdate.
	OpUpdateStatus OpType = "updateStatus"
	// OpDelete removes the object. CAS as OpUpdate.
	OpDelete OpType = "delete"
)

// Op is one step of a transaction. The object's Kind and Metadata.Name
// identify it; a non-zero Metadata.ResourceVersion is the expected current
// version (compare-and-swap).
type Op struct {
	Type   OpType        `json:"type"`
	Object api.RawObject `json:"object"`
}

// Event is a change to one object; see api.WatchEvent.
type Event = api.WatchEvent

// Event types, as in package api.
const (
	EventAdded    = api.EventAdded
	EventModified = api.EventModified
	EventDeleted  = api.EventDeleted
	EventRelist   = api.EventRelist
)
