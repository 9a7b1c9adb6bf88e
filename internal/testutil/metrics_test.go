package testutil

import (
	"math"
	"testing"
)

func TestMetricValue(t *testing.T) {
	text := `# HELP a_total A.
# TYPE a_total counter
a_total{node="b1",result="kept"} 3
a_total{node="b\"2\\\n",result="stale"} +Inf
b 1.5e-3
`
	for _, c := range []struct {
		name   string
		pairs  []string
		want   float64
		wantOK bool
	}{
		{"a_total", []string{"result", "kept"}, 3, true},
		{"a_total", []string{"node", "b\"2\\\n"}, math.Inf(1), true},
		{"a_total", nil, 3, true},
		{"a_total", []string{"result", "refused"}, 0, false},
		{"b", nil, 0.0015, true},
		{"a", nil, 0, false},
	} {
		v, ok, err := MetricValue(text, c.name, c.pairs...)
		if err != nil || ok != c.wantOK || v != c.want {
			t.Errorf("MetricValue(%s, %q) = %v, %v, %v; want %v, %v", c.name, c.pairs, v, ok, err, c.want, c.wantOK)
		}
	}
	for _, bad := range []string{"x{a=\"1} 2", "x{a=1} 2", "x 1 2 3", "{a=\"b\"} 1", "x{a=\"\\q\"} 1"} {
		if _, _, err := MetricValue(bad, "x"); err == nil {
			t.Errorf("MetricValue(%q): no error", bad)
		}
	}
}
