package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/herd-dev/herd/api"
)

// watch streams the store's events for kind ("" for every kind) as NDJSON:
// one api.WatchEvent per line, flushed as it comes, with a blank line as a
// heartbeat while idle. The stream ends when the client goes away, the
// server shuts down, or the store ends the watch (its last event is then
// RELIST). A resourceVersion older than the store's history is 410 Gone.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, kind api.Kind) {
	rv, err := uintParam(r, "resourceVersion")
	if err != nil {
		s.writeError(w, err)
		return
	}
	match, err := s.selector(r)
	if err != nil {
		s.writeError(w, err)
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
	events, err := s.cfg.Store.Watch(ctx, kind, rv)
	if err != nil {
		s.writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	enc := json.NewEncoder(w)
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type != api.EventRelist && !match(ev.Object.Metadata.Labels) {
				continue
			}
			if enc.Encode(ev) != nil || rc.Flush() != nil {
				return
			}
			heartbeat.Reset(s.cfg.Heartbeat)
		case <-heartbeat.C:
			if _, err := w.Write([]byte("\n")); err != nil || rc.Flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
