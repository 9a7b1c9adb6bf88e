package promtext

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// seriesMap holds a vector's series by label values, created on demand.
// Lookups take a read lock and allocate nothing once the series exists.
type seriesMap[S any] struct {
	desc   *Desc
	mu     sync.RWMutex
	series map[string]*S
	values map[*S][]string
	make   func() *S
}

func newSeriesMap[S any](d *Desc, mk func() *S) seriesMap[S] {
	return seriesMap[S]{desc: d, series: map[string]*S{}, values: map[*S][]string{}, make: mk}
}

// get returns the series of values, creating it (at 0) when new. It panics
// when the number of values is not the number of label names.
func (m *seriesMap[S]) get(values []string) *S {
	if len(values) != len(m.desc.labels) {
		panic(fmt.Sprintf("promtext: %s: %d label values for %d labels %q", m.desc.name, len(values), len(m.desc.labels), m.desc.labels))
	}
	var buf [128]byte
	key := appendKey(buf[:0], values)
	m.mu.RLock()
	s, ok := m.series[string(key)]
	m.mu.RUnlock()
	if ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.series[string(key)]; ok {
		return s
	}
	s = m.make()
	m.series[string(key)] = s
	m.values[s] = slices.Clone(values)
	return s
}

// entry is a series and its label values.
type entry[S any] struct {
	s      *S
	values []string
}

// snapshot returns the series sorted by label values.
func (m *seriesMap[S]) snapshot() []entry[S] {
	m.mu.RLock()
	out := make([]entry[S], 0, len(m.values))
	for s, v := range m.values {
		out = append(out, entry[S]{s, v})
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return compareValues(m.desc, out[i].values, out[j].values) < 0 })
	return out
}

// appendKey appends an unambiguous key for values: each one length-prefixed.
func appendKey(b []byte, values []string) []byte {
	for _, v := range values {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b
}

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (f *atomicFloat) load() float64 { return math.Float64frombits(f.bits.Load()) }

// CounterVec is a counter family with fixed label names. Its methods are
// safe for concurrent use.
type CounterVec struct{ m seriesMap[CounterValue] }

// CounterValue is one series of a CounterVec.
type CounterValue struct{ v atomicFloat }

// With returns the series of the label values (in the Desc's label order),
// created at 0 when new: calling it without adding initialises a series.
// It panics when the number of values is wrong.
func (c *CounterVec) With(values ...string) *CounterValue { return c.m.get(values) }

// Inc adds 1.
func (c *CounterValue) Inc() { c.v.add(1) }

// Add adds v; it panics when v is negative (a counter never decreases).
func (c *CounterValue) Add(v float64) {
	if v < 0 {
		panic("promtext: counter decreased")
	}
	c.v.add(v)
}

func (c *CounterVec) write(b []byte) []byte {
	for _, e := range c.m.snapshot() {
		b = appendSample(b, c.m.desc, "", e.values, "", "", e.s.v.load())
	}
	return b
}

// HistogramVec is a histogram family with fixed buckets and label names.
// Its methods are safe for concurrent use.
type HistogramVec struct {
	m       seriesMap[HistogramValue]
	buckets []float64
	les     []string // the buckets' le label values
}

// HistogramValue is one series of a HistogramVec.
type HistogramValue struct {
	buckets []float64
	counts  []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum     atomicFloat
}

// With returns the series of the label values, created empty when new.
// It panics when the number of values is wrong.
func (h *HistogramVec) With(values ...string) *HistogramValue { return h.m.get(values) }

// Observe records v in the first bucket whose upper bound is at least v
// (+Inf when none) and adds it to the sum.
func (h *HistogramValue) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.buckets, v)].Add(1)
	h.sum.add(v)
}

func (h *HistogramVec) write(b []byte) []byte {
	for _, e := range h.m.snapshot() {
		s, values := e.s, e.values
		// _count is the +Inf bucket, so the two always agree; _sum may
		// miss an observation that is being recorded during the scrape.
		var cum uint64
		for j := range s.counts {
			cum += s.counts[j].Load()
			b = appendSample(b, h.m.desc, "_bucket", values, "le", h.les[j], float64(cum))
		}
		b = appendSample(b, h.m.desc, "_sum", values, "", "", s.sum.load())
		b = appendSample(b, h.m.desc, "_count", values, "", "", float64(cum))
	}
	return b
}

// checkBuckets returns the buckets' le values and panics unless the
// buckets are finite and strictly increasing (+Inf is implicit).
func checkBuckets(name string, buckets []float64) []string {
	les := make([]string, 0, len(buckets)+1)
	for i, u := range buckets {
		if math.IsNaN(u) || math.IsInf(u, 0) || i > 0 && u <= buckets[i-1] {
			panic(fmt.Sprintf("promtext: %s: buckets %v are not finite and strictly increasing", name, buckets))
		}
		les = append(les, string(appendFloat(nil, u)))
	}
	return append(les, "+Inf")
}
