package api

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

// WatchEvent is one change to one object, in commit order. ResourceVersion is
// the Raft index of the change; for EventDeleted, Object is the last stored
// state.
type WatchEvent struct {
	Type            EventType `json:"type"`
	ResourceVersion uint64    `json:"resourceVersion"`
	Object          RawObject `json:"object"`
}
