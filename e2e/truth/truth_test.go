package truth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestParseSamples(t *testing.T) {
	// Two samples (MainPID before Id, as systemd prints it, and the other
	// order), a unit whose file is gone, a foreign unit, then one cut off.
	in := strings.Join([]string{
		"@@ 1800000000.250000000",
		"MainPID=319",
		"Id=herd-web-2rj4f.service",
		"",
		"Id=herd-web-x.service",
		"MainPID=7",
		"@@meta",
		"/etc/systemd/system/herd-web-2rj4f.service:X-Herd-Pod=web-2rj4f",
		"/etc/systemd/system/herd-web-2rj4f.service:X-Herd-Owner=deployments/web",
		"@@end",
		"@@ 1800000000.5",
		"@@meta",
		"@@end",
		"@@ 1800000001",
		"MainPID=1",
	}, "\n")
	var got []UnitSample
	if err := ParseSamples(strings.NewReader(in), "b2", func(s UnitSample) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	want := []UnitSample{
		{Board: "b2", At: at(250), Units: []UnitInfo{
			{Unit: "herd-web-2rj4f.service", Pod: "web-2rj4f", Owner: "deployments/web", MainPID: 319},
			{Unit: "herd-web-x.service", Pod: "web-x", MainPID: 7},
		}},
		{Board: "b2", At: at(500)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("samples (-want +got):\n%s", d)
	}
}

// sample is a sample of board at ms holding pods of deployments/web.
func sample(board string, ms int, pods ...string) UnitSample {
	s := UnitSample{Board: board, At: at(ms)}
	for _, p := range pods {
		s.Units = append(s.Units, UnitInfo{Unit: "herd-" + p + ".service", Pod: p, Owner: "deployments/web"})
	}
	return s
}

func fixed(n int) func(time.Time) (int, int) { return func(time.Time) (int, int) { return n, n } }

func TestCheck(t *testing.T) {
	boards := []string{"b1", "b2"}
	base := Truth{Boards: boards, Owner: "deployments/web", Stale: 300 * time.Millisecond, Declared: fixed(2)}
	tests := []struct {
		name      string
		samples   []UnitSample
		away, off func(string, time.Time) bool
		disrupted []time.Time
		check     func(t *testing.T, v Verdict)
	}{
		{
			name: "steady: nothing to report",
			samples: []UnitSample{
				sample("b1", 0, "a"), sample("b2", 10, "b"), sample("b1", 200, "a"), sample("b2", 210, "b"),
			},
			check: func(t *testing.T, v Verdict) {
				if v.OverAll != 0 || len(v.Duplicates) != 0 || len(v.Dips) != 0 || v.Moments != 4 {
					t.Errorf("verdict %+v", v)
				}
			},
		},
		{
			name: "one pod on both boards for 400 ms",
			samples: []UnitSample{
				sample("b1", 0, "a"), sample("b2", 10, "b"),
				sample("b1", 200, "a"), sample("b2", 210, "b", "a"),
				sample("b1", 400, "a"), sample("b2", 410, "b", "a"),
				sample("b1", 600, "a"), sample("b2", 610, "b"),
			},
			check: func(t *testing.T, v Verdict) {
				if len(v.Duplicates) != 1 || v.Duplicates[0].What != "a on b1,b2" || v.Duplicates[0].Duration() != 400*time.Millisecond {
					t.Errorf("duplicates %+v", v.Duplicates)
				}
				if v.OverAll != 1 || v.OverReach != 1 {
					t.Errorf("overcount all %d reachable %d, want 1 and 1", v.OverAll, v.OverReach)
				}
			},
		},
		{
			name: "a dip after convergence counts, before it does not",
			samples: []UnitSample{
				sample("b1", 0), sample("b2", 10, "b"), // the fault: not converged yet
				sample("b1", 200, "c"), sample("b2", 210, "b"), // converged
				sample("b1", 400), sample("b2", 410, "b"), // dip
				sample("b1", 600, "c"), sample("b2", 610, "b"),
			},
			disrupted: []time.Time{at(0)},
			check: func(t *testing.T, v Verdict) {
				if len(v.Dips) != 1 || v.Dips[0].From != at(400) || v.Dips[0].To != at(600) || v.Dips[0].Depth != 1 {
					t.Errorf("dips %+v, want one from 400ms to 600ms, depth 1", v.Dips)
				}
			},
		},
		{
			name: "a partitioned board counts in all boards only; an off board is empty, not unknown",
			samples: []UnitSample{
				sample("b1", 0, "a", "c"), sample("b2", 10, "a"),
				sample("b1", 200, "a", "c"),
				sample("b1", 2000, "a", "c"),
			},
			away: func(b string, t time.Time) bool { return b == "b2" },
			off:  func(b string, t time.Time) bool { return b == "b2" && t.After(at(100)) },
			check: func(t *testing.T, v Verdict) {
				if v.OverAll != 1 || v.OverReach != 0 || v.Unknown != 0 {
					t.Errorf("overcount all %d reachable %d unknown %v, want 1, 0, 0", v.OverAll, v.OverReach, v.Unknown)
				}
			},
		},
		{
			name: "a board without a fresh sample is unknown, and no dip is judged",
			samples: []UnitSample{
				sample("b1", 0, "a"), sample("b2", 10, "b"),
				sample("b1", 200, "a"), sample("b1", 1000, "a"), sample("b1", 1200, "a"),
			},
			check: func(t *testing.T, v Verdict) {
				if len(v.Dips) != 0 || v.Unknown != 1000*time.Millisecond {
					t.Errorf("dips %+v unknown %v, want none and 1s", v.Dips, v.Unknown)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := base
			tr.Samples, tr.Away, tr.Off, tr.Disrupted = tc.samples, tc.away, tc.off, tc.disrupted
			tc.check(t, Check(tr, at(0), at(5000)))
		})
	}
}

func TestWriteLog(t *testing.T) {
	l := &WriteLog{Initial: 3, Grace: time.Second}
	l.Add(Write{Start: at(0), End: at(100), Value: 4})
	l.Add(Write{Start: at(3000), End: at(3500), Value: 5, Err: errors.New("timeout")})
	tests := []struct {
		ms     int
		lo, hi int
	}{
		{-1, 3, 3},   // before any write
		{50, 3, 4},   // in flight
		{600, 3, 4},  // acknowledged, within the grace
		{2000, 4, 4}, // settled
		{3200, 4, 5}, // a write in flight
		{9000, 4, 5}, // it failed: its outcome is unknown
	}
	for _, tc := range tests {
		if lo, hi := l.Declared(at(tc.ms)); lo != tc.lo || hi != tc.hi {
			t.Errorf("Declared at %dms = %d..%d, want %d..%d", tc.ms, lo, hi, tc.lo, tc.hi)
		}
	}
	cur, maybe := l.Last()
	if cur != 4 || !cmp.Equal(maybe, []int{5}) {
		t.Errorf("Last = %d, %v; want 4, [5]", cur, maybe)
	}
	l.Add(Write{Start: at(10000), End: at(10100), Value: 6})
	if lo, hi := l.Declared(at(12000)); lo != 6 || hi != 6 {
		t.Errorf("after a later acknowledged write settled: %d..%d, want 6..6", lo, hi)
	}
}
