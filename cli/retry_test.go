package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/herd-dev/herd/api"
)

// failingFront answers the next n requests of method with a 503 of code,
// then passes requests to next, counting those of method.
type failingFront struct {
	next   http.Handler
	method string
	code   string

	mu   sync.Mutex
	n    int
	seen int
}

func (f *failingFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	fail := false
	if r.Method == f.method {
		f.seen++
		fail = f.n > 0
		if fail {
			f.n--
		}
	}
	f.mu.Unlock()
	if !fail {
		f.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(api.APIError{Code: f.code,
		Message: "injected " + f.code + ": the write may or may not have been applied; get the object again before retrying"})
}

func (f *failingFront) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// startFailingAgent serves the harness's API behind a front that fails
// the first n requests of method with code.
func startFailingAgent(t *testing.T, h *harness, method, code string, n int) *failingFront {
	t.Helper()
	f := &failingFront{next: h.handler, method: method, code: code, n: n}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	startAgent(t, h)
	h.loadFixtures()
	h.env["HERD_ADDR"] = srv.URL
	return f
}

// TestRetriesAcrossElection: herdctl resends reads and writes after an
// election's 503s (a write carries a request id, so a resend is applied
// at most once).
func TestRetriesAcrossElection(t *testing.T) {
	t.Run("get", func(t *testing.T) {
		h := newHarness(t)
		f := startFailingAgent(t, h, http.MethodGet, api.CodeNoLeader, 2)
		out, _ := h.mustRun(0, "get", "deploy", "web")
		if !strings.Contains(out, "web") {
			t.Errorf("get: %q", out)
		}
		if got := f.requests(); got != 3 {
			t.Errorf("%d GETs, want 3 (2 refused, 1 answered)", got)
		}
	})
	t.Run("scale", func(t *testing.T) {
		h := newHarness(t)
		f := startFailingAgent(t, h, http.MethodPut, api.CodeOutcomeUnknown, 1)
		out, _ := h.mustRun(0, "scale", "deploy/web", "--replicas", "4")
		if out != "deployment/web scaled to 4\n" {
			t.Errorf("scale: %q", out)
		}
		if got := f.requests(); got != 2 {
			t.Errorf("%d PUTs, want 2: scale to 4 is safe to resend", got)
		}
	})
	t.Run("delete", func(t *testing.T) {
		h := newHarness(t)
		f := startFailingAgent(t, h, http.MethodDelete, api.CodeOutcomeUnknown, 1)
		out, _ := h.mustRun(0, "delete", "deploy", "web")
		if out != "deployment/web deleted\n" {
			t.Errorf("delete: %q", out)
		}
		if got := f.requests(); got != 2 {
			t.Errorf("%d DELETEs, want 2: a delete carries a request id, so it is safe to resend", got)
		}
	})
}
