package httpapi

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/herd-dev/herd/api"
)

// PprofPath is the prefix of the profiling routes (Config.Pprof).
const PprofPath = "/debug/pprof/"

// isPprofPath reports whether p is one of the profiling routes' paths.
func isPprofPath(p string) bool { return p == "/debug/pprof" || strings.HasPrefix(p, PprofPath) }

// pprofMux serves Go's runtime profiles (net/http/pprof) under PprofPath:
// the index, cmdline, profile (CPU, ?seconds=N), symbol, trace and every
// named profile (heap, allocs, goroutine, block, mutex, threadcreate). It
// is mounted on its own mux, never on http.DefaultServeMux.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(PprofPath, pprof.Index) // named profiles: /debug/pprof/heap, ...
	mux.HandleFunc(PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(PprofPath+"profile", pprof.Profile)
	mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(PprofPath+"trace", pprof.Trace)
	return mux
}

// servePprof serves r with the profiling routes when Config.Pprof is on,
// else with the API's 404. It sits behind guard: only an API token (or
// root on the unix socket) reaches it; a metrics token does not.
func (s *Server) servePprof(w http.ResponseWriter, r *http.Request) {
	if s.pprof == nil {
		s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound,
			"no route %s: profiling is off on this agent (pprof = true in its config turns it on)", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.notAllowed(w, r, "GET, HEAD")
		return
	}
	if r.URL.Path == "/debug/pprof" {
		http.Redirect(w, r, PprofPath, http.StatusMovedPermanently)
		return
	}
	s.pprof.ServeHTTP(w, r)
}
