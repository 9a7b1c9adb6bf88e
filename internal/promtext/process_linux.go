package promtext

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

var (
	procCPUDesc     = NewDesc("process_cpu_seconds_total", "User and system CPU time this process spent, in seconds.", Counter)
	procRSSDesc     = NewDesc("process_resident_memory_bytes", "Resident memory of this process in bytes.", Gauge)
	procVirtDesc    = NewDesc("process_virtual_memory_bytes", "Virtual memory of this process in bytes.", Gauge)
	procOpenFDsDesc = NewDesc("process_open_fds", "File descriptors this process has open.", Gauge)
	procMaxFDsDesc  = NewDesc("process_max_fds", "The limit of open file descriptors (soft RLIMIT_NOFILE).", Gauge)
	procStartDesc   = NewDesc("process_start_time_seconds", "When this process started, in seconds since the Unix epoch.", Gauge)
)

// userHZ is the unit of /proc's clock ticks (USER_HZ, 100 on every Linux
// architecture herd runs on).
const userHZ = 100

// AddProcess registers the process_* families, read from /proc/self and
// getrusage at scrape time: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds. A
// value that cannot be read is left out. On other systems it adds
// nothing.
func (r *Registry) AddProcess() {
	start, startOK := startTime()
	r.Collect(func(s *Sink) {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			s.Add(procCPUDesc, tvSeconds(ru.Utime)+tvSeconds(ru.Stime))
		}
		// statm, not stat: the same numbers on a board, and qemu-user
		// (make test-arm) fakes stat's with zeros but passes statm through.
		if b, err := os.ReadFile("/proc/self/statm"); err == nil {
			if f := strings.Fields(string(b)); len(f) >= 2 {
				page := float64(os.Getpagesize())
				if size, err := strconv.ParseFloat(f[0], 64); err == nil {
					s.Add(procVirtDesc, size*page)
				}
				if rss, err := strconv.ParseFloat(f[1], 64); err == nil {
					s.Add(procRSSDesc, rss*page)
				}
			}
		}
		if d, err := os.Open("/proc/self/fd"); err == nil {
			names, err := d.Readdirnames(-1)
			d.Close()
			if err == nil {
				s.Add(procOpenFDsDesc, float64(len(names)))
			}
		}
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
			s.Add(procMaxFDsDesc, float64(lim.Cur))
		}
		if startOK {
			s.Add(procStartDesc, start)
		}
	}, procCPUDesc, procRSSDesc, procVirtDesc, procOpenFDsDesc, procMaxFDsDesc, procStartDesc)
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// statFields returns the fields of /proc/self/stat after the command
// name: field 3 of proc(5) (state) is index 0.
func statFields() ([]string, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// startTime is the process's start in Unix seconds: the boot time
// (/proc/stat btime) plus its start in ticks after boot (/proc/self/stat
// field 22).
func startTime() (float64, bool) {
	f, ok := statFields()
	if !ok || len(f) <= 19 {
		return 0, false
	}
	ticks, err := strconv.ParseFloat(f[19], 64)
	if err != nil {
		return 0, false
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return boot + ticks/userHZ, err == nil
		}
	}
	return 0, false
}
