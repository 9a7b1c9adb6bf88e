package promtext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the text exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and writes them. Its methods are safe
// for concurrent use; a program makes one per agent.
type Registry struct {
	mu       sync.Mutex
	families []*family // sorted by name
	colls    []*collector
	lastSize atomic.Int64 // bytes of the last scrape, to size the next
}

// family is one registered family: a vector writes its own samples, a
// collected family's come from its collector.
type family struct {
	desc  *Desc
	write func([]byte) []byte
}

// collector is a collect function and the families it declared.
type collector struct {
	descs []*Desc
	fn    func(*Sink)
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{} }

// add registers d; it panics when a family of that name exists.
func (r *Registry) add(d *Desc, write func([]byte) []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, found := slices.BinarySearchFunc(r.families, d.name, func(f *family, name string) int { return strings.Compare(f.desc.name, name) })
	if found {
		panic(fmt.Sprintf("promtext: family %s registered twice", d.name))
	}
	r.families = slices.Insert(r.families, i, &family{desc: d, write: write})
}

// CounterVec registers the counter family d and returns it. It panics when
// d is not a counter or its name is taken.
func (r *Registry) CounterVec(d *Desc) *CounterVec {
	if d.typ != Counter {
		panic(fmt.Sprintf("promtext: %s is a %s, not a counter", d.name, d.typ))
	}
	c := &CounterVec{m: newSeriesMap(d, func() *CounterValue { return &CounterValue{} })}
	r.add(d, c.write)
	return c
}

// HistogramVec registers the histogram family d with buckets (finite
// upper bounds, strictly increasing; +Inf is added) and returns it. It
// panics when d is not a histogram, the buckets are not increasing or
// the name is taken.
func (r *Registry) HistogramVec(d *Desc, buckets []float64) *HistogramVec {
	if d.typ != Histogram {
		panic(fmt.Sprintf("promtext: %s is a %s, not a histogram", d.name, d.typ))
	}
	les := checkBuckets(d.name, buckets)
	buckets = slices.Clone(buckets)
	h := &HistogramVec{buckets: buckets, les: les}
	h.m = newSeriesMap(d, func() *HistogramValue {
		return &HistogramValue{buckets: buckets, counts: make([]atomic.Uint64, len(buckets)+1)}
	})
	r.add(d, h.write)
	return h
}

// ConstGauge registers the gauge family d with one series of constant
// value v (build information). It panics like Collect.
func (r *Registry) ConstGauge(d *Desc, v float64, values ...string) {
	values = slices.Clone(values)
	if d.typ != Gauge || len(values) != len(d.labels) {
		panic(fmt.Sprintf("promtext: %s: not a gauge with %d labels", d.name, len(values)))
	}
	r.Collect(func(s *Sink) { s.Add(d, v, values...) }, d)
}

// Collect registers the counter and gauge families descs, whose samples
// fn adds to its Sink at every scrape (read from their source then). fn
// must be safe for concurrent use: scrapes may overlap. It panics when a
// Desc is a histogram or a name is taken.
func (r *Registry) Collect(fn func(*Sink), descs ...*Desc) {
	c := &collector{descs: slices.Clone(descs), fn: fn}
	for _, d := range descs {
		if d.typ == Histogram {
			panic(fmt.Sprintf("promtext: %s: collect functions write counters and gauges only", d.name))
		}
		r.add(d, nil)
	}
	r.mu.Lock()
	r.colls = append(r.colls, c)
	r.mu.Unlock()
}

// Sink takes the samples of one collect function during a scrape.
type Sink struct {
	declared []*Desc
	samples  map[*Desc][]sample
	err      error
}

type sample struct {
	values []string
	v      float64
}

// Add adds a sample of d with label values in d's label order. A sample
// of a family the collect function did not declare, or with the wrong
// number of label values, is left out and makes Registry.Write return an
// error naming it.
func (s *Sink) Add(d *Desc, v float64, values ...string) {
	switch {
	case !slices.Contains(s.declared, d):
		s.fail(fmt.Errorf("promtext: sample of %s, a family its collect function did not declare", d.name))
	case len(values) != len(d.labels):
		s.fail(fmt.Errorf("promtext: %s: %d label values for %d labels %q", d.name, len(values), len(d.labels), d.labels))
	default:
		s.samples[d] = append(s.samples[d], sample{values: slices.Clone(values), v: v})
	}
}

func (s *Sink) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Write writes every family with samples in the text format, sorted by
// name (a family without samples is left out, HELP and TYPE included).
// Samples a collect function got wrong (see Sink.Add) or repeated are left
// out and named in the error; everything else is written.
func (r *Registry) Write(w io.Writer) error {
	b, err := r.appendText(make([]byte, 0, r.lastSize.Load()+1024))
	r.lastSize.Store(int64(len(b)))
	_, werr := w.Write(b)
	return errors.Join(err, werr)
}

func (r *Registry) appendText(b []byte) ([]byte, error) {
	r.mu.Lock()
	families, colls := slices.Clone(r.families), slices.Clone(r.colls)
	r.mu.Unlock()
	sink := &Sink{samples: map[*Desc][]sample{}}
	for _, c := range colls {
		sink.declared = c.descs
		c.fn(sink)
	}
	for _, f := range families {
		start := len(b)
		b = appendHeader(b, f.desc)
		header := len(b)
		if f.write != nil {
			b = f.write(b)
		} else {
			b = sink.appendCollected(b, f.desc)
		}
		if len(b) == header {
			b = b[:start]
		}
	}
	return b, sink.err
}

// appendCollected appends the samples collected for d, sorted by label
// values; a repeated series is left out.
func (s *Sink) appendCollected(b []byte, d *Desc) []byte {
	samples := s.samples[d]
	sort.SliceStable(samples, func(i, j int) bool { return compareValues(d, samples[i].values, samples[j].values) < 0 })
	for i, sm := range samples {
		if i > 0 && compareValues(d, samples[i-1].values, sm.values) == 0 {
			s.fail(fmt.Errorf("promtext: %s: series %q twice", d.name, sm.values))
			continue
		}
		b = appendSample(b, d, "", sm.values, "", "", sm.v)
	}
	return b
}

// Handler serves the registry in the text format to GET and HEAD (405 for
// other methods). It does no authentication. A sample a collect function
// got wrong is left out of the answer, which is still served (Write
// returns the error; tests check it).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "promtext: only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		var buf bytes.Buffer
		_ = r.Write(&buf) // see the doc comment
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(buf.Bytes())
	})
}
