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

// EventType says what happened to an object.
type EventType string

// Event types.
const (
	EventAdded    EventType = "ADDED"
	EventModified EventType = "MODIFIED"
	EventDeleted  EventType = "DELETED"
	// EventRelist is the last event on a watch channel that the store had
	// to end (the watcher fell behind, or state was restored from a
	// snapshot): the watcher must list again and watch from there.
	EventRelist EventType = "RELIST"
)

// Event is one change to one object, in commit order. ResourceVersion is
// the Raft index of the change; for EventDeleted, Object is the last stored
// state.
type Event struct {
	Type            EventType     `json:"type"`
	ResourceVersion uint64        `json:"resourceVersion"`
	Object          api.RawObject `json:"object"`
}
