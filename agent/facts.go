package agent

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
)

// Facts are what a board tells the cluster about itself through gossip.
// FactsFrom derives them from file contents; ReadFacts reads those files.
// Empty fields are unknown (and are left out of gossip).
type Facts struct {
	// Arch is the agent binary's GOARCH (amd64, arm64, arm).
	Arch string
	// ArchVariant is arm64, armv7, armv6 (see ArchVariant) or GOARCH.
	ArchVariant string
	// KernelArch is uname's machine: aarch64 with a 64-bit kernel even
	// under a 32-bit userland.
	KernelArch string
	// Kernel is uname's release ("6.6.51+rpt-rpi-v8").
	Kernel string
	// Systemd is the installed systemd's version ("252.30").
	Systemd string
	// Cgroup is the cgroup layout: api.CgroupV2, CgroupHybrid, CgroupV1 or
	// CgroupNone.
	Cgroup string
	// Controllers are the available resource controllers (see
	// CgroupFacts); api.NodeStatus.LimitsEnforced decides from them.
	Controllers []string
	Model       string
	MemoryBytes int64
	CPUs        int
}

// systemctlTimeout bounds `systemctl --version` at agent start.
const systemctlTimeout = 3 * time.Second

// ReadFacts reads this machine's facts from /proc, /sys, uname(2) and
// `systemctl --version` (run as argv, bounded by systemctlTimeout). A
// source that cannot be read leaves its facts empty.
func ReadFacts() Facts {
	src := FactSources{GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOARM" {
				src.GOARM = s.Value
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		src.Machine, src.Release = utsString(u.Machine[:]), utsString(u.Release[:])
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		return b
	}
	src.CPUInfo = read("/proc/cpuinfo")
	src.MemInfo = read("/proc/meminfo")
	for _, p := range []string{"/proc/device-tree/model", "/sys/firmware/devicetree/base/model", "/sys/class/dmi/id/product_name"} {
		if b := read(p); ParseModel(b) != "" {
			src.Model = b
			break
		}
	}
	src.Mounts = read("/proc/self/mounts")
	src.ProcCgroups = read("/proc/cgroups")
	src.CgroupControllers = read("/sys/fs/cgroup/cgroup.controllers")
	ctx, cancel := context.WithTimeout(context.Background(), systemctlTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "systemctl", "--version").Output(); err == nil {
		src.SystemctlVersion = out
	}
	return FactsFrom(src)
}

// utsString converts a NUL-terminated utsname field ([65]int8 or [65]uint8
// depending on the architecture) to a string.
func utsString[T int8 | uint8](a []T) string {
	b := make([]byte, 0, len(a))
	for _, c := range a {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
