package httpapi

import (
	"embed"
	"net/http"
	"path"
	"strings"

	"github.com/herd-dev/herd/api"
)

// The dashboard: one page with its script and style sheet, embedded in the
// agent (no CDN, no build step), served under /ui/ behind the same guard as
// /v1 (Host, Origin, bearer token). The page reads the fleet through the
// /v1 list and watch routes only; `herdctl dashboard` serves it to the
// laptop's browser through a loopback proxy that adds the token.
//
//go:embed ui/index.html ui/app.js ui/style.css ui/icon.svg
var uiFiles embed.FS

// uiContentTypes are the dashboard's files and their media types.
var uiContentTypes = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
	"icon.svg":   "image/svg+xml",
}

// uiCSP is the dashboard's Content-Security-Policy: its own script, style
// and icon, requests to its own origin only, no inline script or style, no
// frames, no forms, no plugins.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// isUIPath reports whether p is the dashboard's (/ui or under /ui/).
func isUIPath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }

// ui serves the dashboard: GET /ui/ (the page), /ui/app.js, /ui/style.css,
// /ui/icon.svg and /ui/warnings (what each board cannot do, from
// api.NodeStatus.Warnings, so the rule keeps one home).
func (s *Server) ui(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.notAllowed(w, r, "GET, HEAD")
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	switch {
	case r.URL.Path == "/ui":
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		return
	case name == "":
		name = "index.html"
	case name == "warnings":
		s.uiWarnings(w, r)
		return
	}
	ct, ok := uiContentTypes[name]
	if !ok || path.Base(name) != name {
		s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound, "no dashboard file %s", r.URL.Path))
		return
	}
	b, err := uiFiles.ReadFile("ui/" + name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	h.Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
}

// uiWarning is one api.NodeWarning in the body of GET /ui/warnings, which
// maps node names to their warnings (boards without any left out).
type uiWarning struct {
	Short   string `json:"short"`
	Message string `json:"message"`
}

// uiWarnings answers each node's warnings, from this agent's copy of the
// nodes (?stale semantics: the page refreshes them on every node change).
func (s *Server) uiWarnings(w http.ResponseWriter, _ *http.Request) {
	objs, _, err := s.cfg.Store.List(api.KindNode)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := map[string][]uiWarning{}
	for _, o := range objs {
		obj, err := api.FromRaw(o)
		if err != nil {
			continue // a node this agent cannot decode has nothing to say
		}
		st := obj.(*api.Node).Status
		for _, nw := range st.Warnings() {
			out[o.Metadata.Name] = append(out[o.Metadata.Name], uiWarning{Short: nw.Short, Message: nw.Message})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
