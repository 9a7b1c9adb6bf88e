package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file holds the API's wire types: the bodies and error codes the
// agent's HTTP API (agent/httpapi) and its client (client, herdctl) share.

// Error codes of the API, as they appear in APIError.Code.
const (
	CodeInvalid  = "invalid"
	CodeNotFound = "not_found"
	CodeConflict = "conflict"
	CodeExists   = "exists"
	// CodeNoLeader: the agent knows no leader (or is shutting down) and
	// did not apply the request; it is safe to send again.
	CodeNoLeader = "no_leader"
	// CodeOutcomeUnknown: the write may or may not have been applied (the
	// leader changed or the deadline passed while it was committing).
	// Read the object before writing again.
	CodeOutcomeUnknown = "outcome_unknown"
	CodeCompacted      = "compacted"
	CodeUnauthorized   = "unauthorized"
	// CodeForbidden: the request is refused whatever its credential: a
	// foreign Host or Origin, or a write the user API does not allow.
	CodeForbidden  = "forbidden"
	CodeTooLarge   = "too_large"
	CodeBadRequest = "bad_request"
	CodeInternal   = "internal"
	// CodeNotImplemented: the agent was built or configured without the
	// feature (pod logs without a log reader).
	CodeNotImplemented = "not_implemented"
	// CodeNotPlaced: the pod is on no board yet, so it has no journal.
	CodeNotPlaced = "not_placed"
	// CodeLogsFailed: reading the journal on the board failed.
	CodeLogsFailed = "logs_failed"
)

// APIError is an error response from the agent.
type APIError struct {
	StatusCode int          `json:"-"`
	Code       string       `json:"code"` // "invalid", "not_found", "conflict", "no_leader", ...
	Message    string       `json:"message"`
	Fields     []FieldError `json:"fields,omitempty"`
}

// Error returns the message.
func (e *APIError) Error() string { return e.Message }

// IsCode reports whether err is an *APIError with code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// ApplyResult says what apply did to one object.
type ApplyResult struct {
	Kind   Kind      `json:"kind"`
	Name   string    `json:"name"`
	Action string    `json:"action"` // ApplyCreated, ApplyConfigured or ApplyUnchanged
	Object RawObject `json:"object"`
}

// What an apply did to each object (ApplyResult.Action).
const (
	ApplyCreated    = "created"
	ApplyConfigured = "configured"
	ApplyUnchanged  = "unchanged"
)

// ObjectList is the body of a list response.
type ObjectList struct {
	Items           []RawObject `json:"items"`
	ResourceVersion uint64      `json:"resourceVersion"`
}

// ApplyRequest is the body of POST /v1/apply: objects with kind, metadata
// and spec.
type ApplyRequest struct {
	Objects []json.RawMessage `json:"objects"`
}

// ApplyResponse is the body of an apply response, one result per object in
// request order.
type ApplyResponse struct {
	Results []ApplyResult `json:"results"`
}

// ScaleRequest is the body of PUT /v1/deployments/{name}/scale.
type ScaleRequest struct {
	Replicas *int `json:"replicas"`
}

// ClusterStatus is an agent's view of the cluster (GET /v1/status).
type ClusterStatus struct {
	Node    string         `json:"node"`
	Leader  string         `json:"leader"`
	Servers []RaftServer   `json:"servers"`
	Members []GossipMember `json:"members"`
	Version string         `json:"version"`
	// StateFormat is the answering agent's raftstore.StateFormat (0 from
	// agents older than the field).
	StateFormat int `json:"stateFormat,omitempty"`
	// CommitIndex and AppliedIndex are the answering server's Raft commit
	// and applied index (0 on a worker, and from older agents): herdctl
	// upgrade waits for a restarted server to apply what the leader had
	// committed.
	CommitIndex  uint64 `json:"commitIndex,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
}

// RaftServer is a Raft server in ClusterStatus.
type RaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // "voter" or "nonvoter"
	Leader   bool   `json:"leader"`
}

// GossipMember is a gossip member in ClusterStatus.
type GossipMember struct {
	Name   string      `json:"name"`
	Addr   string      `json:"addr"`
	State  MemberState `json:"state"`
	Server bool        `json:"server"`
}

// MemberState is a gossip member's liveness as this agent's gossip sees it.
type MemberState string

// Member states. Gossip reports no suspicion: a suspect member is alive
// until it is declared dead (gossip.Member.State); MemberSuspect is for the
// controllers' tables and tests. The empty state means gossip has no record
// of the member (never seen, or reaped after it died or left).
const (
	MemberAlive   MemberState = "alive"
	MemberSuspect MemberState = "suspect"
	MemberDead    MemberState = "dead"
	MemberLeft    MemberState = "left"
)

// Alive reports whether the member named name is in s and alive.
func (s ClusterStatus) Alive(name string) bool {
	for _, m := range s.Members {
		if m.Name == name {
			return m.State == MemberAlive
		}
	}
	return false
}

// MaxLogTail is the largest number of lines a logs request may ask for.
const MaxLogTail = 100000

// LogErrorTrailer is the HTTP trailer in which the agent reports an error
// that ended a logs stream after output had begun (the status line was
// already sent as 200 by then).
const LogErrorTrailer = "Herd-Error"

// HeaderRequestID is the request header that names a write (create,
// update, delete, scale, apply): a write resent with the same id, after a
// broken connection or outcome_unknown, is applied at most once. 1 to 64
// characters of [A-Za-z0-9_-]; the client sends a random one per call.
const HeaderRequestID = "Herd-Request-Id"

// sinceLayout is the zone-less time format ParseSince accepts.
const sinceLayout = "2006-01-02 15:04:05"

// ParseSince parses a logs "since" value: a duration of Go syntax, not
// negative, meaning that long ago ("10m", "1h30m", "0s"), or a point in
// time, in RFC 3339 or as "2006-01-02 15:04:05" in loc. Exactly one of ago
// (with isTime false) or at (with isTime true) is meaningful.
func ParseSince(s string, loc *time.Location) (ago time.Duration, at time.Time, isTime bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, time.Time{}, false, errors.New("since is empty")
	}
	if d, derr := time.ParseDuration(s); derr == nil {
		if d < 0 {
			return 0, time.Time{}, false, fmt.Errorf("since %q: the duration must not be negative (10m means ten minutes ago)", s)
		}
		return d, time.Time{}, false, nil
	}
	if t, terr := time.Parse(time.RFC3339, s); terr == nil {
		return 0, t, true, nil
	}
	if t, terr := time.ParseInLocation(sinceLayout, s, loc); terr == nil {
		return 0, t, true, nil
	}
	return 0, time.Time{}, false, fmt.Errorf("since %q: want a duration such as 10m or 1h30m, or a time such as 2025-06-01T10:00:00Z or \"2025-06-01 10:00:00\"", s)
}

// VersionInfo is what `herd version -o json` prints: the binary's version
// and the raftstore.StateFormat it reads and writes. herdctl upgrade runs
// a new binary on the board with it before installing it.
type VersionInfo struct {
	Version     string `json:"version"`
	StateFormat int    `json:"stateFormat"`
	GoVersion   string `json:"goVersion,omitempty"`
	Arch        string `json:"arch,omitempty"`
}
