package api

import (
	"slices"
	"strings"
)

// Cgroup layouts a board reports in NodeStatus.Cgroup.
const (
	CgroupV2     = "v2"
	CgroupHybrid = "hybrid"
	CgroupV1     = "v1"
	CgroupNone   = "none"
)

// NodeWarning is something a board cannot do.
type NodeWarning struct {
	// Short is a one-word tag for tables ("no-memory-limits").
	Short string
	// Message says what and how to fix it.
	Message string
}

// CgroupKnown reports whether the board's agent reported its cgroup facts.
// Agents that predate board facts report none.
func (s *NodeStatus) CgroupKnown() bool { return s.Cgroup != "" }

// EnforcesMemoryLimits reports whether a memory limit (systemd MemoryMax=)
// takes effect on the board: its systemd has the cgroup memory controller.
// Unknown (an older agent that sends no cgroup facts) counts as true, so
// that a mixed-version fleet keeps scheduling as it did.
func (s *NodeStatus) EnforcesMemoryLimits() bool {
	return !s.CgroupKnown() || slices.Contains(s.CgroupControllers, "memory")
}

// EnforcesCPULimits reports whether a CPU limit (systemd CPUQuota=) takes
// effect: the cgroup cpu controller is available. Unknown counts as true.
func (s *NodeStatus) EnforcesCPULimits() bool {
	return !s.CgroupKnown() || slices.Contains(s.CgroupControllers, "cpu")
}

// UnenforcedLimit returns why the board cannot enforce a limit r sets, as
// the scheduler's reason for passing it over ("cannot enforce
// memory_limit: cgroup memory controller disabled"), or "" when it can
// enforce every limit r sets, or when r.AllowUnenforcedLimits.
func (s *NodeStatus) UnenforcedLimit(r Resources) string {
	if r.AllowUnenforcedLimits {
		return ""
	}
	if r.MemoryLimit != "" && !s.EnforcesMemoryLimits() {
		return "cannot enforce memory_limit: " + s.missing("memory")
	}
	if r.CPULimit != "" && !s.EnforcesCPULimits() {
		return "cannot enforce cpu_limit: " + s.missing("cpu")
	}
	return ""
}

// missing says why controller c is unavailable. On a Raspberry Pi that is
// the kernel command line; elsewhere it may also be a container whose
// cgroup hierarchy is read-only, which the facts do not tell apart.
func (s *NodeStatus) missing(c string) string {
	if s.Cgroup == CgroupNone {
		return "no cgroup file system mounted"
	}
	if s.IsRaspberryPi() {
		return "cgroup " + c + " controller disabled"
	}
	return "cgroup " + c + " controller unavailable"
}

// IsRaspberryPi reports whether the board's model is a Raspberry Pi.
func (s *NodeStatus) IsRaspberryPi() bool { return strings.HasPrefix(s.Model, "Raspberry Pi") }

// Warnings lists what the board cannot do, from its reported facts, in a
// fixed order: limits that would not be enforced, then facts that are
// unknown. Nil when there is nothing to say.
func (s *NodeStatus) Warnings() []NodeWarning {
	if !s.CgroupKnown() {
		v := s.Version
		if v == "" {
			v = "unknown"
		}
		return []NodeWarning{{Short: "facts-unknown",
			Message: "the agent (version " + v + ") reports no cgroup facts: limits are assumed enforced; upgrade herd on this board"}}
	}
	var out []NodeWarning
	if !s.EnforcesMemoryLimits() {
		fix := "enable it on the kernel command line (cgroup_enable=memory, no cgroup_disable=memory), or in a container give it a writable cgroup hierarchy"
		if s.IsRaspberryPi() {
			fix = "add cgroup_enable=memory to /boot/firmware/cmdline.txt (/boot/cmdline.txt before bookworm) and reboot"
		}
		if s.Cgroup == CgroupNone {
			fix = "mount the cgroup file system (systemd does this at boot)"
		}
		out = append(out, NodeWarning{Short: "no-memory-limits",
			Message: "memory limits not enforced: " + s.missing("memory") + "; " + fix})
	}
	if !s.EnforcesCPULimits() {
		out = append(out, NodeWarning{Short: "no-cpu-limits",
			Message: "CPU limits not enforced: " + s.missing("cpu")})
	}
	return out
}
