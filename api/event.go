package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// KindEvent is the kind of Event records. Events are not workload objects:
// they are not in Kinds, a list or watch of every kind leaves them out,
// users cannot write them, and the store keeps only the newest MaxEvents.
const KindEvent Kind = "events"

// MaxEvents is how many events the store keeps; creating one more drops the
// oldest in the same transaction.
const MaxEvents = 1000

// MaxEventMessage bounds an event's message in bytes.
const MaxEventMessage = 512

// Event is one thing that happened to one object, as the leader saw it: a
// node turning suspect or dead, a pod bound, started, ready or lost, a
// scheduling failure with its reason, a fencing, a leader change. Herd
// writes events; users read them (`herdctl events`, `describe`).
type Event struct {
	Kind     Kind       `json:"kind"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     EventSpec  `json:"spec"`
}

// EventSpec is what an event says.
type EventSpec struct {
	// Time is when it happened (the leader's clock).
	Time time.Time `json:"time"`
	// Object is what it happened to.
	Object OwnerRef `json:"object"`
	// Reason is a CamelCase word (see the Reason constants).
	Reason string `json:"reason"`
	// Type is EventNormal or EventWarning.
	Type string `json:"type"`
	// Node is the board concerned, if any.
	Node string `json:"node,omitempty"`
	// Message says it in a sentence for people.
	Message string `json:"message,omitempty"`
	// SourceVersion is the resourceVersion of the store change the event
	// was derived from (0 for events not derived from a change, such as a
	// leader election): a new leader resumes recording after the newest.
	SourceVersion uint64 `json:"sourceVersion,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event reasons.
const (
	ReasonNodeJoined        = "Joined"
	ReasonNodeSuspect       = "Suspect"
	ReasonNodeDead          = "Dead"
	ReasonNodeReady         = "NodeReady"
	ReasonNodeNotReady      = "NodeNotReady"
	ReasonNodeLeft          = "Left"
	ReasonNodeCordoned      = "Cordoned"
	ReasonNodeUncordoned    = "Uncordoned"
	ReasonNodeDraining      = "Draining"
	ReasonNodeDrainEnded    = "DrainEnded"
	ReasonFenced            = "Fenced"
	ReasonLeaderElected     = "LeaderElected"
	ReasonCreated           = "Created"
	ReasonBound             = "Bound"
	ReasonFailedScheduling  = "FailedScheduling"
	ReasonStarted           = "Started"
	ReasonReady             = "Ready"
	ReasonNotReady          = "NotReady"
	ReasonLost              = "Lost"
	ReasonFailed            = "Failed"
	ReasonSucceeded         = "Succeeded"
	ReasonDeleted           = "Deleted"
	ReasonEndpointsUpdated  = "EndpointsUpdated"
	ReasonScaled            = "Scaled"
	ReasonRolloutStarted    = "RolloutStarted"
	ReasonAvailable         = "Available"
	ReasonReplicaFailure    = "ReplicaFailure"
	ReasonRestarted         = "Restarted"
	ReasonUnitStartFailures = "UnitFailed"
)

// GetKind implements Object.
func (*Event) GetKind() Kind { return KindEvent }

// GetMeta implements Object.
func (e *Event) GetMeta() *ObjectMeta { return &e.Metadata }

// EventName is the name of the i-th event recorded in one batch whose
// newest source change is at resourceVersion rv (or, for a batch with no
// source change, the recorder's own sequence): 16 hex digits and a 4-digit
// index, so names sort in the order events were recorded and a retried
// batch names its events alike.
func EventName(rv uint64, i int) string {
	return fmt.Sprintf("%016x-%04d", rv, i)
}

// Labels an event carries, so a selector finds the events of one object
// (OwnerRef.EventSelector), of one board or with one reason.
const (
	EventLabelKind   = "herd.dev/kind"
	EventLabelName   = "herd.dev/name"
	EventLabelNode   = "herd.dev/node"
	EventLabelReason = "herd.dev/reason"
)

// EventLabels are the labels of an event with spec s.
func EventLabels(s EventSpec) map[string]string {
	l := map[string]string{
		EventLabelKind:   strings.TrimSuffix(string(s.Object.Kind), "s"),
		EventLabelName:   s.Object.Name,
		EventLabelReason: s.Reason,
	}
	if s.Node != "" {
		l[EventLabelNode] = s.Node
	}
	return l
}

// EventSelector is the label selector of the events about r.
func (r OwnerRef) EventSelector() map[string]string {
	return map[string]string{EventLabelKind: strings.TrimSuffix(string(r.Kind), "s"), EventLabelName: r.Name}
}

// String is "kind/name" with the kind singular: "pod/web-x".
func (r OwnerRef) String() string {
	return strings.TrimSuffix(string(r.Kind), "s") + "/" + r.Name
}

// ValidateEvent checks an event as the store receives it: a name from
// EventName, a known reason word, an object reference, a bounded message.
func ValidateEvent(e *Event) error {
	var errs FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Object: ObjectRef(KindEvent, e.Metadata.Name), Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !validEventName(e.Metadata.Name) {
		add("metadata.name", "%q is not an event name (16 hex digits, '-', 4 digits)", e.Metadata.Name)
	}
	if e.Spec.Time.IsZero() {
		add("spec.time", "is required")
	}
	if e.Spec.Reason == "" || len(e.Spec.Reason) > 63 || strings.ContainsFunc(e.Spec.Reason, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < 'a' || r > 'z')
	}) {
		add("spec.reason", "%q: want a CamelCase word", e.Spec.Reason)
	}
	if e.Spec.Type != EventNormal && e.Spec.Type != EventWarning {
		add("spec.type", "%q: want %s or %s", e.Spec.Type, EventNormal, EventWarning)
	}
	if New(e.Spec.Object.Kind) == nil || e.Spec.Object.Kind == KindEvent || ValidateName(e.Spec.Object.Name) != nil {
		add("spec.object", "%q is not an object reference", e.Spec.Object.String())
	}
	if e.Spec.Node != "" && ValidateName(e.Spec.Node) != nil {
		add("spec.node", "%q is not a node name", e.Spec.Node)
	}
	if len(e.Spec.Message) > MaxEventMessage {
		add("spec.message", "%d bytes, at most %d", len(e.Spec.Message), MaxEventMessage)
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func validEventName(s string) bool {
	hex, idx, ok := strings.Cut(s, "-")
	if !ok || len(hex) != 16 || len(idx) != 4 {
		return false
	}
	if _, err := strconv.ParseUint(hex, 16, 64); err != nil || strings.ToLower(hex) != hex {
		return false
	}
	_, err := strconv.ParseUint(idx, 10, 16)
	return err == nil
}

// EventMessage cuts s to at most MaxEventMessage bytes on a rune boundary.
func EventMessage(s string) string {
	if len(s) <= MaxEventMessage {
		return s
	}
	cut := MaxEventMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
