package promtext

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// goFamilies are the go_* families AddGo serves: the names, types and
// meaning of client_golang's Go collector (go_gc_cycles_total excepted,
// which it does not have), read from runtime/metrics, which needs no
// stop-the-world as runtime.ReadMemStats does.
var goFamilies = []struct {
	desc *Desc
	keys []string // runtime/metrics keys summed
}{
	{NewDesc("go_goroutines", "Goroutines that exist now.", Gauge), []string{"/sched/goroutines:goroutines"}},
	{NewDesc("go_gc_cycles_total", "Completed garbage collection cycles.", Counter), []string{"/gc/cycles/total:gc-cycles"}},
	{NewDesc("go_gc_gogc_percent", "The heap growth target percentage (GOGC).", Gauge), []string{"/gc/gogc:percent"}},
	{NewDesc("go_gc_gomemlimit_bytes", "The Go runtime's memory limit (GOMEMLIMIT).", Gauge), []string{"/gc/gomemlimit:bytes"}},
	{NewDesc("go_memstats_alloc_bytes", "Heap bytes allocated to objects and in use now.", Gauge), []string{"/memory/classes/heap/objects:bytes"}},
	{NewDesc("go_memstats_alloc_bytes_total", "Heap bytes allocated since the start, freed ones included.", Counter), []string{"/gc/heap/allocs:bytes"}},
	{NewDesc("go_memstats_heap_inuse_bytes", "Heap bytes in spans in use (objects and their unused space).", Gauge), []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{NewDesc("go_memstats_heap_objects", "Heap objects allocated now.", Gauge), []string{"/gc/heap/objects:objects"}},
	{NewDesc("go_memstats_next_gc_bytes", "Heap size at which the next garbage collection starts.", Gauge), []string{"/gc/heap/goal:bytes"}},
	{NewDesc("go_memstats_stack_inuse_bytes", "Bytes of goroutine stacks in use.", Gauge), []string{"/memory/classes/heap/stacks:bytes"}},
	{NewDesc("go_memstats_sys_bytes", "Bytes the Go runtime obtained from the operating system.", Gauge), []string{"/memory/classes/total:bytes"}},
	{NewDesc("go_sched_gomaxprocs_threads", "GOMAXPROCS: threads that may run Go code at once.", Gauge), []string{"/sched/gomaxprocs:threads"}},
}

var (
	goThreadsDesc = NewDesc("go_threads", "OS threads the Go runtime created.", Gauge)
	goInfoDesc    = NewDesc("go_info", "Always 1: the Go version as a label.", Gauge, "version")
)

// AddGo registers the go_* families: go_goroutines, go_threads,
// go_info{version}, go_gc_cycles_total, go_gc_gogc_percent,
// go_gc_gomemlimit_bytes, go_memstats_alloc_bytes(_total),
// go_memstats_heap_inuse_bytes, go_memstats_heap_objects,
// go_memstats_next_gc_bytes, go_memstats_stack_inuse_bytes,
// go_memstats_sys_bytes and go_sched_gomaxprocs_threads.
func (r *Registry) AddGo() {
	var mu sync.Mutex
	var samples []metrics.Sample
	index := map[string]int{}
	descs := []*Desc{goThreadsDesc}
	for _, f := range goFamilies {
		descs = append(descs, f.desc)
		for _, k := range f.keys {
			if _, ok := index[k]; !ok {
				index[k] = len(samples)
				samples = append(samples, metrics.Sample{Name: k})
			}
		}
	}
	r.ConstGauge(goInfoDesc, 1, runtime.Version())
	r.Collect(func(s *Sink) {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(samples)
		for _, f := range goFamilies {
			var v float64
			known := true
			for _, k := range f.keys {
				switch sm := samples[index[k]].Value; sm.Kind() {
				case metrics.KindUint64:
					v += float64(sm.Uint64())
				case metrics.KindFloat64:
					v += sm.Float64()
				default: // not in this Go version
					known = false
				}
			}
			if known {
				s.Add(f.desc, v)
			}
		}
		n, _ := runtime.ThreadCreateProfile(nil)
		s.Add(goThreadsDesc, float64(n))
	}, descs...)
}
