package cli

import (
	"slices"
	"testing"

	"github.com/herd-dev/herd/api"
)

// TestNodeArchAndCgroup: describe node spells out what a 32-bit board runs
// on, and the wide table tells armv6 from armv7.
func TestNodeArchAndCgroup(t *testing.T) {
	for _, tt := range []struct {
		st        api.NodeStatus
		arch, cg  string
		wideCells []string
	}{
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm", ArchVariant: "armv6", KernelArch: "armv6l", Cgroup: "v2", CgroupControllers: []string{"cpu", "io"}}},
			"arm (armv6, armv6l kernel)", "v2 (cpu io)", []string{"armv6", "v2", "no-memory-limits"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm", ArchVariant: "armv7", KernelArch: "aarch64", Cgroup: "hybrid", CgroupControllers: []string{"cpu", "memory"}}},
			"arm (armv7, aarch64 kernel)", "hybrid (cpu memory)", []string{"armv7", "hybrid", "<none>"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Cgroup: "none"}},
			"arm64", "none (no controllers)", []string{"arm64", "none", "no-memory-limits,no-cpu-limits"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "amd64"}}, "amd64", "", []string{"<none>", "facts-unknown"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm64", Devices: []string{"gpiochip0", "i2c-1", "ttyUSB0"}}},
			"arm64", "", []string{"gpiochip0,i2c-1,ttyUSB0"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm64", Devices: []string{"gpiochip0", "i2c-1", "ttyUSB0", "video0"}}},
			"arm64", "", []string{"gpiochip0,i2c-1,ttyUSB0,video0"}},
		{api.NodeStatus{BoardFacts: api.BoardFacts{Arch: "arm64", Devices: []string{"gpiochip0", "gpiochip1", "i2c-1", "ttyUSB0", "video0"}}},
			"arm64", "", []string{"gpiochip0,gpiochip1,i2c-1,+2"}},
	} {
		if got := nodeArch(tt.st); got != tt.arch {
			t.Errorf("nodeArch(%+v) = %q, want %q", tt.st, got, tt.arch)
		}
		if got := nodeCgroup(tt.st); got != tt.cg {
			t.Errorf("nodeCgroup(%+v) = %q, want %q", tt.st, got, tt.cg)
		}
		row := printer{Wide: true}.row(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b"}, Status: tt.st})
		for _, c := range tt.wideCells {
			if !slices.Contains(row, c) {
				t.Errorf("wide row %q lacks %q", row, c)
			}
		}
	}
}
