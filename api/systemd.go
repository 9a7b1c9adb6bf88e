package api

import (
	"bytes"
	"strconv"
	"strings"
)

// ParseSystemdVersion returns systemd's version from `systemctl --version`
// output, whose first line is "systemd 252 (252.30-1~deb12u2)": the
// upstream point release from the parentheses ("252.30") when it extends
// the major version, else the major version ("252"); "" when the output is
// not systemd's.
func ParseSystemdVersion(out []byte) string {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 || f[0] != "systemd" {
		return ""
	}
	major := f[1]
	if _, err := strconv.Atoi(major); err != nil {
		return ""
	}
	if len(f) >= 3 && strings.HasPrefix(f[2], "("+major+".") {
		v := strings.TrimPrefix(f[2], "(")
		end := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if end >= 0 {
			v = v[:end]
		}
		if v = strings.TrimRight(v, "."); len(v) > len(major) {
			return v
		}
	}
	return major
}

// SystemdMajor is the major version of a version ParseSystemdVersion
// returned ("252.30" → 252), and false when v is not one.
func SystemdMajor(v string) (int, bool) {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil
}
