package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
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

// boardSources reads the samples of testdata/facts/NAME: what ReadFacts
// reads on that board. The files are written after the formats of real
// boards (Raspberry Pi OS bookworm unless the name says otherwise); see
// testdata/facts/README.
func boardSources(t *testing.T, name, goarch, goarm string, cpus int) FactSources {
	t.Helper()
	dir := filepath.Join("testdata", "facts", name)
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	src := FactSources{GOARCH: goarch, GOARM: goarm, NumCPU: cpus,
		CPUInfo: read("cpuinfo"), Model: read("model"), MemInfo: read("meminfo"), Mounts: read("mounts"),
		ProcCgroups: read("cgroups"), CgroupControllers: read("cgroup.controllers"), SystemctlVersion: read("systemctl-version"),
		DevNodes: strings.Fields(string(read("dev")))}
	uname := strings.Fields(string(read("uname-rm")))
	if len(uname) != 2 {
		t.Fatalf("%s/uname-rm: want \"RELEASE MACHINE\", got %q", dir, uname)
	}
	src.Release, src.Machine = uname[0], uname[1]
	return src
}

func TestFactsFromBoards(t *testing.T) {
	tests := []struct {
		board         string
		goarch, goarm string
		cpus          int
		want          api.BoardFacts
		warnings      []string // api.NodeStatus.Warnings, Short
	}{
		{"pi3b-armhf", "arm", "6", 4, api.BoardFacts{Arch: "arm", ArchVariant: "armv7", KernelArch: "armv7l", Kernel: "6.6.51+rpt-rpi-v7",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi 3 Model B Rev 1.2", MemoryBytes: 921652 << 10, CPUs: 4}, []string{"no-memory-limits"}},
		{"pi3b-arm64", "arm64", "", 4, api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Kernel: "6.6.51+rpt-rpi-v8",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"},
			Model: "Raspberry Pi 3 Model B Rev 1.2", MemoryBytes: 929476 << 10, CPUs: 4}, nil},
		{"pi3bplus-buster", "arm", "7", 4, api.BoardFacts{Arch: "arm", ArchVariant: "armv7", KernelArch: "armv7l", Kernel: "5.10.103-v7+",
			Systemd: "241", Cgroup: "hybrid", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi 3 Model B Plus Rev 1.3", MemoryBytes: 948280 << 10, CPUs: 4}, []string{"no-memory-limits"}},
		{"pi4b", "arm64", "", 4, api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Kernel: "6.6.51+rpt-rpi-v8",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi 4 Model B Rev 1.4", MemoryBytes: 7998404 << 10, CPUs: 4,
			Devices: []string{"gpiochip0", "gpiochip1", "i2c-1", "i2c-20", "i2c-21", "spidev0.0", "spidev0.1", "ttyUSB0", "ttyAMA0",
				"video10", "video11", "video12", "video13", "video14", "video15", "video16", "video18", "video19", "video20", "video21", "video22", "video23", "video31"}},
			[]string{"no-memory-limits"}},
		// Pi OS 32-bit boots the 64-bit kernel on a Pi 4: uname says
		// aarch64, the userland (and herd) is 32-bit ARM.
		{"pi4b-armhf", "arm", "6", 4, api.BoardFacts{Arch: "arm", ArchVariant: "armv7", KernelArch: "aarch64", Kernel: "6.6.51+rpt-rpi-v8",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi 4 Model B Rev 1.2", MemoryBytes: 3885092 << 10, CPUs: 4}, []string{"no-memory-limits"}},
		{"pi5", "arm64", "", 4, api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Kernel: "6.6.51+rpt-rpi-2712",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"},
			Model: "Raspberry Pi 5 Model B Rev 1.0", MemoryBytes: 8245952 << 10, CPUs: 4}, nil},
		// The ARM1176 says "CPU architecture: 7": only uname and the
		// model name tell armv6.
		{"pizerow", "arm", "6", 1, api.BoardFacts{Arch: "arm", ArchVariant: "armv6", KernelArch: "armv6l", Kernel: "6.6.51+rpt-rpi-v6",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi Zero W Rev 1.1", MemoryBytes: 439548 << 10, CPUs: 1}, []string{"no-memory-limits"}},
		{"pizero2w", "arm64", "", 4, api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Kernel: "6.6.51+rpt-rpi-v8",
			Systemd: "252.30", Cgroup: "v2", CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
			Model: "Raspberry Pi Zero 2 W Rev 1.0", MemoryBytes: 426988 << 10, CPUs: 4}, []string{"no-memory-limits"}},
		// The machine CI and the lab run on (hybrid, memory mounted).
		{"herd-ci-host", "amd64", "", 2, api.BoardFacts{Arch: "amd64", ArchVariant: "amd64", KernelArch: "x86_64", Kernel: "6.18.44-fc-v857",
			Systemd: "252.39", Cgroup: "hybrid", CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"},
			MemoryBytes: ParseMemTotal(mustRead(t, "testdata/facts/herd-ci-host/meminfo")), CPUs: 2}, nil},
		// A lab board: systemd-nspawn on that hybrid host mounts the v1
		// controllers read-only, so no limit is enforced (measured:
		// MemoryMax=20M did not stop a 200 MB allocation).
		{"lab-nspawn", "amd64", "", 2, api.BoardFacts{Arch: "amd64", ArchVariant: "amd64", KernelArch: "x86_64", Kernel: "6.18.44-fc-v857",
			Systemd: "252.39", Cgroup: "hybrid",
			MemoryBytes: ParseMemTotal(mustRead(t, "testdata/facts/lab-nspawn/meminfo")), CPUs: 2}, []string{"no-memory-limits", "no-cpu-limits"}},
	}
	for _, tt := range tests {
		t.Run(tt.board, func(t *testing.T) {
			got := FactsFrom(boardSources(t, tt.board, tt.goarch, tt.goarm, tt.cpus))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FactsFrom (-want +got):\n%s", diff)
			}
			st := api.NodeStatus{BoardFacts: api.BoardFacts{Model: got.Model, Cgroup: got.Cgroup, CgroupControllers: got.CgroupControllers}, Version: "v1"}
			var shorts []string
			for _, w := range st.Warnings() {
				shorts = append(shorts, w.Short)
			}
			if diff := cmp.Diff(tt.warnings, shorts); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestArchVariant(t *testing.T) {
	v6 := []byte("processor\t: 0\nmodel name\t: ARMv6-compatible processor rev 7 (v6l)\nCPU architecture: 7\n")
	v7 := []byte("processor\t: 0\nmodel name\t: ARMv7 Processor rev 5 (v7l)\nCPU architecture: 7\n")
	v8compat := []byte("processor\t: 0\nmodel name\t: ARMv8 Processor rev 4 (v8l)\nCPU architecture: 8\n")
	arm64 := []byte("processor\t: 0\nBogoMIPS\t: 108.00\nCPU architecture: 8\n")
	tests := []struct {
		name, goarch, goarm, machine string
		cpuinfo                      []byte
		want                         string
	}{
		{"arm64", "arm64", "", "aarch64", arm64, "arm64"},
		{"amd64", "amd64", "", "x86_64", nil, "amd64"},
		{"riscv", "riscv64", "", "riscv64", nil, "riscv64"},
		{"armv6 kernel", "arm", "6", "armv6l", v6, "armv6"},
		{"armv7 kernel", "arm", "7", "armv7l", v7, "armv7"},
		{"32-bit on 64-bit kernel", "arm", "6", "aarch64", arm64, "armv7"},
		{"linux32 personality", "arm", "6", "armv8l", v8compat, "armv7"},
		{"armv6 binary on armv7 cpu", "arm", "6", "armv7l", v7, "armv7"},
		{"no uname: model name v6l despite architecture 7", "arm", "7", "", v6, "armv6"},
		{"no uname: v7l", "arm", "6", "", v7, "armv7"},
		{"no uname: v8l", "arm", "6", "", v8compat, "armv7"},
		{"nothing but GOARM", "arm", "7", "", nil, "armv7"},
		{"GOARM with float suffix", "arm", "6,softfloat", "", nil, "armv6"},
		{"nothing at all", "arm", "", "", nil, "arm"},
		{"bad GOARM", "arm", "x", "", []byte("garbage"), "arm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ArchVariant(tt.goarch, tt.goarm, tt.machine, tt.cpuinfo); got != tt.want {
				t.Errorf("ArchVariant(%q, %q, %q) = %q, want %q", tt.goarch, tt.goarm, tt.machine, got, tt.want)
			}
		})
	}
}

func TestCgroupFacts(t *testing.T) {
	const v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0\n"
	tests := []struct {
		name                             string
		mounts, procCgroups, controllers string
		layout                           string
		want                             []string
	}{
		{"v2 all", v2, "", "cpuset cpu io memory hugetlb pids rdma misc\n", "v2", []string{"cpu", "cpuset", "io", "memory", "pids"}},
		{"v2 memory disabled", v2, "#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t0\t1\t0\n", "cpuset cpu io pids\n", "v2", []string{"cpu", "cpuset", "io", "pids"}},
		{"v2 empty controllers (delegation off)", v2, "", "", "v2", nil},
		{"v1 memory mounted but disabled in /proc/cgroups",
			"cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n",
			"#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\nmemory\t3\t1\t0\n", "", "v1", []string{"cpu"}},
		{"v1 without /proc/cgroups trusts the mounts",
			"cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/blkio cgroup rw,blkio 0 0\n", "", "", "v1", []string{"io", "memory"}},
		{"hybrid", "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n",
			"memory\t4\t54\t1\n", "", "hybrid", []string{"memory"}},
		{"unified only at /sys/fs/cgroup/unified, no v1", "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n", "", "", "none", nil},
		{"nothing mounted", "proc /proc proc rw 0 0\n", "", "", "none", nil},
		{"v2 mounted read-only", "cgroup2 /sys/fs/cgroup cgroup2 ro,nosuid,nodev,noexec,relatime 0 0\n", "", "cpu memory", "v2", nil},
		{"hybrid with read-only controllers (nspawn)", "cgroup /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\ncgroup /sys/fs/cgroup/memory cgroup ro,nosuid,memory 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n",
			"memory\t4\t54\t1\ncpu\t1\t1\t1\n", "", "hybrid", []string{"cpu"}},
		{"short lines ignored", "garbage\n\n" + v2, "", "memory", "v2", []string{"memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layout, got := CgroupFacts([]byte(tt.mounts), []byte(tt.procCgroups), []byte(tt.controllers))
			if layout != tt.layout {
				t.Errorf("layout = %q, want %q", layout, tt.layout)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("controllers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFactsFromClipsAndUnknowns(t *testing.T) {
	long := strings.Repeat("x", 200)
	f := FactsFrom(FactSources{GOARCH: "arm64", Machine: long, Release: long, Model: []byte(long + "\x00"),
		SystemctlVersion: []byte("systemd 252 (252." + long + ")")})
	if len(f.Kernel) != maxKernelLen || len(f.Model) != maxModelLen || len(f.KernelArch) != maxMachineLen || len(f.Systemd) > maxSystemdLen {
		t.Errorf("long facts not clipped: %+v", f)
	}
	if f.Cgroup != "" || f.CgroupControllers != nil {
		t.Errorf("no mount table: cgroup facts = %q %v, want unknown", f.Cgroup, f.CgroupControllers)
	}
	if got := clip("Raspberry Pi \u00e9", 14); got != "Raspberry Pi " {
		t.Errorf("clip split a rune: %q", got)
	}
}

func TestParseDevices(t *testing.T) {
	many := make([]string, 0, 100)
	for i := range 100 {
		many = append(many, fmt.Sprintf("ttyUSB%d", i))
	}
	for _, tt := range []struct {
		name string
		in   []string
		want []string
	}{
		{"no /dev", nil, nil},
		{"pseudo devices only", []string{"null", "zero", "tty", "ptmx"}, nil},
		{"sorted by class and number", []string{"video0", "ttyACM0", "i2c-10", "i2c-1", "gpiochip4"},
			[]string{"gpiochip4", "i2c-1", "i2c-10", "ttyACM0", "video0"}},
		{"bounded", many, many[:maxBoardDevices]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseDevices(tt.in)
			if tt.name == "bounded" {
				if len(got) != maxBoardDevices {
					t.Fatalf("%d devices, want %d", len(got), maxBoardDevices)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadDevNodes: only character devices count, not files, directories
// or symbolic links to devices.
func TestReadDevNodes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "i2c-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ttyUSB0"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(dir, "serial0")); err != nil {
		t.Fatal(err)
	}
	if got := ReadDevNodes(dir); len(got) != 0 {
		t.Errorf("ReadDevNodes(files) = %v, want none", got)
	}
	if got := ReadDevNodes(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("missing dir: %v", got)
	}
	got := ReadDevNodes("/dev")
	if !slices.Contains(got, "null") {
		t.Errorf("ReadDevNodes(/dev) = %v, want null among them", got)
	}
}

// TestMetaTrimsDevices: a board with more devices than fit in the gossip
// metadata beside its labels advertises the first ones and warns, naming
// the others; it never fails to build its metadata.
func TestMetaTrimsDevices(t *testing.T) {
	var devs []string
	for i := range maxBoardDevices {
		devs = append(devs, fmt.Sprintf("ttyUSB%d", i))
	}
	for _, tt := range []struct {
		name    string
		devices int
		labels  map[string]string
		trimmed bool
	}{
		{"room for all", 20, nil, false},
		{"labels first", maxBoardDevices, map[string]string{"room": strings.Repeat("r", 100), "shelf": strings.Repeat("s", 100)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			a := &Agent{cfg: Config{Labels: tt.labels}, log: slog.New(slog.NewTextHandler(&logs, nil)),
				facts: api.BoardFacts{Arch: "arm64", CPUs: 4, MemoryBytes: 1 << 30, Devices: devs[:tt.devices]}}
			m, err := a.meta(false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gossip.EncodeMeta(m); err != nil {
				t.Fatalf("meta does not encode: %v", err)
			}
			warned := strings.Contains(logs.String(), "no room in the gossip metadata")
			if got := len(m.Devices) < len(a.facts.Devices); got != tt.trimmed || warned != tt.trimmed {
				t.Errorf("advertised %d of %d devices, warned %v; want trimmed %v\n%s", len(m.Devices), len(a.facts.Devices), warned, tt.trimmed, logs.String())
			}
			if !slices.Equal(m.Devices, a.facts.Devices[:len(m.Devices)]) {
				t.Errorf("advertised %v, want a prefix of the board's devices", m.Devices)
			}
		})
	}
}
