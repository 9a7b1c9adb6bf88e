package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// herdctl dashboard serves the agent's dashboard page (/ui/) to the
// laptop's browser through a proxy on 127.0.0.1 that adds the API token
// on its way to the agent (through the context's SSH tunnel, when it has
// one). The browser never sees the token. The proxy is built for a
// hostile local web: a one-time code in the printed URL is exchanged once
// for an HttpOnly, SameSite=Strict session cookie; without the cookie a
// request gets 401; the Host must be the listener's own 127.0.0.1:PORT
// (DNS rebinding) and a foreign Origin is refused; only GET and HEAD of
// /ui/ and /v1/ go to the agent, so the page can look but not steer.

// dashCookie is the session cookie's name.
const dashCookie = "herd_dashboard"

// dashForwarder sends a GET to the agent's API with the credentials
// herdctl has (client.Client.ForwardGet).
type dashForwarder interface {
	ForwardGet(ctx context.Context, path, rawQuery string, stream bool) (*http.Response, context.CancelFunc, error)
}

// dashServer is the loopback proxy of herdctl dashboard. Safe for
// concurrent use.
type dashServer struct {
	fwd  dashForwarder
	host string // the only Host accepted: 127.0.0.1:PORT

	mu      sync.Mutex
	code    string // the one-time code; "" once exchanged
	session string // the session cookie's value; "" before the exchange
}

// newDashServer returns a proxy for the listener at host (127.0.0.1:PORT)
// with a fresh one-time code.
func newDashServer(fwd dashForwarder, host string) (*dashServer, error) {
	code, err := randomToken()
	if err != nil {
		return nil, err
	}
	return &dashServer{fwd: fwd, host: host, code: code}, nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dashboard: random code: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// loginURL is the one-time URL to open.
func (d *dashServer) loginURL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return "http://" + d.host + "/login?code=" + d.code
}

// dashError answers a plain-text error.
func dashError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// ServeHTTP checks Host, method, Origin and the session, then forwards.
func (d *dashServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	switch {
	case r.Host != d.host:
		dashError(w, http.StatusMisdirectedRequest, "Host "+strconv.Quote(r.Host)+" is not this dashboard's address "+d.host)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		h.Set("Allow", "GET, HEAD")
		dashError(w, http.StatusMethodNotAllowed, "the dashboard only reads: steer the fleet with herdctl")
		return
	case !d.originOK(r):
		dashError(w, http.StatusForbidden, "cross-origin requests are refused")
		return
	case r.URL.Path == "/login":
		d.login(w, r)
		return
	case !d.sessionOK(r):
		dashError(w, http.StatusUnauthorized, "no dashboard session: open the one-time URL herdctl dashboard printed (run it again for a new one)")
		return
	}
	p := r.URL.EscapedPath()
	switch {
	case p == "/":
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	case strings.Contains(p, "..") || strings.Contains(p, "//") || strings.Contains(p, "%"):
		dashError(w, http.StatusBadRequest, "bad path")
	case strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "/v1/"):
		d.forward(w, r, p)
	default:
		dashError(w, http.StatusNotFound, "not found")
	}
}

// originOK: no Origin (a top-level navigation), or exactly this
// listener's; and no cross-site fetch metadata.
func (d *dashServer) originOK(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Values("Origin")
	return len(o) == 0 || (len(o) == 1 && o[0] == "http://"+d.host)
}

func (d *dashServer) sessionOK(r *http.Request) bool {
	c, err := r.Cookie(dashCookie)
	if err != nil {
		return false
	}
	d.mu.Lock()
	s := d.session
	d.mu.Unlock()
	return s != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s)) == 1
}

// login exchanges the one-time code, once, for the session cookie and
// sends the browser on to the page, so the code leaves its address bar.
func (d *dashServer) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet { // a HEAD (a link preview) does not spend the code
		w.Header().Set("Allow", "GET")
		dashError(w, http.StatusMethodNotAllowed, "open the one-time URL with GET")
		return
	}
	got := r.URL.Query().Get("code")
	d.mu.Lock()
	ok := d.code != "" && subtle.ConstantTimeCompare([]byte(got), []byte(d.code)) == 1
	var session string
	if ok {
		var err error
		if session, err = randomToken(); err != nil {
			d.mu.Unlock()
			dashError(w, http.StatusInternalServerError, err.Error())
			return
		}
		d.code, d.session = "", session
	}
	used := d.code == ""
	d.mu.Unlock()
	if !ok {
		msg := "wrong dashboard code"
		if used {
			msg = "this one-time dashboard URL was used already: run herdctl dashboard again for a new one"
		}
		dashError(w, http.StatusForbidden, msg)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: dashCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// dashHeaders are the agent's response headers passed on to the browser.
var dashHeaders = []string{"Content-Type", "Content-Security-Policy", "Cache-Control", "Location"}

// forward sends the GET to the agent and streams its answer back, flushing
// as it comes (watch streams).
func (d *dashServer) forward(w http.ResponseWriter, r *http.Request, p string) {
	q := r.URL.Query()
	stream := p == "/v1/watch" || q.Get("watch") != ""
	resp, cancel, err := d.fwd.ForwardGet(r.Context(), p, r.URL.RawQuery, stream)
	if err != nil {
		var ae *api.APIError
		if !errors.As(err, &ae) {
			ae = &api.APIError{StatusCode: http.StatusBadGateway, Code: api.CodeInternal, Message: "dashboard: " + err.Error()}
		}
		if strings.HasPrefix(p, "/ui/") && ae.StatusCode == http.StatusNotFound && strings.Contains(ae.Message, "under /v1/") {
			// An agent older than the dashboard (mixed-version fleet).
			dashError(w, http.StatusNotFound, "this agent has no dashboard (herd older than the dashboard): upgrade herd on the boards (herdctl upgrade)")
			return
		}
		b, _ := json.Marshal(ae)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ae.StatusCode)
		w.Write(append(b, '\n'))
		return
	}
	defer cancel()
	defer resp.Body.Close()
	for _, k := range dashHeaders {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// browserCommand returns the argv prefix that opens a URL in the user's
// browser, or nil when there is none.
var browserCommand = func() []string {
	names := []string{"xdg-open"}
	if runtime.GOOS == "darwin" {
		names = []string{"open"}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return []string{p}
		}
	}
	return nil
}

func (a *app) dashboardCmd() *cobra.Command {
	var noOpen bool
	var port int
	cmd := &cobra.Command{
		Use:   "dashboard [--no-open] [--port N]",
		Short: "Open a live page of the fleet in the browser",
		Long: `Open a live page of the fleet in the browser: boards with their conditions,
facts and warnings, the pods on each, services and their endpoints, and the
event timeline, updating as it happens.

herdctl serves the agent's page on 127.0.0.1 only, reaching the agent as
every command does (the context's SSH tunnel and token); the browser never
sees the token. The printed URL carries a one-time code, exchanged on first
use for a session cookie. The page only reads: steer with herdctl. Stop
with Ctrl-C.`,
		Example: `  herdctl dashboard
  herdctl dashboard --no-open     # print the URL, open it yourself`,
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return usagef("dashboard: --port %d: want 0 (any free port) to 65535", port)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			fwd, ok := c.(dashForwarder)
			if !ok {
				return errors.New("dashboard: this client cannot forward requests")
			}
			ctx := cmd.Context()
			if a.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, a.timeout)
				defer cancel()
			}
			return a.serveDashboard(ctx, fwd, port, !noOpen)
		},
	}
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "print the one-time URL instead of opening a browser")
	cmd.Flags().IntVar(&port, "port", 0, "local port on 127.0.0.1 (default: any free port)")
	return cmd
}

// serveDashboard listens on 127.0.0.1:port and serves until ctx ends.
func (a *app) serveDashboard(ctx context.Context, fwd dashForwarder, port int, open bool) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("dashboard: listen on 127.0.0.1:%d: %w", port, err)
	}
	d, err := newDashServer(fwd, l.Addr().String())
	if err != nil {
		l.Close()
		return err
	}
	hs := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	u := d.loginURL()
	opened := false
	if open {
		if argv := browserCommand(); argv != nil {
			bc := exec.Command(argv[0], append(argv[1:], u)...)
			bc.Stdout, bc.Stderr = io.Discard, io.Discard
			if err := bc.Start(); err == nil {
				opened = true
				go bc.Wait()
			} else {
				fmt.Fprintf(a.stderr, "dashboard: could not start %s: %v\n", argv[0], err)
			}
		}
	}
	if opened {
		fmt.Fprintf(a.stderr, "dashboard: opened http://%s/ in your browser; serving until Ctrl-C\n", d.host)
	} else {
		fmt.Fprintln(a.stdout, u)
		fmt.Fprintf(a.stderr, "dashboard: open the URL above (one use, 127.0.0.1 only); serving until Ctrl-C\n")
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
		return fmt.Errorf("dashboard: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		hs.Close()
	}
	return nil
}
