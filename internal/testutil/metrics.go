package testutil

import (
	"fmt"
	"strconv"
	"strings"
)

// MetricValue returns the value of the first sample named name (as the
// line writes it: a histogram's name_count, name_sum or name_bucket) in
// text, Prometheus text exposition, whose labels include labelPairs
// (name, value, name, value...). ok is false when no sample matches; a
// malformed line is an error.
func MetricValue(text, name string, labelPairs ...string) (v float64, ok bool, err error) {
	if len(labelPairs)%2 != 0 {
		return 0, false, fmt.Errorf("label pairs %q: odd count", labelPairs)
	}
	for n, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sname, labels, value, err := parseSample(line)
		if err != nil {
			return 0, false, fmt.Errorf("line %d: %w: %q", n+1, err, line)
		}
		if sname != name {
			continue
		}
		match := true
		for i := 0; i < len(labelPairs); i += 2 {
			if got, ok := labels[labelPairs[i]]; !ok || got != labelPairs[i+1] {
				match = false
				break
			}
		}
		if match {
			return value, true, nil
		}
	}
	return 0, false, nil
}

// parseSample parses `name{l="v",...} value [timestamp]`.
func parseSample(line string) (name string, labels map[string]string, value float64, err error) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, 0, fmt.Errorf("no metric name")
	}
	name, rest := line[:i], line[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, `="`)
			if eq <= 0 {
				return "", nil, 0, fmt.Errorf("bad label")
			}
			lname := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '"' {
					rest, closed = rest[j+1:], true
					break
				}
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					case '\\', '"':
						val.WriteByte(rest[j])
					default:
						return "", nil, 0, fmt.Errorf("bad escape in label %s", lname)
					}
					continue
				}
				val.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, fmt.Errorf("unterminated value of label %s", lname)
			}
			labels[lname] = val.String()
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return "", nil, 0, fmt.Errorf("want a value and an optional timestamp")
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	return name, labels, value, err
}
