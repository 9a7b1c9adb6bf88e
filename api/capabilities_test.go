package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeLimitsEnforced(t *testing.T) {
	mem := Resources{MemoryLimit: "64M"}
	cpu := Resources{CPULimit: "50%"}
	both := Resources{MemoryLimit: "64M", CPULimit: "50%"}
	allowed := Resources{MemoryLimit: "64M", AllowUnenforcedLimits: true}
	piOff := NodeStatus{BoardFacts: BoardFacts{Model: "Raspberry Pi 4 Model B Rev 1.4", Cgroup: CgroupV2, CgroupControllers: []string{"cpu", "cpuset", "io", "pids"}}}
	piOn := NodeStatus{BoardFacts: BoardFacts{Model: "Raspberry Pi 5 Model B Rev 1.0", Cgroup: CgroupV2, CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"}}}
	noCPU := NodeStatus{BoardFacts: BoardFacts{Cgroup: CgroupV1, CgroupControllers: []string{"memory"}}}
	none := NodeStatus{BoardFacts: BoardFacts{Cgroup: CgroupNone}}
	old := NodeStatus{Version: "v0.3.0"} // an agent before board facts
	tests := []struct {
		name     string
		st       NodeStatus
		r        Resources
		want     string
		warnings []string
	}{
		{"no limits anywhere", piOff, Resources{}, "", []string{"no-memory-limits"}},
		{"memory limit, controller off", piOff, mem, "cannot enforce memory_limit: cgroup memory controller disabled", []string{"no-memory-limits"}},
		{"cpu limit, controller off for memory only", piOff, cpu, "", []string{"no-memory-limits"}},
		{"allowed", piOff, allowed, "", []string{"no-memory-limits"}},
		{"memory on", piOn, both, "", nil},
		{"no cpu controller", noCPU, both, "cannot enforce cpu_limit: cgroup cpu controller unavailable", []string{"no-cpu-limits"}},
		{"no cgroup fs", none, mem, "cannot enforce memory_limit: no cgroup file system mounted", []string{"no-memory-limits", "no-cpu-limits"}},
		{"old agent: unknown counts as enforced", old, both, "", []string{"facts-unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.st.UnenforcedLimit(tt.r); got != tt.want {
				t.Errorf("UnenforcedLimit = %q, want %q", got, tt.want)
			}
			var shorts []string
			for _, w := range tt.st.Warnings() {
				shorts = append(shorts, w.Short)
			}
			if diff := cmp.Diff(tt.warnings, shorts); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeWarningMessages(t *testing.T) {
	pi := NodeStatus{BoardFacts: BoardFacts{Model: "Raspberry Pi 4 Model B Rev 1.4", Cgroup: CgroupV2, CgroupControllers: []string{"cpu"}}}
	w := pi.Warnings()
	if len(w) != 1 || w[0].Message != "memory limits not enforced: cgroup memory controller disabled; add cgroup_enable=memory to /boot/firmware/cmdline.txt (/boot/cmdline.txt before bookworm) and reboot" {
		t.Errorf("Pi warning: %+v", w)
	}
	other := NodeStatus{BoardFacts: BoardFacts{Model: "QEMU KVM Virtual Machine", Cgroup: CgroupV2, CgroupControllers: []string{"cpu"}}}
	if w := other.Warnings(); len(w) != 1 || strings.Contains(w[0].Message, "/boot/firmware") || !strings.Contains(w[0].Message, "cgroup_enable=memory") {
		t.Errorf("non-Pi warning: %+v", w)
	}
	old := NodeStatus{Version: "v0.3.0"}
	if w := old.Warnings(); len(w) != 1 || !strings.Contains(w[0].Message, "v0.3.0") || !strings.Contains(w[0].Message, "assumed enforced") {
		t.Errorf("old agent warning: %+v", w)
	}
}
