package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/backoff"
)

// DefaultAddr is the agent API address herdctl uses when nothing else is set.
const DefaultAddr = "http://127.0.0.1:7948"

// Default timeouts.
const (
	// DefaultTimeout bounds one request (not a watch), its retries included.
	DefaultTimeout = 30 * time.Second
	// DefaultDialTimeout bounds connecting to one address.
	DefaultDialTimeout = 5 * time.Second
)

// ErrUnreachable: no address of the client accepted a connection.
var ErrUnreachable = errors.New("client: no agent reachable")

// Options configure a Client.
type Options struct {
	// Token is sent as "Authorization: Bearer" when set.
	Token string
	// HTTPClient overrides the transport of http:// and https:// addresses
	// (SSH tunnels, tests). Its Timeout, if set, also bounds watches.
	HTTPClient *http.Client
	// DialContext, when set, opens every connection instead of net.Dialer:
	// network is "tcp" (address host:port) or "unix" (address the socket
	// path). herdctl uses it to reach an agent through an SSH connection.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds one request other than a watch, its retries
	// included; 0 means DefaultTimeout.
	Timeout time.Duration
	// DialTimeout bounds connecting to one address; 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Retries is how many times a request is sent again, to the next
	// address, after a failure that makes that safe (see send); 0 means
	// DefaultRetries, negative means never. Retries of a request other
	// than a watch stay within its Timeout.
	Retries int
	// Backoff returns how long to wait before retry n (1, 2, ...); nil
	// means DefaultBackoff. A wait that would pass the request's deadline
	// is not started: the last error is returned instead.
	Backoff func(n int) time.Duration
}

// DefaultRetries is how many times a request is retried when
// Options.Retries is 0: enough to ride out an election (about 1.5 s)
// with DefaultBackoff.
const DefaultRetries = 6

// DefaultBackoff waits 100 ms before the first retry, doubling up to 1 s.
func DefaultBackoff(n int) time.Duration {
	return backoff.Double(n, 100*time.Millisecond, time.Second)
}

// Client talks to one of several agent addresses, moving on to the next
// when one cannot be reached. Every request is retried, on the next
// address, after a broken connection or a 503 of an election (no_leader,
// outcome_unknown): reads because they change nothing, and writes
// (create, update, delete, scale, apply) because each call carries one
// random request id (api.HeaderRequestID) on all its attempts, and the
// store applies a write with one id at most once, answering a resend of
// an applied write with the objects stored now. Addresses are http://host:port, https://..., or
// unix:///path/to/socket. A Client is safe for concurrent use.
type Client struct {
	addrs []string
	opts  Options
	ends  []endpoint
	// cur is the index of the address that last answered; requests start
	// there.
	cur atomic.Int32
}

// endpoint is one parsed address.
type endpoint struct {
	addr string // as given
	base string // URL prefix requests are made against
	hc   *http.Client
}

// New returns a client for addrs, which must be non-empty and each
// http://host[:port], https://host[:port] or unix:///absolute/path.
func New(addrs []string, opts Options) (*Client, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("client: no agent address given (e.g. %s or unix:///run/herd/api.sock)", DefaultAddr)
	}
	if opts.Timeout < 0 || opts.DialTimeout < 0 {
		return nil, errors.New("client: timeouts must not be negative")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.Retries == 0 {
		opts.Retries = DefaultRetries
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	c := &Client{addrs: append([]string(nil), addrs...), opts: opts}
	var tcp *http.Client // shared by every http(s) address
	for _, a := range addrs {
		u, err := url.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("client: address %q: %w", a, err)
		}
		switch u.Scheme {
		case "http", "https":
			if u.Host == "" || u.Hostname() == "" {
				return nil, fmt.Errorf("client: address %q: missing host (want %s://host:port)", a, u.Scheme)
			}
			if p := u.Port(); p != "" {
				if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
					return nil, fmt.Errorf("client: address %q: bad port %q", a, p)
				}
			}
			if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return nil, fmt.Errorf("client: address %q: want only %s://host:port, without path, query or user", a, u.Scheme)
			}
			if tcp == nil {
				tcp = opts.HTTPClient
				if tcp == nil {
					tcp = &http.Client{Transport: c.transport("", "")}
				}
			}
			c.ends = append(c.ends, endpoint{addr: a, base: u.Scheme + "://" + u.Host, hc: tcp})
		case "unix":
			p := u.Path
			if u.Host != "" || p == "" || !path.IsAbs(p) {
				return nil, fmt.Errorf("client: address %q: want unix:///absolute/path/to/socket", a)
			}
			c.ends = append(c.ends, endpoint{addr: a, base: "http://unix", hc: &http.Client{Transport: c.transport("unix", p)}})
		case "":
			return nil, fmt.Errorf("client: address %q: missing scheme (want http://%s, https://... or unix:///path)", a, a)
		default:
			return nil, fmt.Errorf("client: address %q: unsupported scheme %q (want http, https or unix)", a, u.Scheme)
		}
	}
	return c, nil
}

// transport returns a transport that dials the unix socket at sock, or
// TCP when network is "".
func (c *Client) transport(network, sock string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.TLSHandshakeTimeout = c.opts.DialTimeout
	dial := c.opts.DialContext
	if dial == nil {
		d := &net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	t.DialContext = func(ctx context.Context, nw, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
		defer cancel()
		if network == "unix" {
			return dial(ctx, "unix", sock)
		}
		return dial(ctx, nw, addr)
	}
	return t
}

// Addr returns the address requests go to first: the one that last
// answered.
func (c *Client) Addr() string { return c.ends[c.cur.Load()].addr }

// staleKey marks a context whose reads may be stale (WithStale).
type staleKey struct{}

// WithStale returns a context under which Get, List and ListSelected ask
// the agent for its own copy as it is (?stale): answered without a
// leader, but possibly behind writes acknowledged elsewhere. Without it
// reads are linearizable: served after the leader confirmed itself.
func WithStale(ctx context.Context) context.Context {
	return context.WithValue(ctx, staleKey{}, true)
}

// readQuery returns the query parameters of a read under ctx.
func readQuery(ctx context.Context) url.Values {
	q := url.Values{}
	if stale, _ := ctx.Value(staleKey{}).(bool); stale {
		q.Set("stale", "1")
	}
	return q
}

// List lists objects of a kind, sorted by name, and the store's
// resourceVersion at the time of listing (to watch from).
func (c *Client) List(ctx context.Context, kind api.Kind) ([]api.RawObject, uint64, error) {
	return c.ListSelected(ctx, kind, "")
}

// ListSelected lists the objects of a kind whose labels match selector
// ("app=web,tier=front"; "" matches all), as List.
func (c *Client) ListSelected(ctx context.Context, kind api.Kind, selector string) ([]api.RawObject, uint64, error) {
	q := readQuery(ctx)
	if selector != "" {
		q.Set("selector", selector)
	}
	var l api.ObjectList
	if err := c.do(ctx, http.MethodGet, kindPath(kind, ""), q, nil, &l); err != nil {
		return nil, 0, err
	}
	return l.Items, l.ResourceVersion, nil
}

// Get gets one object.
func (c *Client) Get(ctx context.Context, kind api.Kind, name string) (api.RawObject, error) {
	var o api.RawObject
	err := c.do(ctx, http.MethodGet, kindPath(kind, name), readQuery(ctx), nil, &o)
	return o, err
}

// Create creates one object (not nodes or pods) and returns it as stored.
// Like every write it carries a request id, so it is resent safely after
// a failure that leaves its outcome unknown: a resend of a create that was
// applied returns the stored object instead of "exists".
func (c *Client) Create(ctx context.Context, obj api.Object) (api.RawObject, error) {
	var o api.RawObject
	err := c.doObject(withRequestID(ctx), http.MethodPost, kindPath(obj.GetKind(), ""), obj, &o)
	return o, err
}

// Update replaces one object's labels and spec (a node's cordon flag, for
// instance), compare-and-swap when its metadata.resourceVersion is set, and
// returns it as stored. It is resent after a failure that leaves its
// outcome unknown; its request id makes the store apply it at most once
// (a resent compare-and-swap update that was applied is no conflict).
func (c *Client) Update(ctx context.Context, obj api.Object) (api.RawObject, error) {
	var o api.RawObject
	err := c.doObject(withRequestID(ctx), http.MethodPut, kindPath(obj.GetKind(), obj.GetMeta().Name), obj, &o)
	return o, err
}

// Apply creates or updates objs together: all or none. It is resent after
// an unknown outcome with the same request id (a dry run carries none and
// writes nothing), so it applies at most once even if another writer
// changed the objects in between.
func (c *Client) Apply(ctx context.Context, objs []api.Object, dryRun bool) ([]api.ApplyResult, error) {
	req := api.ApplyRequest{Objects: make([]json.RawMessage, len(objs))}
	for i, o := range objs {
		b, err := marshalObject(o)
		if err != nil {
			return nil, fmt.Errorf("client: encoding %s/%s: %w", o.GetKind(), o.GetMeta().Name, err)
		}
		req.Objects[i] = b
	}
	q := url.Values{}
	if dryRun {
		q.Set("dryRun", "1")
	}
	if !dryRun {
		ctx = withRequestID(ctx)
	}
	var resp api.ApplyResponse
	if err := c.do(ctx, http.MethodPost, "/v1/apply", q, req, &resp); err != nil {
		return nil, err
	}
	return resp.Results, nil
}

// Delete deletes one object. Like Create it carries a request id: a
// resend of a delete that was applied succeeds instead of "not found".
func (c *Client) Delete(ctx context.Context, kind api.Kind, name string) error {
	return c.do(withRequestID(ctx), http.MethodDelete, kindPath(kind, name), nil, nil, nil)
}

// Scale sets a deployment's replicas. It carries a request id, so a resend
// after an unknown outcome is applied at most once: it never overwrites a
// write that landed between the two attempts.
func (c *Client) Scale(ctx context.Context, name string, replicas int) (api.RawObject, error) {
	var o api.RawObject
	err := c.do(withRequestID(ctx), http.MethodPut, kindPath(api.KindDeployment, name)+"/scale", nil, api.ScaleRequest{Replicas: &replicas}, &o)
	return o, err
}

type requestIDKey struct{}

// withRequestID returns ctx carrying a new random request id (128 bits,
// hex), which send puts on every attempt of the call.
func withRequestID(ctx context.Context) context.Context {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return context.WithValue(ctx, requestIDKey{}, hex.EncodeToString(b[:]))
}

// Watch streams events for kind ("" for all) after fromRV until ctx ends.
// The channel is closed when ctx ends or the agent ends the stream (after
// an api.EventRelist event when the watcher must list again, or because the
// connection broke); the caller then lists and watches again. An error is
// returned only when the watch could not be started (a *api.APIError with code
// "compacted" means fromRV is too old: list again).
func (c *Client) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	q := url.Values{}
	if fromRV != 0 {
		q.Set("resourceVersion", strconv.FormatUint(fromRV, 10))
	}
	p := "/v1/watch"
	if kind != "" {
		p = kindPath(kind, "")
		q.Set("watch", "1")
	}
	resp, cancel, err := c.send(ctx, http.MethodGet, p, q, nil, false)
	if err != nil {
		return nil, err
	}
	ch := make(chan api.WatchEvent)
	go func() {
		defer close(ch)
		defer cancel()
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev api.WatchEvent
			if err := dec.Decode(&ev); err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// Status returns the agent's cluster status.
func (c *Client) Status(ctx context.Context) (api.ClusterStatus, error) {
	var st api.ClusterStatus
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &st)
	return st, err
}

// marshalObject encodes o with its kind set even when the struct's Kind
// field was left empty.
func marshalObject(o api.Object) ([]byte, error) {
	raw, err := api.ToRaw(o)
	if err != nil {
		return nil, err
	}
	return json.Marshal(raw)
}

func kindPath(kind api.Kind, name string) string {
	p := "/v1/" + url.PathEscape(string(kind))
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// doObject sends obj, encoded with its kind, as the request body.
func (c *Client) doObject(ctx context.Context, method, p string, obj api.Object, out any) error {
	b, err := marshalObject(obj)
	if err != nil {
		return fmt.Errorf("client: encoding %s/%s: %w", obj.GetKind(), obj.GetMeta().Name, err)
	}
	return c.do(ctx, method, p, nil, json.RawMessage(b), out)
}

// do sends a request with a JSON body (when in is non-nil) and decodes a
// JSON response into out (when non-nil), within the request timeout.
func (c *Client) do(ctx context.Context, method, p string, q url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("client: encoding request: %w", err)
		}
	}
	resp, cancel, err := c.send(ctx, method, p, q, body, true)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: %s %s: decoding response: %w", method, p, err)
	}
	return nil
}

// send sends a request, retrying failures after which it is safe to send
// again (at most
// Options.Retries times, with Options.Backoff between, each to the next
// address) within the request timeout when timeout is set. Each attempt
// tries the addresses in turn, starting with the one that last answered,
// moving on only when a connection cannot be made. A non-2xx response is
// returned as *api.APIError. The caller closes the body and calls cancel.
//
// Every request is safe to resend: a read changes nothing, and a write
// carries its call's request id (withRequestID) on every attempt, so the
// store applies it at most once.
func (c *Client) send(ctx context.Context, method, p string, q url.Values, body []byte, timeout bool) (*http.Response, context.CancelFunc, error) {
	cancel := context.CancelFunc(func() {})
	if timeout {
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	start := int(c.cur.Load())
	for n := 1; ; n++ {
		resp, last, err := c.sendOnce(ctx, start, method, p, q, body)
		if err == nil {
			return resp, cancel, nil
		}
		if n > c.opts.Retries || !retryable(err) || !wait(ctx, c.opts.Backoff(n)) {
			cancel()
			return nil, nil, err
		}
		start = (last + 1) % len(c.ends)
	}
}

// retryable reports whether a request that failed with err may be sent
// again: it was never sent, the agent knew no leader, the outcome is
// unknown (the write's request id makes a resend safe), or the connection
// broke.
func retryable(err error) bool {
	var ae *api.APIError
	var be *brokenError
	switch {
	case errors.Is(err, ErrUnreachable): // never sent
		return true
	case errors.As(err, &ae):
		return ae.Code == api.CodeNoLeader || ae.Code == api.CodeOutcomeUnknown
	case errors.As(err, &be):
		return true
	}
	return false
}

// wait waits d unless ctx ends first or would end before d has passed; it
// reports whether the wait completed.
func wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// brokenError: the connection failed after the request was (or may have
// been) sent, so it may have been applied.
type brokenError struct{ err error }

func (e *brokenError) Error() string { return e.err.Error() }
func (e *brokenError) Unwrap() error { return e.err }

// sendOnce tries each address in turn from start, moving on only when a
// connection cannot be made (the request was then never sent, so any
// method is safe to send elsewhere). It returns the index of the last
// address tried.
func (c *Client) sendOnce(ctx context.Context, start int, method, p string, q url.Values, body []byte) (*http.Response, int, error) {
	var errs []error
	idx := start
	for i := range c.ends {
		idx = (start + i) % len(c.ends)
		e := c.ends[idx]
		u := e.base + p
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return nil, idx, fmt.Errorf("client: %s %s: %w", method, p, err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		if id, _ := ctx.Value(requestIDKey{}).(string); id != "" {
			req.Header.Set(api.HeaderRequestID, id)
		}
		if c.opts.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.opts.Token)
		}
		resp, err := e.hc.Do(req)
		if err != nil {
			if isDialError(err) && ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.addr, unwrapURLError(err)))
				continue
			}
			err = fmt.Errorf("client: %s %s at %s: %w", method, p, e.addr, unwrapURLError(err))
			if ctx.Err() != nil {
				return nil, idx, err
			}
			return nil, idx, &brokenError{err}
		}
		c.cur.Store(int32(idx))
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			defer resp.Body.Close()
			return nil, idx, decodeAPIError(resp)
		}
		return resp, idx, nil
	}
	return nil, idx, fmt.Errorf("%w: %w", ErrUnreachable, errors.Join(errs...))
}

// isDialError reports whether err means no connection could be made, as
// opposed to a failure after the request was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decodeAPIError reads an error response; bodies that are not the API's
// JSON error (a proxy's page, say) become an api.APIError from the status.
func decodeAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	ae := &api.APIError{}
	if err := json.Unmarshal(b, ae); err != nil || ae.Code == "" {
		ae = &api.APIError{Code: codeForStatus(resp.StatusCode)}
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		ae.Message = resp.Status
		if msg != "" {
			ae.Message += ": " + msg
		}
	}
	ae.StatusCode = resp.StatusCode
	return ae
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized, http.StatusForbidden:
		return "unauthorized"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusGone:
		return "compacted"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return "no_leader"
	}
	return "internal"
}
