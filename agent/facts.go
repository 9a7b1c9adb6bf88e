package agent

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Facts are what a board tells the cluster about itself through gossip.
type Facts struct {
	Arch        string
	Model       string
	MemoryBytes int64
	CPUs        int
}

// ReadFacts reads this machine's facts from /proc and /sys.
func ReadFacts() Facts {
	f := Facts{Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f.MemoryBytes = ParseMemTotal(b)
	}
	for _, p := range []string{"/proc/device-tree/model", "/sys/firmware/devicetree/base/model", "/sys/class/dmi/id/product_name"} {
		if b, err := os.ReadFile(p); err == nil {
			if m := strings.TrimSpace(string(bytes.TrimRight(b, "\x00"))); m != "" {
				f.Model = m
				break
			}
		}
	}
	return f
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
