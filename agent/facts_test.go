package agent

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		meminfo string
		want    int64
	}{
		{"pi zero w", "MemTotal:         439548 kB\nMemFree:          301084 kB\n", 439548 << 10},
		{"pi 3b", "MemTotal:         929476 kB\nMemFree:          620432 kB\nMemAvailable:     797308 kB\n", 929476 << 10},
		// Over 4 GiB: must not wrap on a 32-bit (armv7/armv6) build.
		{"pi 4 8GB", "MemTotal:        7998404 kB\n", 7998404 << 10},
		{"pi 5 16GB", "MemTotal:       16608528 kB\n", 16608528 << 10},
		{"not the first line", "MemFree: 1 kB\nBuffers: 2 kB\nMemTotal: 2048 kB\n", 2048 << 10},
		{"no trailing newline", "MemTotal: 1024 kB", 1024 << 10},
		{"tabs", "MemTotal:\t\t512\tkB\n", 512 << 10},
		{"missing", "MemFree: 1 kB\nSwapTotal: 0 kB\n", 0},
		{"empty", "", 0},
		{"no value", "MemTotal:\n", 0},
		{"not a number", "MemTotal: lots kB\n", 0},
		{"other key with the prefix", "MemTotalHuge: 8 kB\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseMemTotal([]byte(tt.meminfo)); got != tt.want {
				t.Errorf("ParseMemTotal(%q) = %d, want %d", tt.meminfo, got, tt.want)
			}
		})
	}
}

// TestReadFacts reads this machine's facts. Under qemu-user (scripts/test-arm)
// Arch and the build are the emulated ones while /proc/meminfo and the CPU
// count are the host's: the test checks what must hold on a real board too.
func TestReadFacts(t *testing.T) {
	f := ReadFacts()
	goarm := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOARM" {
				goarm = s.Value
			}
		}
	}
	t.Logf("facts: %+v (GOARM %q)", f, goarm)
	if f.Arch != runtime.GOARCH {
		t.Errorf("Arch = %q, want runtime.GOARCH %q", f.Arch, runtime.GOARCH)
	}
	if f.CPUs <= 0 || f.CPUs != runtime.NumCPU() {
		t.Errorf("CPUs = %d, want runtime.NumCPU() = %d (> 0)", f.CPUs, runtime.NumCPU())
	}
	if f.Model != strings.TrimSpace(f.Model) || strings.ContainsRune(f.Model, 0) {
		t.Errorf("Model = %q: want no surrounding space and no NUL (device-tree strings end in NUL)", f.Model)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if f.MemoryBytes <= 0 || f.MemoryBytes%1024 != 0 {
		t.Errorf("MemoryBytes = %d, want a positive number of KiB from /proc/meminfo", f.MemoryBytes)
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatalf("Linux without /proc/meminfo: %v", err)
	}
	if want := ParseMemTotal(b); f.MemoryBytes != want {
		t.Errorf("MemoryBytes = %d, /proc/meminfo says %d", f.MemoryBytes, want)
	}
}
