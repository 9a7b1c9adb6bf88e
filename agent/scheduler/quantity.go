package scheduler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
)

// This file holds private equivalents of api.ParseMemory and api.ParseCPU so
// the scheduler builds on its own; they accept the same valid inputs
// (systemd MemoryMax=/CPUQuota= syntax). Admission already rejected invalid
// quantities, so callers treat an error on an already placed pod as zero.

// parseMemory parses "512K", "64M", "1G", "2T", a plain byte count or a
// percentage of the board's memory ("50%"). Exactly one of bytes and percent
// is set on success.
func parseMemory(s string) (bytes int64, percent int, err error) {
	if s == "" {
		return 0, 0, fmt.Errorf("memory %q: empty", s)
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 || strings.ContainsAny(p, "+-") {
			return 0, 0, fmt.Errorf("memory %q: want a whole percentage from 1%% to 100%%", s)
		}
		return 0, n, nil
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	}
	digits := s
	if mult != 1 {
		digits = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || strings.ContainsAny(digits, "+-") || n > (1<<62)/mult {
		return 0, 0, fmt.Errorf("memory %q: want bytes with an optional K, M, G or T suffix, or a percentage", s)
	}
	return n * mult, 0, nil
}

// parseCPU parses a CPUQuota= percentage of one core ("50%", "200%").
func parseCPU(s string) (percent int, err error) {
	p, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("cpu %q: want a percentage of one core such as \"50%%\"", s)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || strings.ContainsAny(p, "+-") {
		return 0, fmt.Errorf("cpu %q: want a whole percentage of one core such as \"50%%\"", s)
	}
	return n, nil
}

// request is what a pod reserves: memory as bytes or as a percentage of the
// node's memory (resolved per node), and CPU in percent of one core.
type request struct {
	memBytes   int64
	memPercent int
	cpu        int
}

// memOn is the memory the request reserves on a node with capacity bytes.
func (r request) memOn(capacity int64) int64 {
	if r.memPercent > 0 {
		return capacity * int64(r.memPercent) / 100
	}
	return r.memBytes
}

// requestOf returns what a pod made from t reserves: MemoryRequest, else
// MemoryLimit when that is absolute; CPURequest, else CPULimit (the defaults admission applies,
// repeated here so a spec stored before defaulting still counts).
func requestOf(t *api.PodTemplate) (request, error) {
	var r request
	mem := t.Resources.MemoryRequest
	field := "memoryRequest"
	if mem == "" {
		mem, field = t.Resources.MemoryLimit, "memoryLimit"
	}
	if mem != "" {
		b, p, err := parseMemory(mem)
		if err != nil {
			return request{}, fmt.Errorf("spec.template.resources.%s: %w", field, err)
		}
		if p > 0 && field == "memoryLimit" {
			// A relative limit is no request (api.Resources: the request
			// defaults to the limit only when that is absolute).
			p = 0
		}
		r.memBytes, r.memPercent = b, p
	}
	cpu := t.Resources.CPURequest
	field = "cpuRequest"
	if cpu == "" {
		cpu, field = t.Resources.CPULimit, "cpuLimit"
	}
	if cpu != "" {
		c, err := parseCPU(cpu)
		if err != nil {
			return request{}, fmt.Errorf("spec.template.resources.%s: %w", field, err)
		}
		r.cpu = c
	}
	return r, nil
}
