package promtext

import (
	"fmt"
	"slices"
)

// Type is a metric family's type as # TYPE writes it.
type Type string

// The types herd writes.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Desc describes a metric family: its name, help text, type and fixed
// label names. A Desc is immutable; NewDesc checks it.
type Desc struct {
	name   string
	help   string
	typ    Type
	labels []string
	// order lists indexes into labels sorted by label name: series write
	// their labels in this order.
	order []int
}

// NewDesc returns the Desc of a family. It panics when the name or a
// label name is not a valid Prometheus name, a label name repeats or is
// reserved (le on histograms, names starting with __), or typ is unknown:
// a Desc is a constant of the program, so these are programming errors.
func NewDesc(name, help string, typ Type, labels ...string) *Desc {
	if !validName(name, true) {
		panic(fmt.Sprintf("promtext: invalid metric name %q", name))
	}
	switch typ {
	case Counter, Gauge, Histogram:
	default:
		panic(fmt.Sprintf("promtext: %s: unknown type %q", name, typ))
	}
	d := &Desc{name: name, help: help, typ: typ, labels: slices.Clone(labels)}
	for i, l := range labels {
		if !validName(l, false) || len(l) >= 2 && l[:2] == "__" {
			panic(fmt.Sprintf("promtext: %s: invalid label name %q", name, l))
		}
		if typ == Histogram && l == "le" {
			panic(fmt.Sprintf("promtext: %s: label le is reserved on histograms", name))
		}
		if slices.Contains(labels[:i], l) {
			panic(fmt.Sprintf("promtext: %s: label %q twice", name, l))
		}
		d.order = append(d.order, i)
	}
	slices.SortFunc(d.order, func(a, b int) int {
		if labels[a] < labels[b] {
			return -1
		}
		return 1
	})
	return d
}

// Name is the family's name.
func (d *Desc) Name() string { return d.name }

// validName reports whether s is a metric name (colons allowed) or a
// label name.
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':' && metric:
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
