package promtext

import (
	"math"
	"strconv"
	"strings"
)

// appendFloat appends f as Prometheus writes it: +Inf, -Inf, NaN, else the
// shortest representation that reads back as f.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendHeader appends the # HELP and # TYPE lines of d.
func appendHeader(b []byte, d *Desc) []byte {
	b = append(b, "# HELP "...)
	b = append(b, d.name...)
	b = append(b, ' ')
	b = append(b, helpEscaper.Replace(d.help)...)
	b = append(b, "\n# TYPE "...)
	b = append(b, d.name...)
	b = append(b, ' ')
	b = append(b, d.typ...)
	return append(b, '\n')
}

// appendSample appends one sample line: name and suffix, the labels of d
// with values (in label name order) plus an optional extra label (le),
// and v.
func appendSample(b []byte, d *Desc, suffix string, values []string, extraName, extraValue string, v float64) []byte {
	b = append(b, d.name...)
	b = append(b, suffix...)
	if len(values) > 0 || extraName != "" {
		b = append(b, '{')
		for n, i := range d.order {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, d.labels[i]...)
			b = append(b, `="`...)
			b = append(b, valueEscaper.Replace(values[i])...)
			b = append(b, '"')
		}
		if extraName != "" {
			if len(values) > 0 {
				b = append(b, ',')
			}
			b = append(b, extraName...)
			b = append(b, `="`...)
			b = append(b, extraValue...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// compareValues orders two series of d by their label values taken in
// label name order.
func compareValues(d *Desc, a, b []string) int {
	for _, i := range d.order {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}
