package agent

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/herd-dev/herd/api"
)

// systemctlTimeout bounds `systemctl --version` at agent start.
const systemctlTimeout = 3 * time.Second

// maxDevEntries bounds how many entries of /dev ReadDevNodes reads (a Pi
// has about 300).
const maxDevEntries = 4096

// ReadFacts reads this machine's board facts from /proc, /sys, uname(2),
// `systemctl --version` (run as argv, bounded by systemctlTimeout) and the
// character devices in /dev. A source that cannot be read leaves its facts
// empty. They are read once, at agent start: a device plugged in later is
// advertised after the agent restarts.
func ReadFacts() api.BoardFacts {
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
	src.DevNodes = ReadDevNodes("/dev")
	ctx, cancel := context.WithTimeout(context.Background(), systemctlTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "systemctl", "--version").Output(); err == nil {
		src.SystemctlVersion = out
	}
	return FactsFrom(src)
}

// ReadDevNodes returns the names of the character devices directly in dir
// (/dev), at most maxDevEntries entries read; nil if dir cannot be read.
// Symbolic links (/dev/serial0) and subdirectories are not followed.
func ReadDevNodes(dir string) []string {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(maxDevEntries)
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeCharDevice != 0 {
			out = append(out, e.Name())
		}
	}
	return out
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
