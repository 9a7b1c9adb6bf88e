package agent

import (
	"bufio"
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
)

// FactSources are the raw inputs board facts are derived from: file
// contents and kernel/runtime values, as read by ReadFacts. A nil file means
// it could not be read. FactsFrom turns them into api.BoardFacts with no I/O.
type FactSources struct {
	// GOARCH and GOARM are the agent binary's (runtime.GOARCH, and the
	// GOARM build setting for GOARCH arm).
	GOARCH, GOARM string
	// NumCPU is runtime.NumCPU().
	NumCPU int
	// Machine and Release are uname(2)'s machine ("aarch64", "armv7l") and
	// release ("6.6.51+rpt-rpi-v8") fields.
	Machine, Release string
	// CPUInfo is /proc/cpuinfo.
	CPUInfo []byte
	// Model is /proc/device-tree/model (NUL-terminated), or on machines
	// without a device tree /sys/class/dmi/id/product_name.
	Model []byte
	// MemInfo is /proc/meminfo.
	MemInfo []byte
	// Mounts is /proc/self/mounts.
	Mounts []byte
	// ProcCgroups is /proc/cgroups.
	ProcCgroups []byte
	// CgroupControllers is /sys/fs/cgroup/cgroup.controllers (cgroup v2).
	CgroupControllers []byte
	// SystemctlVersion is the output of `systemctl --version`.
	SystemctlVersion []byte
	// DevNodes are the names of the character devices directly in /dev
	// ("gpiochip0", "null", "ttyUSB0"), in any order; at most
	// maxDevEntries are read.
	DevNodes []string
}

// resourceControllers are the cgroup controllers systemd's resource control
// (MemoryMax=, CPUQuota=, IOWeight=, TasksMax=, AllowedCPUs=) relies on, in
// the order BoardFacts.CgroupControllers lists them. Only these travel in gossip: the
// others (freezer, perf_event, ...) say nothing about what herd can enforce
// and would cost metadata bytes. blkio is v1's name for io.
var resourceControllers = []string{"cpu", "cpuset", "io", "memory", "pids"}

// Length caps for the free-text facts, so that a strange machine cannot
// push the gossip metadata over its limit.
const (
	maxModelLen   = 48
	maxKernelLen  = 40
	maxSystemdLen = 16
	maxMachineLen = 16
	// maxBoardDevices bounds BoardFacts.Devices; gossip may advertise
	// fewer (gossip.TrimDevices).
	maxBoardDevices = 64
)

// FactsFrom derives a board's facts from src. It is pure.
func FactsFrom(src FactSources) api.BoardFacts {
	f := api.BoardFacts{
		Arch:        src.GOARCH,
		ArchVariant: ArchVariant(src.GOARCH, src.GOARM, src.Machine, src.CPUInfo),
		KernelArch:  clip(src.Machine, maxMachineLen),
		Kernel:      clip(src.Release, maxKernelLen),
		Systemd:     clip(api.ParseSystemdVersion(src.SystemctlVersion), maxSystemdLen),
		Model:       clip(ParseModel(src.Model), maxModelLen),
		MemoryBytes: ParseMemTotal(src.MemInfo),
		CPUs:        src.NumCPU,
	}
	if src.Mounts != nil {
		f.Cgroup, f.CgroupControllers = CgroupFacts(src.Mounts, src.ProcCgroups, src.CgroupControllers)
	}
	f.Devices = ParseDevices(src.DevNodes)
	return f
}

// ParseDevices returns the device nodes of the api.DeviceClasses among
// names (character devices in /dev), sorted by api.SortDevices, at most
// maxBoardDevices of them (the first ones), or nil.
func ParseDevices(names []string) []string {
	d := api.SortDevices(names)
	if len(d) > maxBoardDevices {
		d = d[:maxBoardDevices]
	}
	return d
}

// ArchVariant names the instruction set a board runs herd's binaries with:
// "arm64", "armv7" or "armv6" for ARM boards, GOARCH for anything else.
//
// For GOARCH arm the 32-bit userland runs on:
//   - a 32-bit kernel, whose uname machine says the CPU: "armv6l" (Pi Zero,
//     Zero W, Pi 1: ARM1176) is armv6, "armv7l" (Pi 2, Pi 3 or Zero 2 W on
//     a 32-bit OS) is armv7;
//   - a 64-bit kernel (Pi OS 32-bit boots one on a Pi 4 and Pi 5): machine
//     "aarch64", or "armv8l" under the linux32 personality. An ARMv8 CPU in
//     AArch32 state runs ARMv7 code, so this is armv7.
//
// When the machine says nothing useful, /proc/cpuinfo's "model name" ends
// in "(v6l)", "(v7l)" or "(v8l)" (a 32-bit kernel, or a 64-bit one under
// linux32). Its "CPU architecture" field is not used: the Pi Zero's ARM1176
// reports 7 there although it is an ARMv6 core. Last comes the binary's
// GOARM, which is only a lower bound (the binary runs, so the CPU has at
// least that), and then plain "arm".
func ArchVariant(goarch, goarm, machine string, cpuinfo []byte) string {
	if goarch != "arm" {
		return goarch
	}
	switch {
	case strings.HasPrefix(machine, "armv6"):
		return "armv6"
	case strings.HasPrefix(machine, "armv7"), strings.HasPrefix(machine, "armv8"), machine == "aarch64", machine == "arm64":
		return "armv7"
	case strings.HasPrefix(machine, "armv5"):
		return "armv5"
	}
	if name := cpuinfoField(cpuinfo, "model name"); name != "" {
		switch {
		case strings.HasSuffix(name, "(v6l)"):
			return "armv6"
		case strings.HasSuffix(name, "(v7l)"), strings.HasSuffix(name, "(v8l)"):
			return "armv7"
		}
	}
	if goarm != "" {
		// GOARM may carry a float suffix ("7,softfloat").
		v, _, _ := strings.Cut(goarm, ",")
		if n, err := strconv.Atoi(v); err == nil && n >= 5 && n <= 7 {
			return "armv" + v
		}
	}
	return "arm"
}

// cpuinfoField returns the value of the first "key : value" line of
// /proc/cpuinfo content with the given key, or "".
func cpuinfoField(cpuinfo []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ParseModel returns the board model from /proc/device-tree/model (or DMI
// product_name) content: trailing NULs and surrounding space dropped, ""
// for an empty file.
func ParseModel(b []byte) string {
	return strings.TrimSpace(string(bytes.TrimRight(b, "\x00")))
}

// ParseMemTotal returns MemTotal from /proc/meminfo content, in bytes, or 0.
func ParseMemTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// CgroupFacts returns the cgroup layout (api.CgroupV2, api.CgroupHybrid,
// api.CgroupV1 or api.CgroupNone: v2 is the unified hierarchy on
// /sys/fs/cgroup, hybrid is v1 controller hierarchies with an empty unified
// one on /sys/fs/cgroup/unified, systemd's mode on Debian buster) and the available resource controllers (a subset of
// cpu, cpuset, io, memory, pids, in that order) from /proc/self/mounts,
// /proc/cgroups and /sys/fs/cgroup/cgroup.controllers content.
//
//   - v2: the controllers are those listed in cgroup.controllers at the
//     root of the hierarchy (what this system, or this container's
//     delegated subtree, can use). A controller the kernel disabled
//     (cgroup_disable=memory) is not listed there.
//   - v1 and hybrid: a controller counts when a v1 hierarchy is mounted
//     read-write with it and, if /proc/cgroups is readable, its "enabled"
//     column is 1. blkio is reported as io.
//
// A hierarchy mounted read-only counts for nothing: systemd cannot create a
// unit's cgroup there, so MemoryMax= and CPUQuota= do nothing. That is
// what a systemd-nspawn container on a v1 or hybrid host (herd's lab
// boards) sees.
func CgroupFacts(mounts, procCgroups, controllers []byte) (layout string, available []string) {
	var v1 map[string]bool
	v2root, v2rw, unified := false, false, false
	sc := bufio.NewScanner(bytes.NewReader(mounts))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		point, fstype, opts := f[1], f[2], f[3]
		// A read-only hierarchy is one systemd cannot create the unit's
		// cgroup in, so its limits do nothing: systemd-nspawn on a
		// hybrid or v1 host mounts the controllers so.
		rw := slices.Contains(strings.Split(opts, ","), "rw")
		switch fstype {
		case "cgroup2":
			switch point {
			case "/sys/fs/cgroup":
				v2root, v2rw = true, rw
			case "/sys/fs/cgroup/unified":
				unified = true
			}
		case "cgroup":
			if v1 == nil {
				v1 = make(map[string]bool)
			}
			for _, o := range strings.Split(opts, ",") {
				if o == "blkio" {
					o = "io"
				}
				v1[o] = v1[o] || rw
			}
		}
	}
	switch {
	case v2root:
		if !v2rw {
			return api.CgroupV2, nil
		}
		have := strings.Fields(string(controllers))
		for _, c := range resourceControllers {
			if slices.Contains(have, c) {
				available = append(available, c)
			}
		}
		return api.CgroupV2, available
	case v1 != nil:
		enabled := parseProcCgroups(procCgroups)
		for _, c := range resourceControllers {
			if v1[c] && (enabled == nil || enabled[c]) {
				available = append(available, c)
			}
		}
		if unified {
			return api.CgroupHybrid, available
		}
		return api.CgroupV1, available
	}
	return api.CgroupNone, nil
}

// parseProcCgroups returns the "enabled" column of /proc/cgroups by
// controller (blkio as io), or nil when there is no such table.
func parseProcCgroups(b []byte) map[string]bool {
	var out map[string]bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		if out == nil {
			out = make(map[string]bool)
		}
		name := f[0]
		if name == "blkio" {
			name = "io"
		}
		out[name] = f[3] == "1"
	}
	return out
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
