package cli

import (
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

func TestTablesGolden(t *testing.T) {
	fx := fixtures()
	for _, k := range api.Kinds {
		for _, wide := range []bool{false, true} {
			name := "get_" + string(k)
			if wide {
				name += "_wide"
			}
			t.Run(name, func(t *testing.T) {
				p := printer{Now: testNow, Wide: wide, FormatLabels: defaultAPIFuncs().formatLabels}
				golden(t, name+".golden", p.table(k, fx[k]).String())
			})
		}
	}
}

func TestHumanAge(t *testing.T) {
	tests := []struct {
		name string
		ago  time.Duration
		want string
	}{
		{"seconds", 5 * time.Second, "5s"},
		{"just under a minute", 59*time.Second + 900*time.Millisecond, "59s"},
		{"minutes", 3*time.Minute + 59*time.Second, "3m"},
		{"hours", 2*time.Hour + 59*time.Minute, "2h"},
		{"days", 4*24*time.Hour + 23*time.Hour, "4d"},
		{"years", 800 * 24 * time.Hour, "2y"},
		{"clock skew under a second", -500 * time.Millisecond, "0s"},
		{"future", -time.Hour, "<invalid>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := humanAge(testNow.Add(-tt.ago), testNow); got != tt.want {
				t.Errorf("humanAge(-%v) = %q, want %q", tt.ago, got, tt.want)
			}
		})
	}
	if got := humanAge(time.Time{}, testNow); got != "<unknown>" {
		t.Errorf("zero time: %q", got)
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "<none>"}, {512, "512"}, {2048, "2Ki"}, {1536 << 20, "1.5Gi"}, {4 << 30, "4Gi"}, {3 << 40, "3Ti"}, {4080218931, "3.8Gi"},
	}
	for _, tt := range tests {
		if got := humanBytes(tt.n); got != tt.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestTableWidthsGrow(t *testing.T) {
	tb := &table{Header: []string{"NAME", "AGE"}, Rows: [][]string{{"a", "1s"}}}
	w := tb.widths(nil)
	tb2 := &table{Header: tb.Header, Rows: [][]string{{"a-much-longer-name", "2s"}}}
	w2 := tb2.widths(w)
	if w2[0] != len("a-much-longer-name") || w2[1] != 3 {
		t.Errorf("widths = %v", w2)
	}
	tb3 := &table{Header: tb.Header, Rows: [][]string{{"b", "3s"}}}
	if w3 := tb3.widths(w2); w3[0] != w2[0] {
		t.Errorf("widths shrank: %v after %v", w3, w2)
	}
}
