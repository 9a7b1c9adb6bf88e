package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/atomicfile"
	"github.com/herd-dev/herd/internal/clock"
	"golang.org/x/sys/unix"
)

// TokenBytes is how many random bytes GenerateToken draws.
const TokenBytes = 32

// TokenSource gives the tokens the API accepts. Accepted is called on every
// request; it must be safe for concurrent use and cheap.
type TokenSource interface {
	// Accepted returns every token currently accepted. An error means no
	// token is accepted (the request gets 503, naming the problem).
	Accepted() ([]string, error)
}

// StaticTokens is a fixed set of accepted tokens.
type StaticTokens []string

// Accepted implements TokenSource.
func (s StaticTokens) Accepted() ([]string, error) { return s, nil }

// GenerateToken returns a new random API token: TokenBytes random bytes,
// base64url without padding.
func GenerateToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("httpapi: generating a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// WriteTokenFile writes token as a new token file at path (mode 0600,
// atomically: temporary file then rename). An existing file is replaced.
func WriteTokenFile(path, token string) error {
	if err := api.CheckToken(token); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("httpapi: token file: %w", err)
	}
	return nil
}

// TokenFile is a TokenSource backed by a token file, re-read when its
// modification time, size or inode changes (checked at most every
// TokenFileRecheck, so a rotation takes effect within that time without a
// restart or signal). When a re-read fails the tokens read before stay
// accepted and the error is logged once by the caller through OnError.
type TokenFile struct {
	path string
	// OnError, when set, is told of a failed re-read (once per change).
	OnError func(error)

	mu      sync.Mutex
	checked time.Time
	stamp   fileStamp
	tokens  []string
	clock   clock.Clock
}

// TokenFileRecheck is how often a TokenFile looks at its file's stamp.
const TokenFileRecheck = time.Second

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = s.Ino
	}
	return st
}

// OpenTokenFile reads path and returns a TokenFile over it; the file must
// hold at least one token now.
func OpenTokenFile(path string) (*TokenFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("httpapi: token file: %w", err)
	}
	toks, err := api.ReadTokenFile(path)
	if err != nil {
		return nil, err
	}
	return &TokenFile{path: path, stamp: stampOf(fi), tokens: toks, checked: clock.RealClock().Now(), clock: clock.RealClock()}, nil
}

// Path returns the file's path.
func (t *TokenFile) Path() string { return t.path }

// Accepted implements TokenSource.
func (t *TokenFile) Accepted() ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if now.Sub(t.checked) < TokenFileRecheck && !now.Before(t.checked) {
		return t.tokens, nil
	}
	t.checked = now
	t.reloadLocked()
	return t.tokens, nil
}

func (t *TokenFile) reloadLocked() {
	fi, err := os.Stat(t.path)
	if err != nil {
		t.fail(fileStamp{}, fmt.Errorf("httpapi: token file: %w (keeping the tokens read before)", err))
		return
	}
	st := stampOf(fi)
	if st == t.stamp {
		return
	}
	toks, err := api.ReadTokenFile(t.path)
	if err != nil {
		t.fail(st, fmt.Errorf("%w (keeping the tokens read before)", err))
		return
	}
	t.stamp, t.tokens = st, toks
}

// fail reports err once per stamp (a missing file has the zero stamp).
func (t *TokenFile) fail(st fileStamp, err error) {
	if st == t.stamp {
		return
	}
	t.stamp = st
	if t.OnError != nil {
		t.OnError(err)
	}
}

// tokenOK reports whether got (the Authorization header) carries one of
// the accepted tokens. Each comparison is constant-time.
func tokenOK(got string, accepted []string) bool {
	tok, ok := strings.CutPrefix(got, "Bearer ")
	if !ok || tok == "" {
		return false
	}
	match := 0
	for _, a := range accepted {
		match |= subtle.ConstantTimeCompare([]byte(tok), []byte(a))
	}
	return match == 1
}

// apiListener caps the connections a listener holds open at once and
// records the peer credentials of unix socket connections.
type apiListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func newAPIListener(l net.Listener, maxConns int) *apiListener {
	return &apiListener{Listener: l, sem: make(chan struct{}, maxConns), done: make(chan struct{})}
}

func (l *apiListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	ac := &apiConn{Conn: c, release: func() { <-l.sem }, uid: -1}
	if uc, ok := c.(*net.UnixConn); ok {
		ac.unix = true
		ac.uid = peerUID(uc)
	}
	return ac, nil
}

func (l *apiListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// apiConn is an accepted API connection.
type apiConn struct {
	net.Conn
	once    sync.Once
	release func()
	unix    bool
	uid     int // peer uid on a unix socket, -1 when unknown
}

func (c *apiConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// peerUID returns the uid of the process at the other end of c
// (SO_PEERCRED), or -1.
func peerUID(c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	uid := -1
	_ = rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err == nil {
			uid = int(cred.Uid)
		}
	})
	return uid
}

type connKey struct{}

// connContext stores the accepted connection for the handlers.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if ac, ok := c.(*apiConn); ok {
		return context.WithValue(ctx, connKey{}, ac)
	}
	return ctx
}

// connOf returns the connection r came on, when it came through Serve.
func connOf(r *http.Request) *apiConn {
	ac, _ := r.Context().Value(connKey{}).(*apiConn)
	return ac
}

// onUnixSocket reports whether r came over a unix socket.
func onUnixSocket(r *http.Request) bool {
	if ac := connOf(r); ac != nil {
		return ac.unix
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return la != nil && la.Network() == "unix"
}

// hostAllowed reports whether r's Host header may name this API: an IP
// literal (any port: SSH port forwards and NAT change the port, and a
// rebinding attack needs a DNS name, which an IP literal is not),
// localhost (which browsers resolve to loopback only), or one of the
// configured names (with or without a port). Any other name is a DNS
// rebinding page's. Requests over a unix socket are not checked: a browser
// cannot reach a socket.
func (s *Server) hostAllowed(r *http.Request) bool {
	if onUnixSocket(r) {
		return true
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"), ""
	}
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" {
		return true
	}
	for _, h := range s.cfg.Hosts {
		h = strings.ToLower(h)
		if hh, hp, err := net.SplitHostPort(h); err == nil {
			if hh == host && hp == port {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}

// originAllowed: a request without Origin (herdctl, curl) passes; one with
// Origin must name exactly the host it was sent to.
func originAllowed(r *http.Request) bool {
	o := r.Header.Values("Origin")
	if len(o) == 0 {
		return true
	}
	if len(o) > 1 {
		return false
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return o[0] == scheme+r.Host
}

// isWrite reports whether r's method changes state.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// jsonBody reports whether r declares a JSON body.
func jsonBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// guard applies the browser defenses, the credential check and the body
// read deadline, in that order, before next.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r) {
			s.writeError(w, newError(http.StatusMisdirectedRequest, api.CodeForbidden,
				"Host %q is not this API's address: use the address it listens on, or list the name in the agent's api_hosts", r.Host))
			return
		}
		if !originAllowed(r) {
			s.writeError(w, newError(http.StatusForbidden, api.CodeForbidden,
				"cross-origin requests are refused (Origin %q)", r.Header.Get("Origin")))
			return
		}
		if !s.authorized(w, r) {
			return
		}
		if isWrite(r.Method) && r.ContentLength != 0 {
			if !jsonBody(r) {
				s.writeError(w, newError(http.StatusUnsupportedMediaType, api.CodeBadRequest,
					"Content-Type %q: request bodies must be application/json", r.Header.Get("Content-Type")))
				return
			}
			// Bounded until readBody has the whole body; watch and log
			// streams have no body and are not bounded.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// authorized checks the bearer token, or on a unix socket the peer's uid,
// and writes the error when neither passes.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if ac := connOf(r); ac != nil && ac.unix && ac.uid >= 0 {
		for _, u := range s.cfg.SocketUIDs {
			if ac.uid == u {
				return true
			}
		}
	}
	got := r.Header.Get("Authorization")
	accepted, err := s.tokens.Accepted()
	if err != nil {
		s.writeError(w, newError(http.StatusServiceUnavailable, api.CodeUnauthorized, "API tokens unavailable: %v", err))
		return false
	}
	if tokenOK(got, accepted) {
		return true
	}
	if ok, err := s.metricsTokenOK(got); err != nil {
		s.writeError(w, newError(http.StatusServiceUnavailable, api.CodeUnauthorized, "metrics tokens unavailable: %v", err))
		return false
	} else if ok {
		if r.URL.Path == MetricsPath {
			return true
		}
		s.writeError(w, newError(http.StatusForbidden, api.CodeForbidden, "the metrics token grants only GET %s", MetricsPath))
		return false
	}
	msg := "missing bearer token: send \"Authorization: Bearer <token>\" (herdctl reads it from the context's token_file, $HERD_TOKEN or $HERD_TOKEN_FILE)"
	if got != "" {
		msg = "invalid bearer token"
	}
	s.writeError(w, newError(http.StatusUnauthorized, api.CodeUnauthorized, "%s", msg))
	return false
}
