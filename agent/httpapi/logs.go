package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
)

// LogOptions are the validated, normalized query of a logs request, as
// Config.Logs receives them.
type LogOptions struct {
	// Follow keeps the stream open for new lines until ctx ends.
	Follow bool
	// Since is "" (the whole journal), or where to start in journalctl's
	// --since syntax: "now" (no past lines), "-600s" (that many seconds
	// before now, on the board's clock) or "2025-06-01 10:00:00 UTC".
	Since string
	// Tail is 0 (every line) or the number of most recent lines to show
	// before following, at most api.MaxLogTail.
	Tail int
}

// JournalctlArgs returns the argv that reads unit's journal as opts say:
// journalctl with short-iso output, no pager, --since, --lines (all when
// Tail is 0, since journalctl --follow alone shows only the last 10) and
// --follow. Every value travels as its own argument; none needs a shell.
func (o LogOptions) JournalctlArgs(unit string) []string {
	return o.journalctl("--unit=" + unit)
}

// JournalctlMatchArgs is JournalctlArgs with a journal match (FIELD=VALUE,
// such as _SYSTEMD_SLICE=...) in place of --unit.
func (o LogOptions) JournalctlMatchArgs(match string) []string {
	return o.journalctl(match)
}

// journalctl returns the argv of JournalctlArgs with what selects the
// entries.
func (o LogOptions) journalctl(selector string) []string {
	argv := []string{"journalctl", selector, "--output=short-iso", "--no-pager", "--quiet"}
	if o.Since != "" {
		argv = append(argv, "--since="+o.Since)
	}
	if o.Tail > 0 {
		argv = append(argv, "--lines="+strconv.Itoa(o.Tail))
	} else {
		argv = append(argv, "--lines=all")
	}
	if o.Follow {
		argv = append(argv, "--follow")
	}
	return argv
}

// parseLogOptions validates and normalizes a logs request's query.
func parseLogOptions(q url.Values) (LogOptions, error) {
	var o LogOptions
	switch v := strings.ToLower(q.Get("follow")); v {
	case "", "0", "false", "no":
	case "1", "true", "yes":
		o.Follow = true
	default:
		return o, badRequest("query parameter follow=%q: want 1 or 0", q.Get("follow"))
	}
	if v := q.Get("since"); v != "" {
		s, err := normalizeSince(v)
		if err != nil {
			return o, badRequest("query parameter %v", err)
		}
		o.Since = s
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > api.MaxLogTail {
			return o, badRequest("query parameter tail=%q: want a number of lines from 0 (all) to %d", v, api.MaxLogTail)
		}
		o.Tail = n
	}
	return o, nil
}

// normalizeSince turns a since value (see api.ParseSince; a time
// without a zone is UTC) into journalctl syntax. A duration is kept
// relative, so that the board's clock, not the agent's, decides.
func normalizeSince(v string) (string, error) {
	ago, at, isTime, err := api.ParseSince(v, time.UTC)
	if err != nil {
		return "", err
	}
	if isTime {
		return at.UTC().Format("2006-01-02 15:04:05") + " UTC", nil
	}
	if ago == 0 {
		return "now", nil
	}
	secs := int64(ago / time.Second)
	if ago%time.Second != 0 {
		secs++ // round up: never start later than asked
	}
	return fmt.Sprintf("-%ds", secs), nil
}

// logs streams a pod's journal from its board as text/plain. Errors
// before the first byte are JSON errors with a status; an error after
// output began is sent in the api.LogErrorTrailer trailer.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, name string) {
	if s.cfg.Logs == nil {
		s.writeError(w, newError(http.StatusNotImplemented, api.CodeNotImplemented,
			"pod logs are not available: this agent was started without a log reader"))
		return
	}
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		s.writeError(w, err)
		return
	}
	// The pod's board comes from the leader's current state (unless
	// ?stale), so a lagging copy never sends the read to a board the pod
	// has left.
	if err := s.readBarrier(r); err != nil {
		s.writeError(w, err)
		return
	}
	raw, err := s.cfg.Store.Get(api.KindPod, name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	raw.Kind = api.KindPod
	o, err := api.FromRaw(raw)
	if err != nil {
		s.writeError(w, fmt.Errorf("decoding stored %s: %w", api.ObjectRef(api.KindPod, name), err))
		return
	}
	pod := o.(*api.Pod)
	if pod.Spec.Node == "" {
		phase := pod.Status.Phase
		if phase == "" {
			phase = api.PodPending
		}
		msg := fmt.Sprintf("pod %s is %s: not placed on a board yet", name, phase)
		if pod.Status.Message != "" {
			msg += " (" + pod.Status.Message + ")"
		}
		s.writeError(w, newError(http.StatusConflict, api.CodeNotPlaced, "%s", msg))
		return
	}
	if r.Method == http.MethodHead {
		setLogHeaders(w)
		w.WriteHeader(http.StatusOK)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.stopWatches:
			cancel()
		case <-ctx.Done():
		}
	}()
	lw := &logWriter{w: w, rc: http.NewResponseController(w)}
	err = s.cfg.Logs(ctx, pod, opts, lw)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	// An error after ctx ended is the stream being stopped, not a failure.
	failed := err != nil && ctx.Err() == nil
	if failed {
		s.cfg.Logger.Warn("pod logs failed", "pod", name, "node", pod.Spec.Node, "err", err)
	}
	switch {
	case !lw.started && failed:
		s.writeError(w, newError(http.StatusBadGateway, api.CodeLogsFailed,
			"logs of pod %s from board %s: %v", name, pod.Spec.Node, err))
	case !lw.started:
		setLogHeaders(w)
		w.WriteHeader(http.StatusOK)
	case failed:
		msg := fmt.Sprintf("logs of pod %s from board %s: %v", name, pod.Spec.Node, err)
		// A header value is one line.
		w.Header().Set(api.LogErrorTrailer, strings.Join(strings.Fields(msg), " "))
	}
}

// errLogClosed: a Logs function wrote after it returned.
var errLogClosed = errors.New("httpapi: logs response already finished")

// logWriter is the w given to Config.Logs: the first write sends the
// 200 header, every write is flushed to the client at once. Safe for
// concurrent use.
type logWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the header was sent
	closed  bool // Logs returned
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errLogClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !l.started {
		setLogHeaders(l.w)
		l.w.WriteHeader(http.StatusOK)
		l.started = true
	}
	n, err := l.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, l.rc.Flush()
}

func setLogHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Trailer", api.LogErrorTrailer)
}
