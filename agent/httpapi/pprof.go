package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// PprofPath is the prefix of the profiling routes (Config.Pprof).
const PprofPath = "/debug/pprof/"

// isPprofPath reports whether p is one of the profiling routes' paths.
func isPprofPath(p string) bool { return p == "/debug/pprof" || strings.HasPrefix(p, PprofPath) }

// maxProfileSeconds bounds ?seconds= of a CPU profile or trace.
const maxProfileSeconds = 600

// pprofMux serves Go's runtime profiles under PprofPath, in the formats
// and at the paths of net/http/pprof that `go tool pprof` and `go tool
// trace` read: the index (plain text), cmdline, profile (CPU,
// ?seconds=N, default 30), trace (?seconds=N, default 1) and every named
// profile (heap, allocs, goroutine, block, mutex, threadcreate; ?debug=N
// for text, ?gc=1 collects before a heap profile). It is written on
// runtime/pprof instead of mounting net/http/pprof, whose HTML index links
// the template engine into the agent: about a quarter of a megabyte of
// resident memory on every board for a page nobody needs (BENCHMARKS.md).
// It is mounted on its own mux, never on http.DefaultServeMux.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(PprofPath, servePprofNamed)
	mux.HandleFunc(PprofPath+"cmdline", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, strings.Join(os.Args, "\x00"))
	})
	mux.HandleFunc(PprofPath+"profile", func(w http.ResponseWriter, r *http.Request) {
		serveTimed(w, r, 30, pprof.StartCPUProfile, pprof.StopCPUProfile)
	})
	mux.HandleFunc(PprofPath+"trace", func(w http.ResponseWriter, r *http.Request) {
		serveTimed(w, r, 1, trace.Start, trace.Stop)
	})
	return mux
}

// servePprofNamed serves the index at PprofPath and a named profile below it.
func servePprofNamed(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, PprofPath)
	if name == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "profiles under %s (?debug=1 for text):\n", PprofPath)
		for _, p := range pprof.Profiles() {
			fmt.Fprintf(w, "%8d %s\n", p.Count(), p.Name())
		}
		fmt.Fprintf(w, "       - profile (CPU, ?seconds=30)\n       - trace (?seconds=1)\n       - cmdline\n")
		return
	}
	p := pprof.Lookup(name)
	if p == nil {
		pprofError(w, http.StatusNotFound, "no profile %q (%s lists them)", name, PprofPath)
		return
	}
	debug, err := queryInt(r, "debug", 0, 0, 2)
	if err != nil {
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if name == "heap" && boolParam(r, "gc") {
		runtime.GC()
	}
	if debug > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	p.WriteTo(w, debug)
}

// serveTimed runs start(w) for ?seconds= (def when absent), or until the
// request ends, then stop: a CPU profile or an execution trace. Only one
// of each runs at a time (start fails for the second).
func serveTimed(w http.ResponseWriter, r *http.Request, def int, start func(io.Writer) error, stop func()) {
	sec, err := queryInt(r, "seconds", def, 1, maxProfileSeconds)
	if err != nil {
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := start(w); err != nil {
		pprofError(w, http.StatusConflict, "could not start: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(sec)*time.Second)
	defer cancel()
	<-ctx.Done()
	stop()
}

// queryInt reads the integer query parameter key of r, def when absent,
// and checks it lies in [lo, hi].
func queryInt(r *http.Request, key string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("?%s=%q: want a whole number from %d to %d", key, v, lo, hi)
	}
	return n, nil
}

// pprofError answers a profiling request with a plain-text error (the
// profiling tools print the body).
func pprofError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Del("Content-Disposition")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
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
