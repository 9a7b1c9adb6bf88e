package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidQuantity is wrapped by every error ParseMemory and ParseCPU
// return.
var ErrInvalidQuantity = errors.New("api: invalid quantity")

// Limits on quantities. MaxCPUPercent allows a limit of 256 full cores.
const (
	MaxCPUPercent = 256 * 100
)

// memoryMultiplier returns the value of a suffix in systemd's MemoryMax=
// syntax (base 1024), or 0 for anything else.
func memoryMultiplier(c byte) int64 {
	switch c {
	case 'K':
		return 1 << 10
	case 'M':
		return 1 << 20
	case 'G':
		return 1 << 30
	case 'T':
		return 1 << 40
	}
	return 0
}

// ParseMemory parses a memory quantity in the subset of systemd's MemoryMax=
// syntax that herd accepts: a whole number of bytes with an optional
// upper-case K, M, G or T suffix (base 1024: "512K", "64M", "1G"), or a whole
// percentage of the board's memory from 1% to 100% ("50%"). Exactly one of
// bytes and percent is non-zero on success.
//
// Rejected on purpose: lower-case suffixes ("64m" could mean milli), fractions
// ("1.5G"; write "1536M"), "infinity" (leave the limit out instead), zero,
// signs and blanks. Every error wraps ErrInvalidQuantity.
func ParseMemory(s string) (bytes int64, percent int, err error) {
	fail := func(format string, args ...any) (int64, int, error) {
		return 0, 0, fmt.Errorf("%w: memory %q: %s", ErrInvalidQuantity, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("empty")
	}
	if strings.HasSuffix(s, "%") {
		n, ok := parseDigits(s[:len(s)-1])
		if !ok {
			return fail("a percentage must be a whole number such as \"50%%\"")
		}
		if n < 1 || n > 100 {
			return fail("a percentage of the board's memory must be between 1%% and 100%%")
		}
		return 0, int(n), nil
	}
	if strings.EqualFold(s, "infinity") {
		return fail("leave the limit out for no limit")
	}
	digits, mult := s, int64(1)
	last := s[len(s)-1]
	switch {
	case memoryMultiplier(last) != 0:
		digits, mult = s[:len(s)-1], memoryMultiplier(last)
	case last >= 'a' && last <= 'z' && memoryMultiplier(last-'a'+'A') != 0:
		return fail("suffixes are upper-case K, M, G or T (base 1024); did you mean %q?", s[:len(s)-1]+string(last-'a'+'A'))
	case last == 'B' || last == 'b' || last == 'i':
		return fail("write bytes without a unit, or use the suffixes K, M, G or T alone (\"64M\", not \"64MB\" or \"64Mi\")")
	case last < '0' || last > '9':
		return fail("the suffix must be K, M, G or T (base 1024), or %% of the board's memory")
	}
	if strings.Contains(digits, ".") {
		return fail("must be a whole number; use a smaller unit (\"1536M\", not \"1.5G\")")
	}
	n, ok := parseDigits(digits)
	if !ok {
		return fail("must be a whole number of bytes with an optional K, M, G or T suffix, such as \"64M\"")
	}
	if n == 0 {
		return fail("must be greater than zero")
	}
	if n > (1<<62)/mult {
		return fail("too large")
	}
	return n * mult, 0, nil
}

// ParseCPU parses a CPU quantity in systemd's CPUQuota= syntax: a whole
// percentage of one core, "50%" being half a core and "150%" one and a half
// cores, from 1% to MaxCPUPercent. Every error wraps ErrInvalidQuantity.
func ParseCPU(s string) (percent int, err error) {
	fail := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("%w: cpu %q: %s", ErrInvalidQuantity, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("empty")
	}
	if !strings.HasSuffix(s, "%") {
		return fail("write a percentage of one core, such as \"50%%\" (half a core) or \"200%%\" (two cores)")
	}
	n, ok := parseDigits(s[:len(s)-1])
	if !ok {
		return fail("must be a whole percentage such as \"50%%\"")
	}
	if n < 1 || n > MaxCPUPercent {
		return fail("must be between 1%% and %d%%", MaxCPUPercent)
	}
	return int(n), nil
}

// parseDigits parses a non-empty run of ASCII digits, refusing signs,
// blanks, underscores and values that do not fit in 62 bits.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		// 18 digits always fit; longer strings with leading zeros are
		// refused too, which is fine for quantities.
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// canonicalMemory returns the canonical spelling of a valid memory quantity:
// the value as written, without leading zeros ("064M" becomes "64M"). Units
// are kept as written so that "1024K" in a manifest stays "1024K" in the
// store and a diff never shows a change the user did not make. Invalid input
// is returned unchanged for Validate to report.
func canonicalMemory(s string) string {
	if _, _, err := ParseMemory(s); err != nil {
		return s
	}
	return stripLeadingZeros(s)
}

// canonicalCPU is canonicalMemory for CPU quantities.
func canonicalCPU(s string) string {
	if _, err := ParseCPU(s); err != nil {
		return s
	}
	return stripLeadingZeros(s)
}

// stripLeadingZeros drops leading zeros of the number at the start of s,
// keeping at least one digit.
func stripLeadingZeros(s string) string {
	i := 0
	for i < len(s)-1 && s[i] == '0' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
	}
	return s[i:]
}

// Request is what a pod reserves on a board: memory as bytes or as a
// percentage of the board's memory (at most one of the two is set), and CPU
// in percent of one core.
type Request struct {
	MemoryBytes   int64
	MemoryPercent int
	CPUPercent    int
}

// MemoryOn returns the bytes r reserves on a board with capacity bytes of
// memory.
func (r Request) MemoryOn(capacity int64) int64 {
	if r.MemoryPercent > 0 {
		return capacity * int64(r.MemoryPercent) / 100
	}
	return r.MemoryBytes
}

// Request returns what a pod with these resources reserves, the rule
// Defaults applies at admission and the scheduler counts by: memory is
// MemoryRequest, or else MemoryLimit when that is absolute (a percentage
// limit reserves nothing); CPU is CPURequest, or else CPULimit. It is
// computed from the spec as stored, so a spec stored before defaulting
// counts the same. An invalid quantity is an error naming its field.
func (r Resources) Request() (Request, error) {
	var out Request
	mem, field := r.MemoryRequest, "memoryRequest"
	if mem == "" {
		mem, field = r.MemoryLimit, "memoryLimit"
	}
	if mem != "" {
		b, pct, err := ParseMemory(mem)
		if err != nil {
			return Request{}, fmt.Errorf("resources.%s: %w", field, err)
		}
		if field == "memoryLimit" {
			pct = 0
		}
		out.MemoryBytes, out.MemoryPercent = b, pct
	}
	cpu, field := r.CPURequest, "cpuRequest"
	if cpu == "" {
		cpu, field = r.CPULimit, "cpuLimit"
	}
	if cpu != "" {
		c, err := ParseCPU(cpu)
		if err != nil {
			return Request{}, fmt.Errorf("resources.%s: %w", field, err)
		}
		out.CPUPercent = c
	}
	return out, nil
}
