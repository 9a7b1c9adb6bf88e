package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// maxCASRetries is how many times apply retries after a conflict with a
// concurrent writer; each retry reads the leader's state afresh.
const maxCASRetries = 8

// maxOwnCASRetries bounds the retries of an update whose client gave no
// resourceVersion (scale, an update without one): the controllers' status
// writes move an object's resourceVersion often, and such a write retries
// its own conflicts for as long as its context allows, up to this many.
const maxOwnCASRetries = 100

// newRouter returns the /v1 routes on net/http's method-and-path patterns:
//
//	GET    /v1/status                    cluster status
//	POST   /v1/apply[?dryRun=1]          apply objects, all or none
//	GET    /v1/watch?resourceVersion=N   watch every kind
//	GET    /v1/{kind}[?selector=..][&stale]  list ([&watch=1&resourceVersion=N] watch)
//	POST   /v1/{kind}                    create
//	GET    /v1/{kind}/{name}[?stale]     get
//	PUT    /v1/{kind}/{name}             update spec and labels
//	DELETE /v1/{kind}/{name}[?resourceVersion=N]
//	PUT    /v1/{kind}/{name}/status      403: status is written by herd only
//	GET    /v1/events[?selector=herd.dev/kind=pod,herd.dev/name=web-x]  events (read-only; writes 403)
//	PUT    /v1/deployments/{name}/scale  set replicas
//	POST   /v1/secrets, PUT /v1/secrets/{name}  plain values in, sealed before the store (secrets.go)
//	GET    /v1/pods/{name}/logs[?follow=1&since=..&tail=N][&stale]  journal, text/plain
//
// Besides /v1, route serves the dashboard under /ui/ (ui.go) and, with
// Config.Pprof, runtime profiles under /debug/pprof/ (pprof.go).
//
// A GET route answers HEAD too. What the patterns do not match gets the
// API's JSON error: 404 naming the path, or 405 with Allow (the mux's own
// answers, turned into API errors by route). An unknown {kind} is a 404
// listing the kinds.
//
// Gets, lists and the pod lookup of logs are linearizable (the store's
// ReadBarrier) unless the request says ?stale, which reads this agent's copy as it is. Every
// read-modify-write (update, scale, apply) reads after a ReadBarrier.
//
// A write (create, update, delete, scale, apply other than a dry run) may
// carry a Herd-Request-Id header (api.HeaderRequestID: 1 to 64 characters
// of [A-Za-z0-9_-], else 400 naming the header). Its transaction carries
// the id to the store (raftstore.WithRequestID), which applies a write
// with one id at most once: resent after a broken connection or 503
// outcome_unknown, it is answered with the objects as stored now instead
// of being applied again. The server's own retries of a conflict (scale,
// apply, an update without resourceVersion) reuse the id; a conflict
// records nothing.
func (s *Server) newRouter() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("POST /v1/apply", s.apply)
	mux.HandleFunc("GET /v1/watch", func(w http.ResponseWriter, r *http.Request) { s.watch(w, r, "") })
	mux.HandleFunc("GET /v1/{kind}", s.withKind(func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		if boolParam(r, "watch") {
			s.watch(w, r, kind)
		} else {
			s.list(w, r, kind)
		}
	}))
	mux.HandleFunc("POST /v1/{kind}", s.withKind(s.create))
	mux.HandleFunc("GET /v1/{kind}/{name}", s.withKind(func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		s.get(w, r, kind, r.PathValue("name"))
	}))
	mux.HandleFunc("PUT /v1/{kind}/{name}", s.withKind(func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		s.update(w, r, kind, r.PathValue("name"))
	}))
	mux.HandleFunc("DELETE /v1/{kind}/{name}", s.withKind(func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		s.delete(w, r, kind, r.PathValue("name"))
	}))
	mux.HandleFunc("PUT /v1/{kind}/{name}/status", s.withKind(func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		s.updateStatus(w, r, kind, r.PathValue("name"))
	}))
	mux.HandleFunc("PUT /v1/deployments/{name}/scale", func(w http.ResponseWriter, r *http.Request) { s.scale(w, r, r.PathValue("name")) })
	mux.HandleFunc("GET /v1/pods/{name}/logs", func(w http.ResponseWriter, r *http.Request) { s.logs(w, r, r.PathValue("name")) })
	return mux
}

// topRoutes are the /v1/ paths that are not kinds, with their method. A
// {kind} pattern also matches them with other methods: that is a 405.
var topRoutes = map[string]string{"status": http.MethodGet, "apply": http.MethodPost, "watch": http.MethodGet}

// withKind checks the {kind} of a route before calling h.
func (s *Server) withKind(h func(http.ResponseWriter, *http.Request, api.Kind)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		kind := api.Kind(r.PathValue("kind"))
		if m, ok := topRoutes[string(kind)]; ok && r.PathValue("name") == "" {
			s.notAllowed(w, r, m)
			return
		}
		if api.New(kind) == nil {
			s.writeError(w, unknownKind(string(kind)))
			return
		}
		if kind == api.KindEvent && r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.writeError(w, newError(http.StatusForbidden, api.CodeForbidden,
				"events are recorded by herd's leader only, not through the API"))
			return
		}
		h(w, r, kind)
	}
}

// notAllowed answers 405 naming the allowed methods.
func (s *Server) notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	s.writeError(w, newError(http.StatusMethodNotAllowed, api.CodeBadRequest,
		"method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
}

// route serves r with the router (a trailing slash ignored), answering
// what no route matches with the API's JSON errors instead of the mux's
// plain text.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if isUIPath(r.URL.Path) {
		s.ui(w, r) // the dashboard (ui.go)
		return
	}
	if isPprofPath(r.URL.Path) {
		s.servePprof(w, r) // runtime profiles, when on (pprof.go)
		return
	}
	if p := r.URL.Path; len(p) > len("/v1/") && strings.HasSuffix(p, "/") {
		// "/v1/deployments/" is "/v1/deployments".
		r2, u := *r, *r.URL
		u.Path, u.RawPath = strings.TrimSuffix(p, "/"), ""
		r2.URL = &u
		r = &r2
	}
	h, pattern := s.router.Handler(r)
	if pattern != "" {
		s.router.ServeHTTP(w, r) // sets the path values Handler does not
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound, "no route %s: the API lives under /v1/", r.URL.Path))
		return
	}
	// Ask the mux what it would answer (404, or 405 with Allow), without
	// sending its body.
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		if m, ok := topRoutes[strings.TrimPrefix(r.URL.Path, "/v1/")]; ok {
			allow = m // not the {kind} routes' methods
		}
		s.notAllowed(w, r, allow)
		return
	}
	if segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/"); api.New(api.Kind(segs[0])) == nil && topRoutes[segs[0]] == "" {
		s.writeError(w, unknownKind(segs[0]))
		return
	}
	s.writeError(w, newError(http.StatusNotFound, api.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

// statusProbe records the status and headers of a response and drops its
// body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }

func boolParam(r *http.Request, name string) bool {
	switch strings.ToLower(r.URL.Query().Get(name)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

func uintParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("query parameter %s=%q: want a non-negative integer", name, v)
	}
	return n, nil
}

// managedByHerd reports whether users may not create kind's objects.
func managedByHerd(kind api.Kind) bool { return kind == api.KindNode || kind == api.KindPod }

func (s *Server) writeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.WriteTimeout)
}

// requestID returns the request's Herd-Request-Id header, validated ("" if
// absent).
func requestID(r *http.Request) (string, error) {
	vals := r.Header.Values(api.HeaderRequestID)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", badRequest("header %s: given %d times, want once", api.HeaderRequestID, len(vals))
	}
	if err := raftstore.ValidateRequestID(vals[0]); err != nil {
		return "", badRequest("header %s: %s", api.HeaderRequestID, trimPrefix(err))
	}
	return vals[0], nil
}

// writeCtxID is writeCtx carrying the request's Herd-Request-Id to the
// store; it fails with a 400 for an invalid header.
func (s *Server) writeCtxID(r *http.Request) (context.Context, context.CancelFunc, error) {
	id, err := requestID(r)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := s.writeCtx(r)
	if id != "" {
		ctx = raftstore.WithRequestID(ctx, id)
	}
	return ctx, cancel, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	var st api.ClusterStatus
	if s.cfg.Status != nil {
		ctx, cancel := s.writeCtx(r)
		defer cancel()
		st = s.cfg.Status(ctx)
	}
	writeJSON(w, http.StatusOK, st)
}

// staleParam reports whether the request opts out of linearizable reads
// with ?stale (or stale=1, true, yes).
func staleParam(r *http.Request) bool {
	q := r.URL.Query()
	if !q.Has("stale") {
		return false
	}
	switch strings.ToLower(q.Get("stale")) {
	case "", "1", "true", "yes":
		return true
	}
	return false
}

// readBarrier makes the following reads linearizable, unless the request
// asked for ?stale.
func (s *Server) readBarrier(r *http.Request) error {
	if staleParam(r) {
		return nil
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	return s.cfg.Store.ReadBarrier(ctx)
}

func (s *Server) selector(r *http.Request) (func(map[string]string) bool, error) {
	sel := r.URL.Query().Get("selector")
	if sel == "" {
		return func(map[string]string) bool { return true }, nil
	}
	match, err := s.cfg.Admission.Selector(sel)
	if err != nil {
		return nil, badRequest("query parameter selector=%q: %v", sel, err)
	}
	return match, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, kind api.Kind) {
	match, err := s.selector(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.readBarrier(r); err != nil {
		s.writeError(w, err)
		return
	}
	objs, rv, err := s.cfg.Store.List(kind)
	if err != nil {
		s.writeError(w, err)
		return
	}
	items := make([]api.RawObject, 0, len(objs))
	for _, o := range objs {
		if match(o.Metadata.Labels) {
			items = append(items, o)
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Metadata.Name < items[j].Metadata.Name })
	writeJSON(w, http.StatusOK, api.ObjectList{Items: items, ResourceVersion: rv})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, kind api.Kind, name string) {
	if err := s.readBarrier(r); err != nil {
		s.writeError(w, err)
		return
	}
	o, err := s.cfg.Store.Get(kind, name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// readBody reads the request body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: s.cfg.MaxBodyBytes}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		// The read deadline guard set stays: the connection is closed
		// rather than waited on.
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("reading request body: %v", err)
	}
	// The body is in: lift the read deadline guard set, so that the
	// connection is not cut while the handler waits for the store.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return b, nil
}

// objectHead is what is peeked from an object before decoding it strictly.
type objectHead struct {
	Kind     api.Kind `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// decodeObject decodes a request body holding one object of kind named
// name (name may be empty for a create): strictly, with the body's kind
// and name, when given, required to match the path's.
func (s *Server) decodeObject(w http.ResponseWriter, r *http.Request, kind api.Kind, name string) (api.Object, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	o := api.New(kind)
	if err := decodeStrict(bytes.NewReader(body), o, "request body"); err != nil {
		return nil, err
	}
	var head objectHead
	_ = json.Unmarshal(body, &head) // decoded strictly above
	if head.Kind != "" && head.Kind != kind {
		return nil, badRequest("request body: kind %q does not match the path's %q", head.Kind, kind)
	}
	meta := o.GetMeta()
	if name != "" {
		if meta.Name == "" {
			meta.Name = name
		} else if meta.Name != name {
			return nil, badRequest("request body: metadata.name %q does not match the path's %q", meta.Name, name)
		}
	}
	return o, nil
}

// admit defaults and validates o. For a deployment whose replicas the
// client left out it returns false and fills a placeholder of 1; the caller
// replaces it with the stored value (one owner per field).
func (s *Server) admit(o api.Object) (ownsReplicas bool, errs []api.FieldError) {
	ownsReplicas = true
	if d, ok := o.(*api.Deployment); ok && d.Spec.Replicas == nil {
		ownsReplicas = false
		one := 1
		d.Spec.Replicas = &one
	}
	s.cfg.Admission.SetDefaults(o)
	errs = s.cfg.Admission.Validate(o)
	ref := api.ObjectRef(o.GetKind(), o.GetMeta().Name)
	for i := range errs {
		if errs[i].Object == "" {
			errs[i].Object = ref
		}
	}
	return ownsReplicas, errs
}

// setReplicas gives a deployment whose manifest leaves replicas out the
// stored count (1 when nothing is stored).
func setReplicas(o api.Object, cur *api.RawObject) error {
	d, ok := o.(*api.Deployment)
	if !ok {
		return nil
	}
	n := 1
	if cur != nil {
		stored, err := api.FromRaw(*cur)
		if err != nil {
			return fmt.Errorf("decoding stored %s: %w", api.ObjectRef(cur.Kind, cur.Metadata.Name), err)
		}
		if sd := stored.(*api.Deployment); sd.Spec.Replicas != nil {
			n = *sd.Spec.Replicas
		}
	}
	d.Spec.Replicas = &n
	return nil
}

// specRaw returns o as a raw object holding only what a create or update
// writes: name, labels and spec.
func specRaw(o api.Object) (api.RawObject, error) {
	raw, err := api.ToRaw(o)
	if err != nil {
		return api.RawObject{}, fmt.Errorf("encoding %s: %w", api.ObjectRef(o.GetKind(), o.GetMeta().Name), err)
	}
	raw.Metadata = api.ObjectMeta{Name: raw.Metadata.Name, Labels: raw.Metadata.Labels}
	raw.Status = nil
	return raw, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, kind api.Kind) {
	if kind == api.KindSecret {
		s.createSecret(w, r)
		return
	}
	if managedByHerd(kind) {
		s.writeError(w, badRequest("%s are managed by herd and cannot be created", kind))
		return
	}
	o, err := s.decodeObject(w, r, kind, "")
	if err != nil {
		s.writeError(w, err)
		return
	}
	if _, errs := s.admit(o); len(errs) > 0 {
		s.writeError(w, invalid(errs))
		return
	}
	raw, err := specRaw(o)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.createRaw(w, r, raw)
}

// createRaw stores raw as a new object, created now, and answers 201 with
// the stored object.
func (s *Server) createRaw(w http.ResponseWriter, r *http.Request, raw api.RawObject) {
	raw.Metadata.Created = s.cfg.Clock.Now().UTC()
	ctx, cancel, err := s.writeCtxID(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer cancel()
	out, err := s.cfg.Store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out[0])
}

// casUpdate writes an update computed from the stored object by next,
// with compare-and-swap on the stored resourceVersion. It reads after a
// ReadBarrier, so the object is the leader's current one, never a lagging
// copy's. When expectRV is non-zero the client's version must be current
// (no retry); otherwise a conflict with a concurrent writer is retried
// with fresh state while ctx allows (up to maxOwnCASRetries). With a
// request id in ctx (raftstore.WithRequestID) every attempt carries it,
// and a missing object or a moved version goes to the store anyway, so
// that a resend of an applied write gets the store's answer for the id.
func (s *Server) casUpdate(ctx context.Context, kind api.Kind, name string, expectRV uint64,
	next func(cur api.RawObject) (api.RawObject, error)) (api.RawObject, error) {
	// With a request id the write may be a resend of one applied already:
	// conflicts and absence are then decided by the store, which knows.
	resent := raftstore.RequestIDFrom(ctx) != ""
	for attempt := 0; ; attempt++ {
		if err := s.cfg.Store.ReadBarrier(ctx); err != nil {
			return api.RawObject{}, err
		}
		cur, err := s.cfg.Store.Get(kind, name)
		if errors.Is(err, raftstore.ErrNotFound) && resent {
			// Gone since a first attempt may have applied: let the
			// store say (the id's result, or not found).
			out, err := s.cfg.Store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdate,
				Object: api.RawObject{Kind: kind, Metadata: api.ObjectMeta{Name: name, ResourceVersion: expectRV}}}})
			if err != nil {
				return api.RawObject{}, err
			}
			return out[0], nil
		}
		if err != nil {
			return api.RawObject{}, err
		}
		// A stale version is refused here only to spare the Raft log an
		// entry the store would refuse when it applies it; the store's
		// compare-and-swap below stays the rule.
		if expectRV != 0 && cur.Metadata.ResourceVersion != expectRV && !resent {
			return api.RawObject{}, fmt.Errorf("%w: %s has resourceVersion %d, the request carried %d",
				raftstore.ErrConflict, api.ObjectRef(kind, name), cur.Metadata.ResourceVersion, expectRV)
		}
		raw, err := next(cur)
		if err != nil {
			return api.RawObject{}, err
		}
		raw.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
		if expectRV != 0 {
			// The client's version, checked by the store: with a
			// request id a first attempt's success is the store's to
			// report, not a conflict.
			raw.Metadata.ResourceVersion = expectRV
		}
		// Created and Generation are the store's (raftstore's update keeps
		// the stored ones and counts spec changes).
		out, err := s.cfg.Store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdate, Object: raw}})
		if errors.Is(err, raftstore.ErrConflict) && expectRV == 0 && attempt < maxOwnCASRetries && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return api.RawObject{}, err
		}
		return out[0], nil
	}
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, kind api.Kind, name string) {
	if kind == api.KindPod {
		s.writeError(w, badRequest("pods are managed by herd and cannot be updated"))
		return
	}
	if kind == api.KindSecret {
		s.replaceSecret(w, r, name)
		return
	}
	o, err := s.decodeObject(w, r, kind, name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	owns, errs := s.admit(o)
	if len(errs) > 0 {
		s.writeError(w, invalid(errs))
		return
	}
	ctx, cancel, err := s.writeCtxID(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer cancel()
	out, err := s.casUpdate(ctx, kind, name, o.GetMeta().ResourceVersion, func(cur api.RawObject) (api.RawObject, error) {
		if !owns {
			if err := setReplicas(o, &cur); err != nil {
				return api.RawObject{}, err
			}
		}
		return specRaw(o)
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// updateStatus refuses: status is written only by herd's agents and
// controllers, through raftstore on the leader, never by the user API
// (a pod's status names its unit and a node's its address).
func (s *Server) updateStatus(w http.ResponseWriter, _ *http.Request, kind api.Kind, name string) {
	s.writeError(w, newError(http.StatusForbidden, api.CodeForbidden,
		"status of %s is written by herd's agents only, not through the API; change the spec instead", api.ObjectRef(kind, name)))
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, kind api.Kind, name string) {
	rv, err := uintParam(r, "resourceVersion")
	if err != nil {
		s.writeError(w, err)
		return
	}
	ctx, cancel, err := s.writeCtxID(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer cancel()
	if kind == api.KindSecret {
		if err := s.secretInUse(r, name); err != nil {
			s.writeError(w, err)
			return
		}
	}
	raw := api.RawObject{Kind: kind, Metadata: api.ObjectMeta{Name: name, ResourceVersion: rv}}
	out, err := s.cfg.Store.Txn(ctx, []raftstore.Op{{Type: raftstore.OpDelete, Object: raw}})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out[0])
}

func (s *Server) scale(w http.ResponseWriter, r *http.Request, name string) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var req api.ScaleRequest
	if err := decodeStrict(bytes.NewReader(body), &req, "request body"); err != nil {
		s.writeError(w, err)
		return
	}
	ref := api.ObjectRef(api.KindDeployment, name)
	switch {
	case req.Replicas == nil:
		s.writeError(w, invalid([]api.FieldError{{Object: ref, Field: "replicas", Message: "required"}}))
		return
	case *req.Replicas < 0 || *req.Replicas > api.MaxReplicas:
		s.writeError(w, invalid([]api.FieldError{{Object: ref, Field: "replicas",
			Message: fmt.Sprintf("%d is out of range: want 0 to %d", *req.Replicas, api.MaxReplicas)}}))
		return
	}
	ctx, cancel, err := s.writeCtxID(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer cancel()
	out, err := s.casUpdate(ctx, api.KindDeployment, name, 0, func(cur api.RawObject) (api.RawObject, error) {
		o, err := api.FromRaw(cur)
		if err != nil {
			return api.RawObject{}, fmt.Errorf("decoding stored %s: %w", ref, err)
		}
		n := *req.Replicas
		o.(*api.Deployment).Spec.Replicas = &n
		return specRaw(o)
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
