package promtext_test

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/internal/promtext"
)

func write(t *testing.T, r *promtext.Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.String()
}

// TestWrite: families sorted by name, HELP and TYPE once each, series
// sorted by label values with label names sorted, vectors' series at 0
// from With, empty families left out.
func TestWrite(t *testing.T) {
	r := promtext.NewRegistry()
	reqs := r.CounterVec(promtext.NewDesc("b_requests_total", "Requests.", promtext.Counter, "node", "code"))
	reqs.With("n2", "200").Add(3)
	reqs.With("n1", "500").Inc()
	reqs.With("n1", "200")
	lat := r.HistogramVec(promtext.NewDesc("c_seconds", "Latency.", promtext.Histogram, "op"), []float64{0.5, 1})
	lat.With("get").Observe(0.25)
	lat.With("get").Observe(0.75)
	lat.With("get").Observe(2)
	r.ConstGauge(promtext.NewDesc("a_info", "Always 1.", promtext.Gauge, "version", "arch"), 1, "v1", "arm64")
	up := promtext.NewDesc("d_up", "Up.", promtext.Gauge, "state")
	absent := promtext.NewDesc("e_absent", "Never written.", promtext.Gauge)
	r.Collect(func(s *promtext.Sink) {
		s.Add(up, 0, "left")
		s.Add(up, 1, "alive")
	}, up, absent)
	r.CounterVec(promtext.NewDesc("f_unused_total", "No series yet.", promtext.Counter, "x"))
	want := `# HELP a_info Always 1.
# TYPE a_info gauge
a_info{arch="arm64",version="v1"} 1
# HELP b_requests_total Requests.
# TYPE b_requests_total counter
b_requests_total{code="200",node="n1"} 0
b_requests_total{code="200",node="n2"} 3
b_requests_total{code="500",node="n1"} 1
# HELP c_seconds Latency.
# TYPE c_seconds histogram
c_seconds_bucket{op="get",le="0.5"} 1
c_seconds_bucket{op="get",le="1"} 2
c_seconds_bucket{op="get",le="+Inf"} 3
c_seconds_sum{op="get"} 3
c_seconds_count{op="get"} 3
# HELP d_up Up.
# TYPE d_up gauge
d_up{state="alive"} 1
d_up{state="left"} 0
`
	if diff := cmp.Diff(want, write(t, r)); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

// TestEscaping: help escapes backslash and newline; label values escape
// backslash, double quote and newline; floats as Prometheus writes them.
func TestEscaping(t *testing.T) {
	r := promtext.NewRegistry()
	d := promtext.NewDesc("x", "a \\ b\nc \"q\"", promtext.Gauge, "v")
	values := map[string]float64{
		"back\\slash": math.Inf(1), "quote\"d": math.Inf(-1), "new\nline": math.NaN(),
		"small": 1e-7, "big": 1e21, "frac": 0.1, "neg": -2.5, "zero": 0,
	}
	r.Collect(func(s *promtext.Sink) {
		for v, f := range values {
			s.Add(d, f, v)
		}
	}, d)
	want := `# HELP x a \\ b\nc "q"
# TYPE x gauge
x{v="back\\slash"} +Inf
x{v="big"} 1e+21
x{v="frac"} 0.1
x{v="neg"} -2.5
x{v="new\nline"} NaN
x{v="quote\"d"} -Inf
x{v="small"} 1e-07
x{v="zero"} 0
`
	if diff := cmp.Diff(want, write(t, r)); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

// TestHistogramBuckets: an observation counts in the first bucket whose
// bound is at least it (a value on a bound is in that bucket); buckets
// are cumulative, _count equals +Inf, _sum adds the values.
func TestHistogramBuckets(t *testing.T) {
	r := promtext.NewRegistry()
	h := r.HistogramVec(promtext.NewDesc("h", "H.", promtext.Histogram), []float64{1, 2, 5})
	for _, v := range []float64{-1, 0, 1, 1.5, 2, 2.0001, 5, 7, 100} {
		h.With().Observe(v)
	}
	want := `# HELP h H.
# TYPE h histogram
h_bucket{le="1"} 3
h_bucket{le="2"} 5
h_bucket{le="5"} 7
h_bucket{le="+Inf"} 9
h_sum 117.5001
h_count 9
`
	if diff := cmp.Diff(want, write(t, r)); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

// TestSinkErrors: a collect function's sample of an undeclared family,
// with the wrong label count, or a repeated series, is left out and named
// in Write's error; the rest is written.
func TestSinkErrors(t *testing.T) {
	for _, c := range []struct {
		name, wantErr string
		add           func(s *promtext.Sink, mine, other *promtext.Desc)
	}{
		{"undeclared", "did not declare", func(s *promtext.Sink, _, other *promtext.Desc) { s.Add(other, 1) }},
		{"label count", "1 label values for 0 labels", func(s *promtext.Sink, mine, _ *promtext.Desc) { s.Add(mine, 1, "x") }},
		{"repeated", "twice", func(s *promtext.Sink, mine, _ *promtext.Desc) { s.Add(mine, 2) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := promtext.NewRegistry()
			mine := promtext.NewDesc("mine", "M.", promtext.Gauge)
			other := promtext.NewDesc("other", "O.", promtext.Gauge)
			r.Collect(func(s *promtext.Sink) { s.Add(mine, 1); c.add(s, mine, other) }, mine)
			r.Collect(func(s *promtext.Sink) {}, other)
			var b bytes.Buffer
			err := r.Write(&b)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Write error %v, want %q", err, c.wantErr)
			}
			if want := "# HELP mine M.\n# TYPE mine gauge\nmine 1\n"; b.String() != want {
				t.Errorf("written %q, want %q", b.String(), want)
			}
		})
	}
}

// TestDeclarationPanics: invalid names, reserved or repeated labels, a
// family registered twice, wrong types and bad buckets are programming
// errors that panic at declaration.
func TestDeclarationPanics(t *testing.T) {
	r := promtext.NewRegistry()
	r.CounterVec(promtext.NewDesc("taken_total", "T.", promtext.Counter))
	for name, f := range map[string]func(){
		"bad name":         func() { promtext.NewDesc("1x", "", promtext.Gauge) },
		"bad label":        func() { promtext.NewDesc("x", "", promtext.Gauge, "a-b") },
		"reserved label":   func() { promtext.NewDesc("x", "", promtext.Gauge, "__x") },
		"le on histogram":  func() { promtext.NewDesc("x", "", promtext.Histogram, "le") },
		"label twice":      func() { promtext.NewDesc("x", "", promtext.Gauge, "a", "a") },
		"unknown type":     func() { promtext.NewDesc("x", "", "summary") },
		"registered twice": func() { r.CounterVec(promtext.NewDesc("taken_total", "T.", promtext.Counter)) },
		"gauge as counter": func() { r.CounterVec(promtext.NewDesc("g", "", promtext.Gauge)) },
		"unsorted buckets": func() { r.HistogramVec(promtext.NewDesc("h1", "", promtext.Histogram), []float64{1, 1}) },
		"inf bucket":       func() { r.HistogramVec(promtext.NewDesc("h2", "", promtext.Histogram), []float64{1, math.Inf(1)}) },
		"collect histo":    func() { r.Collect(func(*promtext.Sink) {}, promtext.NewDesc("h3", "", promtext.Histogram)) },
		"label values":     func() { r.CounterVec(promtext.NewDesc("c_total", "", promtext.Counter, "a")).With() },
		"counter decrease": func() { r.CounterVec(promtext.NewDesc("d_total", "", promtext.Counter)).With().Add(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

// TestConcurrent: counters and histograms updated from many goroutines
// while scrapes run count every update (run with -race).
func TestConcurrent(t *testing.T) {
	r := promtext.NewRegistry()
	c := r.CounterVec(promtext.NewDesc("c_total", "C.", promtext.Counter, "w"))
	h := r.HistogramVec(promtext.NewDesc("h", "H.", promtext.Histogram, "w"), []float64{1})
	const workers, n = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l := fmt.Sprint(w % 2)
			for range n {
				c.With(l).Inc()
				h.With(l).Observe(0.5)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := r.Write(&bytes.Buffer{}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	out := write(t, r)
	for _, line := range []string{
		`c_total{w="0"} 4000`, `c_total{w="1"} 4000`,
		`h_bucket{w="0",le="1"} 4000`, `h_count{w="1"} 4000`, `h_sum{w="1"} 2000`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no %q in:\n%s", line, out)
		}
	}
}

// TestRuntimeAndProcess: AddGo and AddProcess serve the families herd's
// docs list, with plausible values.
func TestRuntimeAndProcess(t *testing.T) {
	r := promtext.NewRegistry()
	r.AddGo()
	r.AddProcess()
	out := write(t, r)
	families := []string{"go_goroutines", "go_threads", "go_info", "go_gc_cycles_total", "go_gc_gogc_percent",
		"go_gc_gomemlimit_bytes", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total",
		"go_memstats_heap_inuse_bytes", "go_memstats_heap_objects", "go_memstats_next_gc_bytes",
		"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_sched_gomaxprocs_threads"}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		families = append(families, "process_cpu_seconds_total", "process_resident_memory_bytes",
			"process_virtual_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds")
	}
	for _, f := range families {
		if !regexp.MustCompile(`(?m)^# TYPE ` + f + ` (gauge|counter)\n` + f + `(\{[^}]*\})? [0-9.e+]+$`).MatchString(out) {
			t.Errorf("no family %s with a value in:\n%s", f, out)
		}
	}
	if !regexp.MustCompile(`(?m)^go_info\{version="go[^"]+"\} 1$`).MatchString(out) {
		t.Errorf("no go_info{version}")
	}
	if regexp.MustCompile(`(?m)^(go_goroutines|go_threads|process_resident_memory_bytes|process_open_fds) 0$`).MatchString(out) {
		t.Errorf("a family that cannot be 0 is 0:\n%s", out)
	}
}

// TestHandler: GET serves the text format, HEAD its headers only, other
// methods get 405.
func TestHandler(t *testing.T) {
	r := promtext.NewRegistry()
	r.CounterVec(promtext.NewDesc("c_total", "C.", promtext.Counter)).With().Inc()
	h := r.Handler()
	for _, c := range []struct {
		method   string
		code     int
		wantBody string
	}{
		{http.MethodGet, 200, "# HELP c_total C.\n# TYPE c_total counter\nc_total 1\n"},
		{http.MethodHead, 200, ""},
		{http.MethodPost, 405, "promtext: only GET and HEAD\n"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, "/metrics", nil))
		if w.Code != c.code || w.Body.String() != c.wantBody {
			t.Errorf("%s: %d %q, want %d %q", c.method, w.Code, w.Body.String(), c.code, c.wantBody)
		}
		if c.code == 200 && w.Header().Get("Content-Type") != promtext.ContentType {
			t.Errorf("%s: Content-Type %q", c.method, w.Header().Get("Content-Type"))
		}
	}
}

// BenchmarkScrape is one scrape of a registry shaped like an agent's:
// runtime and process families, 4 histograms of 13 buckets over 6 series,
// counters over 10 series and a collect function of 20 gauges.
func BenchmarkScrape(b *testing.B) {
	r := promtext.NewRegistry()
	r.AddGo()
	r.AddProcess()
	for i := range 4 {
		h := r.HistogramVec(promtext.NewDesc(fmt.Sprintf("h%d_seconds", i), "H.", promtext.Histogram, "op"),
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10})
		for j := range 6 {
			h.With(fmt.Sprint("op", j)).Observe(0.01 * float64(j))
		}
	}
	c := r.CounterVec(promtext.NewDesc("c_total", "C.", promtext.Counter, "node"))
	for j := range 10 {
		c.With(fmt.Sprint("b", j)).Inc()
	}
	g := promtext.NewDesc("g", "G.", promtext.Gauge, "state")
	r.Collect(func(s *promtext.Sink) {
		for j := range 20 {
			s.Add(g, float64(j), fmt.Sprint("s", j))
		}
	}, g)
	var n int
	for b.Loop() {
		var buf bytes.Buffer
		if err := r.Write(&buf); err != nil {
			b.Fatal(err)
		}
		n = buf.Len()
	}
	b.ReportMetric(float64(n), "bytes/scrape")
}

// BenchmarkHotPath is what an observed event costs: a labelled counter's
// increment and a labelled histogram's observation of existing series.
func BenchmarkHotPath(b *testing.B) {
	r := promtext.NewRegistry()
	c := r.CounterVec(promtext.NewDesc("c_total", "C.", promtext.Counter, "node"))
	h := r.HistogramVec(promtext.NewDesc("h_seconds", "H.", promtext.Histogram, "op"),
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10})
	for b.Loop() {
		c.With("b1").Inc()
		h.With("show_units").Observe(0.004)
	}
}
