package httpapi

import (
	"context"
	"net"
	"net/http"

	"github.com/herd-dev/herd/api"
)

// MetricsPath is where the agent serves its Prometheus metrics
// (Config.Metrics).
const MetricsPath = "/metrics"

// withMetrics serves GET (and HEAD) MetricsPath with Config.Metrics and
// everything else with next. It sits behind guard: the credential has
// been checked, and a metrics token reaches only this route.
func (s *Server) withMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != MetricsPath {
			next.ServeHTTP(w, r)
			return
		}
		s.serveMetrics(w, r)
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound, "no metrics on this agent"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.notAllowed(w, r, "GET, HEAD")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// metricsOnly serves MetricsPath and refuses every other path (404): the
// handler of a metrics listener (ServeMetrics).
func (s *Server) metricsOnly() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != MetricsPath {
			s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound, "no route %s: this listener serves only GET %s", r.URL.Path, MetricsPath))
			return
		}
		s.serveMetrics(w, r)
	})
}

// MetricsHandler returns the handler of a metrics listener: GET
// MetricsPath behind the same Host, Origin and credential checks as the
// API (an API or a metrics token; root on a unix socket), 404 for every
// other path.
func (s *Server) MetricsHandler() http.Handler { return s.metricsHandler }

// ServeMetrics serves only MetricsPath (MetricsHandler) on every listener
// until ctx ends, with the API's connection cap and timeouts, then shuts
// down and returns nil. It closes the listeners.
func (s *Server) ServeMetrics(ctx context.Context, listeners ...net.Listener) error {
	return s.serve(ctx, s.metricsHandler, "metrics", listeners)
}

// metricsTokenOK reports whether got carries a metrics token
// (Config.MetricsTokens), and the error to answer when they cannot be read.
func (s *Server) metricsTokenOK(got string) (bool, error) {
	if s.cfg.MetricsTokens == nil {
		return false, nil
	}
	accepted, err := s.cfg.MetricsTokens.Accepted()
	if err != nil {
		return false, err
	}
	return tokenOK(got, accepted), nil
}
