package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// httpError is an error with the HTTP response it becomes.
type httpError struct {
	status int
	code   string
	msg    string
	fields []api.FieldError
}

func (e *httpError) Error() string { return e.msg }

func newError(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *httpError {
	return newError(http.StatusBadRequest, api.CodeBadRequest, format, args...)
}

func invalid(fields []api.FieldError) *httpError {
	msg := fmt.Sprintf("%d invalid field(s): ", len(fields))
	more := ""
	if len(fields) > maxReportedFields {
		// A small body can hold very many bad objects; the answer stays
		// small.
		more = fmt.Sprintf("; and %d more", len(fields)-maxReportedFields)
		fields = fields[:maxReportedFields]
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		p := f.Field
		if f.Object != "" {
			p = f.Object + " " + p
		}
		parts = append(parts, strings.TrimSpace(p)+": "+f.Message)
	}
	if len(fields) == 1 && more == "" {
		msg = ""
	}
	return &httpError{status: http.StatusBadRequest, code: api.CodeInvalid,
		msg: msg + strings.Join(parts, "; ") + more, fields: fields}
}

// maxReportedFields caps the field errors one answer lists.
const maxReportedFields = 100

func unknownKind(k string) *httpError {
	names := make([]string, len(api.Kinds))
	for i, k := range api.Kinds {
		names[i] = string(k)
	}
	return newError(http.StatusNotFound, api.CodeNotFound,
		"unknown kind %q; the kinds are %s", k, strings.Join(names, ", "))
}

// toHTTPError maps any error to its response: store sentinels by errors.Is,
// body-limit and decode errors by type, everything else as internal.
func (s *Server) toHTTPError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return newError(http.StatusRequestEntityTooLarge, api.CodeTooLarge,
			"request body is larger than the limit of %d bytes", mbe.Limit)
	case errors.Is(err, raftstore.ErrNotFound):
		return newError(http.StatusNotFound, api.CodeNotFound, "%s", trimPrefix(err))
	case errors.Is(err, raftstore.ErrExists):
		return newError(http.StatusConflict, api.CodeExists, "%s", trimPrefix(err))
	case errors.Is(err, raftstore.ErrConflict):
		return newError(http.StatusConflict, api.CodeConflict,
			"%s: the object was changed by someone else; get it again and retry", trimPrefix(err))
	case errors.Is(err, raftstore.ErrOutcomeUnknown):
		// Before DeadlineExceeded: a write that timed out while
		// committing is one of these, not a plain "no leader".
		return newError(http.StatusServiceUnavailable, api.CodeOutcomeUnknown,
			"%s: the write may or may not have been applied; get the object again before retrying, or resend it with the same %s header%s", trimPrefix(err), api.HeaderRequestID, s.leaderHint())
	case errors.Is(err, raftstore.ErrNoLeader), errors.Is(err, raftstore.ErrNotLeader):
		return newError(http.StatusServiceUnavailable, api.CodeNoLeader, "%s%s", trimPrefix(err), s.leaderHint())
	case errors.Is(err, raftstore.ErrClosed):
		return newError(http.StatusServiceUnavailable, api.CodeNoLeader, "%s (the agent is shutting down)", trimPrefix(err))
	case errors.Is(err, context.DeadlineExceeded):
		return newError(http.StatusServiceUnavailable, api.CodeNoLeader,
			"timed out waiting for the write to commit (is there a quorum?)%s", s.leaderHint())
	case errors.Is(err, raftstore.ErrCompacted):
		return newError(http.StatusGone, api.CodeCompacted, "%s", trimPrefix(err))
	case errors.Is(err, raftstore.ErrInvalid):
		return newError(http.StatusBadRequest, api.CodeBadRequest, "%s", trimPrefix(err))
	}
	return newError(http.StatusInternalServerError, api.CodeInternal, "%s", err.Error())
}

// trimPrefix drops the "raftstore: " package prefix that means nothing to an
// API user.
func trimPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "raftstore: ")
}

func (s *Server) leaderHint() string {
	if _, addr := s.cfg.Store.Leader(); addr != "" {
		return " (leader: " + addr + ")"
	}
	return " (no leader known)"
}

// writeError writes err as a JSON api.APIError.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	he := s.toHTTPError(err)
	if he.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="herd"`)
	}
	writeJSON(w, he.status, api.APIError{Code: he.code, Message: he.msg, Fields: he.fields})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(api.APIError{Code: api.CodeInternal, Message: "encoding response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decodeStrict decodes exactly one JSON value from r into v, rejecting
// unknown fields, with errors that name the byte offset or field. what says
// what is being decoded ("request body", "objects[2]").
func decodeStrict(r io.Reader, v any, what string) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, what)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return decodeError(err, what)
		}
		return badRequest("%s: unexpected data after the JSON value at byte offset %d", what, dec.InputOffset())
	}
	return nil
}

func decodeError(err error, what string) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("%s: empty, want a JSON object", what)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("%s: truncated JSON", what)
	case errors.As(err, &syn):
		return badRequest("%s: invalid JSON at byte offset %d: %s", what, syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return badRequest("%s: field %s: cannot use JSON %s as %s (byte offset %d)", what, field, typ.Value, typ.Type, typ.Offset)
	}
	return badRequest("%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
}
