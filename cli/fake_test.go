package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// fakeStore is an in-memory agent: it implements apiClient directly and,
// through fakeAgent, the agent's HTTP API. It is safe for concurrent use.
type fakeStore struct {
	mu       sync.Mutex
	now      time.Time
	rv       uint64
	objs     map[api.Kind]map[string]api.RawObject
	watchers map[*fakeWatcher]bool
	calls    []string // operations in order: "apply", "apply-dry", "delete pods/x", ...
	status   api.ClusterStatus
	// applyErr, when set, is returned by Apply.
	applyErr error
	// onWatch, when set, runs after a watcher is registered (outside the
	// lock), with the number of Watch calls so far.
	onWatch func(n int)
	watches int
	// logs, when set, serves Logs; without it Logs answers 501 as an
	// agent without a log reader does.
	logs func(ctx context.Context, name string, opts client.LogOptions, w io.Writer) error
}

type fakeWatcher struct {
	kind api.Kind
	ch   chan api.WatchEvent
}

func newFakeStore(now time.Time) *fakeStore {
	return &fakeStore{now: now, objs: map[api.Kind]map[string]api.RawObject{}, watchers: map[*fakeWatcher]bool{}}
}

var _ apiClient = (*fakeStore)(nil)

func (s *fakeStore) record(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// Calls returns the recorded operations.
func (s *fakeStore) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// put stores o as is (status included), bumping resourceVersion, and
// notifies watchers.
func (s *fakeStore) put(o api.Object) {
	r, err := api.ToRaw(o)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(r)
}

func (s *fakeStore) putLocked(r api.RawObject) {
	s.rv++
	r.Metadata.ResourceVersion = s.rv
	if r.Metadata.Created.IsZero() {
		r.Metadata.Created = s.now
	}
	if r.Metadata.Generation == 0 {
		r.Metadata.Generation = 1
	}
	m := s.objs[r.Kind]
	if m == nil {
		m = map[string]api.RawObject{}
		s.objs[r.Kind] = m
	}
	_, existed := m[r.Metadata.Name]
	m[r.Metadata.Name] = r
	t := api.EventAdded
	if existed {
		t = api.EventModified
	}
	s.notifyLocked(api.WatchEvent{Type: t, ResourceVersion: s.rv, Object: r})
}

func (s *fakeStore) notifyLocked(ev api.WatchEvent) {
	for w := range s.watchers {
		if w.kind == "" || w.kind == ev.Object.Kind {
			w.ch <- ev
		}
	}
}

// relist sends RELIST to every watcher and ends their streams.
func (s *fakeStore) relist() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.ch <- api.WatchEvent{Type: api.EventRelist, ResourceVersion: s.rv}
		close(w.ch)
		delete(s.watchers, w)
	}
}

// getTyped returns a stored object, typed.
func (s *fakeStore) getTyped(kind api.Kind, name string) api.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.objs[kind][name]
	if !ok {
		return nil
	}
	o, err := api.FromRaw(r)
	if err != nil {
		panic(err)
	}
	return o
}

func notFound(kind api.Kind, name string) error {
	return &api.APIError{StatusCode: 404, Code: "not_found", Message: fmt.Sprintf("%s/%s not found", kind, name)}
}

func (s *fakeStore) List(ctx context.Context, kind api.Kind) ([]api.RawObject, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("list %s", kind)
	var out []api.RawObject
	for _, r := range s.objs[kind] {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out, s.rv, nil
}

func (s *fakeStore) Get(ctx context.Context, kind api.Kind, name string) (api.RawObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("get %s/%s", kind, name)
	r, ok := s.objs[kind][name]
	if !ok {
		return api.RawObject{}, notFound(kind, name)
	}
	return r, nil
}

func (s *fakeStore) Apply(ctx context.Context, objs []api.Object, dryRun bool) ([]api.ApplyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dryRun {
		s.record("apply-dry")
	} else {
		s.record("apply")
	}
	if s.applyErr != nil {
		return nil, s.applyErr
	}
	var res []api.ApplyResult
	for _, o := range objs {
		r, err := api.ToRaw(o)
		if err != nil {
			return nil, err
		}
		prev, exists := s.objs[r.Kind][r.Metadata.Name]
		if exists && r.Kind == api.KindDeployment {
			r.Spec = keepReplicas(prev.Spec, r.Spec)
		}
		action := "created"
		if exists {
			action = "configured"
			if jsonEqual(prev.Spec, r.Spec) && reflect.DeepEqual(prev.Metadata.Labels, r.Metadata.Labels) {
				action = "unchanged"
			}
			r.Metadata.Created = prev.Metadata.Created
			r.Metadata.Generation = prev.Metadata.Generation
			if action == "configured" {
				r.Metadata.Generation++
			}
			r.Status = prev.Status
		} else if r.Kind == api.KindDeployment {
			r.Spec = keepReplicas(json.RawMessage(`{"replicas":1}`), r.Spec)
		}
		if !dryRun && action != "unchanged" {
			s.putLocked(r)
			r = s.objs[r.Kind][r.Metadata.Name]
		} else if exists && action == "unchanged" {
			r = prev
		}
		res = append(res, api.ApplyResult{Kind: r.Kind, Name: r.Metadata.Name, Action: action, Object: r})
	}
	return res, nil
}

// keepReplicas copies spec.replicas from prev into spec when spec has none,
// as the server does.
func keepReplicas(prev, spec json.RawMessage) json.RawMessage {
	var p, n map[string]any
	_ = json.Unmarshal(prev, &p)
	if err := json.Unmarshal(spec, &n); err != nil {
		return spec
	}
	if _, ok := n["replicas"]; !ok && p["replicas"] != nil {
		n["replicas"] = p["replicas"]
	}
	b, _ := json.Marshal(n)
	return b
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	return reflect.DeepEqual(x, y)
}

func (s *fakeStore) Delete(ctx context.Context, kind api.Kind, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("delete %s/%s", kind, name)
	r, ok := s.objs[kind][name]
	if !ok {
		return notFound(kind, name)
	}
	delete(s.objs[kind], name)
	s.rv++
	s.notifyLocked(api.WatchEvent{Type: api.EventDeleted, ResourceVersion: s.rv, Object: r})
	return nil
}

func (s *fakeStore) Scale(ctx context.Context, name string, replicas int) (api.RawObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("scale %s %d", name, replicas)
	r, ok := s.objs[api.KindDeployment][name]
	if !ok {
		return api.RawObject{}, notFound(api.KindDeployment, name)
	}
	var spec map[string]any
	_ = json.Unmarshal(r.Spec, &spec)
	spec["replicas"] = replicas
	r.Spec, _ = json.Marshal(spec)
	r.Metadata.Generation++
	s.putLocked(r)
	return s.objs[api.KindDeployment][name], nil
}

func (s *fakeStore) Update(ctx context.Context, obj api.Object) (api.RawObject, error) {
	raw, err := api.ToRaw(obj)
	if err != nil {
		return api.RawObject{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("update %s/%s", raw.Kind, raw.Metadata.Name)
	cur, ok := s.objs[raw.Kind][raw.Metadata.Name]
	if !ok {
		return api.RawObject{}, notFound(raw.Kind, raw.Metadata.Name)
	}
	cur.Spec, cur.Metadata.Labels = raw.Spec, raw.Metadata.Labels
	s.putLocked(cur)
	return s.objs[raw.Kind][raw.Metadata.Name], nil
}

func (s *fakeStore) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	w := &fakeWatcher{kind: kind, ch: make(chan api.WatchEvent, 100)}
	s.mu.Lock()
	s.record("watch %s from %d", kind, fromRV)
	s.watchers[w] = true
	s.watches++
	n, hook := s.watches, s.onWatch
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.watchers[w] {
			delete(s.watchers, w)
			close(w.ch)
		}
	}()
	if hook != nil {
		hook(n)
	}
	return w.ch, nil
}

func (s *fakeStore) Logs(ctx context.Context, name string, opts client.LogOptions, w io.Writer) error {
	s.mu.Lock()
	s.record("logs %s follow=%v since=%q tail=%d", name, opts.Follow, opts.Since, opts.Tail)
	fn := s.logs
	s.mu.Unlock()
	if fn == nil {
		return &api.APIError{StatusCode: 501, Code: "not_implemented", Message: "pod logs are not available"}
	}
	return fn(ctx, name, opts, w)
}

func (s *fakeStore) Status(ctx context.Context) (api.ClusterStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("status")
	return s.status, nil
}

// fakeAgent serves a fakeStore over the agent's HTTP API, as the real
// client expects it. Token, when set, is required as a bearer token.
type fakeAgent struct {
	store *fakeStore
	token string
	// noLeader answers gets and lists without ?stale with 503, as an
	// agent does when no leader confirms itself.
	noLeader bool
}

func (f *fakeAgent) handler() http.Handler {
	mux := http.NewServeMux()
	writeErr := func(w http.ResponseWriter, err error) {
		var ae *api.APIError
		if !errors.As(err, &ae) {
			ae = &api.APIError{StatusCode: 500, Code: "internal", Message: err.Error()}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ae.StatusCode)
		json.NewEncoder(w).Encode(ae)
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	watch := func(w http.ResponseWriter, r *http.Request, kind api.Kind) {
		rv, _ := strconv.ParseUint(r.URL.Query().Get("resourceVersion"), 10, 64)
		ch, _ := f.store.Watch(r.Context(), kind, rv)
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		enc := json.NewEncoder(w)
		for ev := range ch {
			enc.Encode(ev)
			w.(http.Flusher).Flush()
			if ev.Type == api.EventRelist {
				return
			}
		}
	}
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st, _ := f.store.Status(r.Context())
		writeJSON(w, st)
	})
	mux.HandleFunc("GET /v1/watch", func(w http.ResponseWriter, r *http.Request) { watch(w, r, "") })
	mux.HandleFunc("POST /v1/apply", func(w http.ResponseWriter, r *http.Request) {
		var req api.ApplyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeErr(w, &api.APIError{StatusCode: 400, Code: "bad_request", Message: err.Error()})
			return
		}
		var objs []api.Object
		for _, raw := range req.Objects {
			var ro api.RawObject
			if err := json.Unmarshal(raw, &ro); err != nil {
				writeErr(w, err)
				return
			}
			o, err := api.FromRaw(ro)
			if err != nil {
				writeErr(w, err)
				return
			}
			objs = append(objs, o)
		}
		res, err := f.store.Apply(r.Context(), objs, r.URL.Query().Get("dryRun") == "1")
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, api.ApplyResponse{Results: res})
	})
	leaderless := func(w http.ResponseWriter, r *http.Request) bool {
		if f.noLeader && !r.URL.Query().Has("stale") {
			writeErr(w, &api.APIError{StatusCode: 503, Code: "no_leader", Message: "no leader: read barrier (no leader known)"})
			return true
		}
		return false
	}
	mux.HandleFunc("GET /v1/{kind}", func(w http.ResponseWriter, r *http.Request) {
		kind := api.Kind(r.PathValue("kind"))
		if r.URL.Query().Get("watch") == "1" {
			watch(w, r, kind)
			return
		}
		if leaderless(w, r) {
			return
		}
		items, rv, _ := f.store.List(r.Context(), kind)
		if items == nil {
			items = []api.RawObject{}
		}
		writeJSON(w, api.ObjectList{Items: items, ResourceVersion: rv})
	})
	mux.HandleFunc("GET /v1/{kind}/{name}", func(w http.ResponseWriter, r *http.Request) {
		if leaderless(w, r) {
			return
		}
		o, err := f.store.Get(r.Context(), api.Kind(r.PathValue("kind")), r.PathValue("name"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, o)
	})
	mux.HandleFunc("DELETE /v1/{kind}/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := f.store.Delete(r.Context(), api.Kind(r.PathValue("kind")), r.PathValue("name")); err != nil {
			writeErr(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/pods/{name}/logs", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		tail, _ := strconv.Atoi(q.Get("tail"))
		opts := client.LogOptions{Follow: q.Get("follow") == "1", Since: q.Get("since"), Tail: tail}
		fw := &flushWriter{w: w}
		if err := f.store.Logs(r.Context(), r.PathValue("name"), opts, fw); err != nil && !fw.started {
			writeErr(w, err)
		}
	})
	mux.HandleFunc("PUT /v1/deployments/{name}/scale", func(w http.ResponseWriter, r *http.Request) {
		var req api.ScaleRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Replicas == nil {
			writeErr(w, &api.APIError{StatusCode: 400, Code: "bad_request", Message: "want {\"replicas\": N}"})
			return
		}
		o, err := f.store.Scale(r.Context(), r.PathValue("name"), *req.Replicas)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, o)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
			writeErr(w, &api.APIError{StatusCode: 401, Code: "unauthorized", Message: "missing or wrong token"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// flushWriter sends the 200 header on the first write and flushes every
// write, as the agent's logs route does.
type flushWriter struct {
	w       http.ResponseWriter
	started bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.started {
		f.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		f.w.WriteHeader(http.StatusOK)
		f.started = true
	}
	n, err := f.w.Write(p)
	f.w.(http.Flusher).Flush()
	return n, err
}

// fakeDecode is a manifest decoder for tests, independent of the real TOML
// format: each non-empty line is "KIND NAME [key=value...]" (labels); a line
// "error MSG" is a problem at file:line:1; an object declared twice is a
// problem. Every problem is reported, as a multiError.
func fakeDecode(files []api.ManifestFile) ([]api.Object, error) {
	var out []api.Object
	var errs multiError
	seen := map[string]string{}
	for _, file := range files {
		for i, line := range strings.Split(string(file.Data), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if f[0] == "error" {
				errs = append(errs, fmt.Errorf("%s:%d:1: %s", file.Name, i+1, strings.Join(f[1:], " ")))
				continue
			}
			o := api.New(api.Kind(f[0]))
			if o == nil || len(f) < 2 {
				errs = append(errs, fmt.Errorf("%s:%d:1: want KIND NAME", file.Name, i+1))
				continue
			}
			o.GetMeta().Name = f[1]
			where := fmt.Sprintf("%s:%d:1", file.Name, i+1)
			if prev, dup := seen[f[0]+"/"+f[1]]; dup {
				errs = append(errs, fmt.Errorf("%s: %s/%s declared twice: also at %s", where, f[0], f[1], prev))
				continue
			}
			seen[f[0]+"/"+f[1]] = where
			for _, kv := range f[2:] {
				k, v, _ := strings.Cut(kv, "=")
				if o.GetMeta().Labels == nil {
					o.GetMeta().Labels = map[string]string{}
				}
				o.GetMeta().Labels[k] = v
			}
			switch o := o.(type) {
			case *api.Deployment:
				o.Spec.Template.Exec = []string{"/bin/" + f[1]}
			case *api.Daemon:
				o.Spec.Template.Exec = []string{"/bin/" + f[1]}
			}
			out = append(out, o)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
