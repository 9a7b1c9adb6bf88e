package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// MaxLogTail is the largest number of lines a logs request may ask for.
const MaxLogTail = 100000

// LogErrorTrailer is the HTTP trailer in which the agent reports an error
// that ended a logs stream after output had begun (the status line was
// already sent as 200 by then).
const LogErrorTrailer = "Herd-Error"

// Error codes of logs requests, as in APIError.Code.
const (
	// CodeNotImplemented: the agent cannot stream logs.
	CodeNotImplemented = "not_implemented"
	// CodeNotPlaced: the pod is on no board yet, so it has no journal.
	CodeNotPlaced = "not_placed"
	// CodeLogsFailed: reading the journal on the board failed.
	CodeLogsFailed = "logs_failed"
)

// LogOptions select the part of a pod's journal to show.
type LogOptions struct {
	// Follow keeps the stream open, writing new lines as they come, until
	// ctx ends.
	Follow bool
	// Since, when set, shows only lines from then on: a Go duration meaning
	// that long ago ("10m", "1h30m"; "0s" shows no past lines), or a time in
	// RFC 3339 ("2025-06-01T10:00:00+02:00") or as "2006-01-02 15:04:05"
	// (read as UTC by the agent). See ParseSince.
	Since string
	// Tail, when positive, shows only the last Tail lines (at most
	// MaxLogTail) before following; 0 shows every line.
	Tail int
}

// Logs writes the journal of pod name's unit, from the board it runs on,
// to w as it arrives. Without Follow it returns when the journal has been
// written, within the client's request timeout; with Follow there is no
// timeout and it returns ctx's error when ctx ends. An error of the agent
// is an *APIError: code "not_found" (no such pod), "not_placed" (the pod is
// on no board yet), "not_implemented" (the agent cannot stream logs),
// "logs_failed" (the board's journal could not be read, also when that
// happens mid-stream).
func (c *Client) Logs(ctx context.Context, name string, opts LogOptions, w io.Writer) error {
	if name == "" {
		return errors.New("client: logs: pod name is empty")
	}
	if opts.Tail < 0 || opts.Tail > MaxLogTail {
		return fmt.Errorf("client: logs: tail %d: want 0 (all lines) to %d", opts.Tail, MaxLogTail)
	}
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "1")
	}
	if opts.Since != "" {
		q.Set("since", opts.Since)
	}
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	p := kindPath(api.KindPod, name) + "/logs"
	resp, cancel, err := c.send(ctx, http.MethodGet, p, q, nil, !opts.Follow, idempotent)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("client: logs of pod %s: %w", name, err)
	}
	// Trailers are read once the body is at EOF.
	if msg := resp.Trailer.Get(LogErrorTrailer); msg != "" {
		return &APIError{StatusCode: http.StatusBadGateway, Code: CodeLogsFailed, Message: msg}
	}
	return nil
}

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
