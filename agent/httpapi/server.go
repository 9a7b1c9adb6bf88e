package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/internal/secretbox"
)

// Sentinel errors.
var (
	// ErrNoToken: a server was configured without any token. Every
	// listener, loopback and unix socket included, requires one.
	ErrNoToken = errors.New("httpapi: an API token is required")
	// ErrSocketInUse: another process is serving on the unix socket path.
	ErrSocketInUse = errors.New("httpapi: unix socket in use")
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes is the default limit of a request body.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxConns is the default cap on the connections one listener
	// holds open at once.
	DefaultMaxConns = 64
	// DefaultReadTimeout is the default bound on reading a request body.
	DefaultReadTimeout = 10 * time.Second
)

// Config configures a Server.
type Config struct {
	// Store holds the objects. Required.
	Store Store
	// Status returns this agent's view of the cluster for GET /v1/status,
	// within ctx (bounded by WriteTimeout); it must name as leader only a
	// server that has confirmed its leadership. Optional: without it the
	// route answers with an empty status.
	Status func(ctx context.Context) api.ClusterStatus
	// Logs writes the journal of pod's unit (units.UnitName of the pod's
	// name, never anything from its status), read on the board the pod is
	// placed on (pod.Spec.Node, never empty), to w as it arrives, for GET
	// /v1/pods/{name}/logs. opts are validated and normalized (see
	// LogOptions). With opts.Follow it keeps writing until ctx ends (the
	// client went away or the server shuts down) and should then return
	// ctx's error. w flushes every write to the client; it must not be used
	// after Logs returns. Called concurrently, once per request. Optional:
	// without it the route answers 501.
	Logs func(ctx context.Context, pod *api.Pod, opts LogOptions, w io.Writer) error
	// Token is a single accepted token, shorthand for
	// Tokens: StaticTokens{Token}. Every request presents one of the
	// accepted tokens as "Authorization: Bearer <token>" (compared in
	// constant time), on every listener. Token or Tokens is required.
	Token string
	// Tokens gives the accepted tokens (a TokenFile re-reads its file as it
	// changes, for rotation). When set, Token is ignored.
	Tokens TokenSource
	// SocketUIDs are the peer uids (SO_PEERCRED) that need no token on a
	// unix socket listener. Default: {0} (root). Empty after New only when
	// set to an empty non-nil slice.
	SocketUIDs []int
	// Hosts are the DNS names (host, any port, or host:port) a request's
	// Host header may carry besides IP literals and localhost; any other
	// name is refused with 421, against DNS rebinding.
	Hosts []string
	// MaxConns caps the connections each listener holds open at once
	// (watch and log streams included); further clients wait in the
	// kernel's accept queue.
	MaxConns int
	// ReadTimeout bounds reading one request's body (not the watch and log
	// streams, which have none); headers are bounded separately.
	ReadTimeout time.Duration
	// Metrics, when set, is served at GET /metrics (MetricsPath): the
	// Prometheus exposition, behind the same checks as the API. Without it
	// /metrics is 404.
	Metrics http.Handler
	// MetricsTokens, when set, are tokens that grant GET /metrics only (on
	// every listener; any other route answers them 403). API tokens work
	// on /metrics too. Same file format and rotation as Tokens.
	MetricsTokens TokenSource
	// Pprof mounts Go's runtime profiles (as net/http/pprof would) under
	// /debug/pprof/ (PprofPath) on the API, behind the same checks: only
	// an API token, or root on the unix socket, reaches them (a metrics
	// token does not). Off, those paths are 404. For profiling an agent
	// (go tool pprof); a CPU profile or trace costs CPU while it runs.
	Pprof bool
	// TLS, when set, wraps the TCP listeners given to Serve.
	TLS *tls.Config
	// MaxBodyBytes limits request bodies; larger ones get 413.
	MaxBodyBytes int64
	// WriteTimeout bounds how long one request waits for the store (a
	// write that cannot commit ends with 503). Watches are not bounded.
	WriteTimeout time.Duration
	// Heartbeat is how often an idle watch stream sends a blank line so
	// that proxies and tunnels keep it open and dead peers are noticed.
	Heartbeat time.Duration
	// Admission defaults and validates objects and parses selectors.
	Admission Admission
	// Secrets seals the values of secrets written through the API (see
	// secrets.go). nil on an agent that holds no server key: it refuses
	// secret writes.
	Secrets *secretbox.Ring
	// Clock stamps creation times.
	Clock clock.Clock
	// Logger receives one debug line per request.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled; the caller sets
// Store (and Status, Token as needed).
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes: DefaultMaxBodyBytes,
		MaxConns:     DefaultMaxConns,
		ReadTimeout:  DefaultReadTimeout,
		SocketUIDs:   []int{0},
		WriteTimeout: 15 * time.Second,
		Heartbeat:    15 * time.Second,
		Admission:    APIAdmission{},
		Clock:        clock.RealClock(),
		Logger:       slog.New(slog.DiscardHandler),
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("httpapi: config: Store is required")
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("httpapi: config: MaxBodyBytes must be positive, got %d", c.MaxBodyBytes)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("httpapi: config: WriteTimeout must be positive, got %s", c.WriteTimeout)
	case c.MaxConns <= 0:
		return fmt.Errorf("httpapi: config: MaxConns must be positive, got %d", c.MaxConns)
	case c.ReadTimeout <= 0:
		return fmt.Errorf("httpapi: config: ReadTimeout must be positive, got %s", c.ReadTimeout)
	case c.Token == "" && c.Tokens == nil:
		return fmt.Errorf("%w: set Token or Tokens (every listener needs one)", ErrNoToken)
	case c.Heartbeat <= 0:
		return fmt.Errorf("httpapi: config: Heartbeat must be positive, got %s", c.Heartbeat)
	case c.Admission == nil:
		return errors.New("httpapi: config: Admission is required")
	case c.Clock == nil:
		return errors.New("httpapi: config: Clock is required")
	case c.Logger == nil:
		return errors.New("httpapi: config: Logger is required")
	}
	if c.Tokens == nil {
		if err := api.CheckToken(c.Token); err != nil {
			return fmt.Errorf("httpapi: config: Token: %v", strings.TrimPrefix(err.Error(), "api: "))
		}
	}
	for i, h := range c.Hosts {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			return fmt.Errorf("httpapi: config: Hosts[%d] %q: want a host name or host:port", i, h)
		}
	}
	return nil
}

// Server serves the API. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	tokens  TokenSource
	handler http.Handler
	// metricsHandler serves only /metrics (MetricsHandler).
	metricsHandler http.Handler
	router         *http.ServeMux // the /v1 routes (newRouter)
	pprof          *http.ServeMux // the profiling routes; nil unless Config.Pprof
	// stopWatches is closed when Serve begins shutting down, ending every
	// watch stream so that graceful shutdown does not wait for them.
	stopOnce    sync.Once
	stopWatches chan struct{}
}

// New returns a server for cfg. Zero fields of cfg take their DefaultConfig
// values.
func New(cfg Config) (*Server, error) {
	d := DefaultConfig()
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = d.MaxBodyBytes
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = d.WriteTimeout
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = d.Heartbeat
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = d.MaxConns
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = d.ReadTimeout
	}
	if cfg.SocketUIDs == nil {
		cfg.SocketUIDs = d.SocketUIDs
	}
	if cfg.Admission == nil {
		cfg.Admission = d.Admission
	}
	if cfg.Clock == nil {
		cfg.Clock = d.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Logger
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tokens: cfg.Tokens, stopWatches: make(chan struct{})}
	if s.tokens == nil {
		s.tokens = StaticTokens{cfg.Token}
	}
	s.router = s.newRouter()
	if cfg.Pprof {
		s.pprof = pprofMux()
	}
	s.handler = s.logRequests(s.guard(s.withMetrics(http.HandlerFunc(s.route))))
	s.metricsHandler = s.logRequests(s.guard(s.metricsOnly()))
	return s, nil
}

// Handler returns the API as an http.Handler (Host, Origin, token and
// Content-Type checks and request logging included). Peer credentials and
// the connection cap apply only to listeners given to Serve.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves the API on every listener until ctx ends, then shuts down
// gracefully (watch streams are ended first) and returns nil. Each listener
// holds at most Config.MaxConns connections; on a unix socket the peer's
// uid is read for Config.SocketUIDs. TCP listeners are wrapped in TLS when
// Config.TLS is set. Serve closes the listeners. Call it once per Server.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	return s.serve(ctx, s.handler, "api", listeners)
}

// serve serves h on every listener until ctx ends (Serve, ServeMetrics);
// what names the listeners in the log.
func (s *Server) serve(ctx context.Context, h http.Handler, what string, listeners []net.Listener) error {
	if len(listeners) == 0 {
		return errors.New("httpapi: serve: no listeners")
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext:       connContext,
	}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		l = newAPIListener(l, s.cfg.MaxConns)
		if _, ok := l.Addr().(*net.TCPAddr); ok && s.cfg.TLS != nil {
			l = tls.NewListener(l, s.cfg.TLS)
		}
		s.cfg.Logger.Info(what+" listening", "addr", listenerName(l), "tls", s.cfg.TLS != nil && l.Addr().Network() == "tcp")
		go func() { errc <- hs.Serve(l) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("httpapi: serve: %w", err)
	}
	s.stopOnce.Do(func() { close(s.stopWatches) })
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		hs.Close()
	}
	return err
}

func listenerName(l net.Listener) string {
	if l.Addr().Network() == "unix" {
		return "unix://" + l.Addr().String()
	}
	return l.Addr().String()
}

// ListenAndServe listens on every address (host:port, or unix:///path for a
// unix socket) and serves until ctx ends, as Serve.
func (s *Server) ListenAndServe(ctx context.Context, addrs ...string) error {
	var ls []net.Listener
	for _, a := range addrs {
		l, err := Listen(a)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return err
		}
		ls = append(ls, l)
	}
	return s.Serve(ctx, ls...)
}

// Listen opens a listener for addr: host:port for TCP, or unix:///path for
// a unix socket (see ListenUnix).
func Listen(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return ListenUnix(p)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("httpapi: listen address %q: want host:port or unix:///path: %w", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen on %s: %w", addr, err)
	}
	return l, nil
}

// ListenUnix listens on the unix socket at path (absolute), with mode 0660:
// its owner and group (root and root's group for the agent) may connect;
// they still need a token unless their uid is in Config.SocketUIDs. A stale socket left by a
// process that died is removed; a socket someone still serves on is
// ErrSocketInUse; any other file at path is an error.
func ListenUnix(path string) (net.Listener, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("httpapi: unix socket path %q must be absolute", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("httpapi: %s exists and is not a unix socket; not removing it", path)
		}
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s answers connections (is another agent running?)", ErrSocketInUse, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("httpapi: removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen on unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("httpapi: chmod unix socket %s: %w", path, err)
	}
	return l, nil
}

// statusWriter records the status code for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.cfg.Logger.Debug("api request", "method", r.Method, "path", r.URL.Path,
			"status", sw.status, "duration", time.Since(start))
	})
}
