package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/herd-dev/herd/api"
)

// LogOptions select the part of a pod's journal to show.
type LogOptions struct {
	// Follow keeps the stream open, writing new lines as they come, until
	// ctx ends.
	Follow bool
	// Since, when set, shows only lines from then on: a Go duration meaning
	// that long ago ("10m", "1h30m"; "0s" shows no past lines), or a time in
	// RFC 3339 ("2025-06-01T10:00:00+02:00") or as "2006-01-02 15:04:05"
	// (read as UTC by the agent). See api.ParseSince.
	Since string
	// Tail, when positive, shows only the last Tail lines (at most
	// api.MaxLogTail) before following; 0 shows every line.
	Tail int
}

// Logs writes the journal of pod name's unit, from the board it runs on,
// to w as it arrives. Without Follow it returns when the journal has been
// written, within the client's request timeout; with Follow there is no
// timeout and it returns ctx's error when ctx ends. An error of the agent
// is an *api.APIError: code "not_found" (no such pod), "not_placed" (the pod is
// on no board yet), "not_implemented" (the agent cannot stream logs),
// "logs_failed" (the board's journal could not be read, also when that
// happens mid-stream).
func (c *Client) Logs(ctx context.Context, name string, opts LogOptions, w io.Writer) error {
	if name == "" {
		return errors.New("client: logs: pod name is empty")
	}
	if opts.Tail < 0 || opts.Tail > api.MaxLogTail {
		return fmt.Errorf("client: logs: tail %d: want 0 (all lines) to %d", opts.Tail, api.MaxLogTail)
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
	resp, cancel, err := c.send(ctx, http.MethodGet, p, q, nil, !opts.Follow)
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
	if msg := resp.Trailer.Get(api.LogErrorTrailer); msg != "" {
		return &api.APIError{StatusCode: http.StatusBadGateway, Code: api.CodeLogsFailed, Message: msg}
	}
	return nil
}
