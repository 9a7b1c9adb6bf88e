package httpapi

import (
	"context"
	"crypto/subtle"
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
	"github.com/herd-dev/herd/client"
)

// Sentinel errors.
var (
	// ErrNoToken: a non-loopback TCP listener was given to a server without
	// a token.
	ErrNoToken = errors.New("httpapi: a token is required to serve on a non-loopback address")
	// ErrSocketInUse: another process is serving on the unix socket path.
	ErrSocketInUse = errors.New("httpapi: unix socket in use")
)

// DefaultMaxBodyBytes is the default limit of a request body.
const DefaultMaxBodyBytes = 4 << 20

// Config configures a Server.
type Config struct {
	// Store holds the objects. Required.
	Store Store
	// Status returns this agent's view of the cluster for GET /v1/status.
	// Optional: without it the route answers with an empty status.
	Status func() client.Status
	// Logs writes the journal of pod's unit, read on the board the pod is
	// placed on (pod.Spec.Node, never empty), to w as it arrives, for GET
	// /v1/pods/{name}/logs. opts are validated and normalized (see
	// LogOptions). With opts.Follow it keeps writing until ctx ends (the
	// client went away or the server shuts down) and should then return
	// ctx's error. w flushes every write to the client; it must not be used
	// after Logs returns. Called concurrently, once per request. Optional:
	// without it the route answers 501.
	Logs func(ctx context.Context, pod *api.Pod, opts LogOptions, w io.Writer) error
	// Token, when set, must be presented by every request as
	// "Authorization: Bearer <token>". Required to serve on a non-loopback
	// TCP address.
	Token string
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
	// Clock stamps creation times.
	Clock Clock
	// Logger receives one debug line per request.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled; the caller sets
// Store (and Status, Token as needed).
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes: DefaultMaxBodyBytes,
		WriteTimeout: 15 * time.Second,
		Heartbeat:    15 * time.Second,
		Admission:    APIAdmission{},
		Clock:        realClock{},
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
	case c.Heartbeat <= 0:
		return fmt.Errorf("httpapi: config: Heartbeat must be positive, got %s", c.Heartbeat)
	case c.Admission == nil:
		return errors.New("httpapi: config: Admission is required")
	case c.Clock == nil:
		return errors.New("httpapi: config: Clock is required")
	case c.Logger == nil:
		return errors.New("httpapi: config: Logger is required")
	case strings.ContainsAny(c.Token, " \t\r\n"):
		return errors.New("httpapi: config: Token must not contain white space")
	}
	return nil
}

// Server serves the API. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	handler http.Handler
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
	s := &Server{cfg: cfg, stopWatches: make(chan struct{})}
	s.handler = s.logRequests(s.authenticate(http.HandlerFunc(s.route)))
	return s, nil
}

// Handler returns the API as an http.Handler (token check and request
// logging included).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves the API on every listener until ctx ends, then shuts down
// gracefully (watch streams are ended first) and returns nil. It refuses,
// before serving anything, a non-loopback TCP listener when no token is set.
// TCP listeners are wrapped in TLS when Config.TLS is set. Serve closes the
// listeners. Call it once per Server.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	if len(listeners) == 0 {
		return errors.New("httpapi: serve: no listeners")
	}
	for _, l := range listeners {
		if err := s.checkListener(l.Addr()); err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return err
		}
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		if _, ok := l.Addr().(*net.TCPAddr); ok && s.cfg.TLS != nil {
			l = tls.NewListener(l, s.cfg.TLS)
		}
		s.cfg.Logger.Info("api listening", "addr", listenerName(l), "tls", s.cfg.TLS != nil && l.Addr().Network() == "tcp")
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

func (s *Server) checkListener(a net.Addr) error {
	ta, ok := a.(*net.TCPAddr)
	if !ok || s.cfg.Token != "" || ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: refusing to listen on %s without one (set the API token, or listen on 127.0.0.1 or a unix socket)", ErrNoToken, a)
}

// ListenAndServe listens on every address (host:port, or unix:///path for a
// unix socket) and serves until ctx ends, as Serve. It checks the token
// requirement before opening anything.
func (s *Server) ListenAndServe(ctx context.Context, addrs ...string) error {
	for _, a := range addrs {
		if strings.HasPrefix(a, "unix://") {
			continue
		}
		ta, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			return fmt.Errorf("httpapi: listen address %q: %w", a, err)
		}
		if err := s.checkListener(ta); err != nil {
			return err
		}
	}
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

// ListenUnix listens on the unix socket at path (absolute), with mode 0660
// so that the socket's group may use the API. A stale socket left by a
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

// authenticate checks the bearer token when one is configured.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			msg := "missing bearer token: send \"Authorization: Bearer <token>\""
			if len(got) > 0 {
				msg = "invalid bearer token"
			}
			s.writeError(w, newError(http.StatusUnauthorized, CodeUnauthorized, "%s", msg))
			return
		}
		next.ServeHTTP(w, r)
	})
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
