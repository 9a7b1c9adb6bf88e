package svcproxy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, cur   int
		down     []int
		want     []int
		wantNext int
	}{
		{name: "none", n: 0, want: nil, wantNext: 0},
		{name: "first", n: 3, cur: 0, want: []int{0, 1, 2}, wantNext: 1},
		{name: "wraps", n: 3, cur: 2, want: []int{2, 0, 1}, wantNext: 0},
		{name: "cursor past a shrunk list", n: 3, cur: 7, want: []int{1, 2, 0}, wantNext: 2},
		{name: "skips down", n: 3, cur: 1, down: []int{1}, want: []int{2, 0, 1}, wantNext: 0},
		{name: "down ones last", n: 3, cur: 0, down: []int{0, 1}, want: []int{2, 0, 1}, wantNext: 0},
		{name: "all down tried anyway", n: 3, cur: 1, down: []int{0, 1, 2}, want: []int{1, 2, 0}, wantNext: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down := map[int]bool{}
			for _, i := range tc.down {
				down[i] = true
			}
			got, next := order(tc.n, tc.cur, func(i int) bool { return down[i] })
			if diff := cmp.Diff(tc.want, got); diff != "" || next != tc.wantNext {
				t.Errorf("order(%d, %d) next %d want %d; order diff (-want +got):\n%s", tc.n, tc.cur, next, tc.wantNext, diff)
			}
		})
	}
}

// TestOrderSpreads runs the cursor over many connections: each target
// that is up gets the same share, a down one none.
func TestOrderSpreads(t *testing.T) {
	for _, tc := range []struct {
		name string
		down map[int]bool
		want map[int]int
	}{
		{name: "all up", want: map[int]int{0: 30, 1: 30, 2: 30}},
		{name: "one down", down: map[int]bool{1: true}, want: map[int]int{0: 45, 2: 45}},
		{name: "all down", down: map[int]bool{0: true, 1: true, 2: true}, want: map[int]int{0: 30, 1: 30, 2: 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[int]int{}
			cur := 0
			for range 90 {
				var idx []int
				idx, cur = order(3, cur, func(i int) bool { return tc.down[i] })
				got[idx[0]]++
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("first choices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	var got []time.Duration
	var h health
	for range 6 {
		h = h.failed(now)
		got = append(got, h.until.Sub(now))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}
	if !h.down(now.Add(29*time.Second)) || h.down(now.Add(30*time.Second)) {
		t.Errorf("down: want down before until, up at it")
	}
}

// TestBindingHealth: a failed dial takes a target out of the round robin
// for the backoff, a success puts it back, and a removed target's record
// is forgotten.
func TestBindingHealth(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBinding(Binding{Key: Key{"web", "http", "tcp"}, Targets: []Target{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.2:80"}, {Addr: "10.0.0.3:80"}}})
	firsts := func(at time.Time, n int) []string {
		var out []string
		for range n {
			out = append(out, b.plan(at)[0].Addr)
		}
		return out
	}
	c := b.plan(now)[0] // 10.0.0.1; cursor now at .2
	if !b.result(c, false, now) {
		t.Errorf("first failure: want wentDown")
	}
	if b.result(c, false, now) {
		t.Errorf("second failure while down: want no wentDown")
	}
	if diff := cmp.Diff([]string{"10.0.0.2:80", "10.0.0.3:80", "10.0.0.2:80", "10.0.0.3:80"}, firsts(now.Add(time.Second), 4)); diff != "" {
		t.Errorf("while .1 is down (-want +got):\n%s", diff)
	}
	// Two failures: 4 s of backoff; after it .1 is back in the rotation.
	if diff := cmp.Diff([]string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}, firsts(now.Add(4*time.Second), 3)); diff != "" {
		t.Errorf("after the backoff (-want +got):\n%s", diff)
	}
	b.result(c, true, now)
	if h, ok := b.health[c.Addr]; ok {
		t.Errorf("after a success: health %+v, want forgotten", h)
	}
	b.result(c, false, now)
	b.setTargets([]Target{{Addr: "10.0.0.2:80"}})
	if len(b.health) != 0 {
		t.Errorf("after removing .1: health %v, want empty", b.health)
	}
	if b.result(c, false, now); len(b.health) != 0 {
		t.Errorf("a late failure of a removed target recorded: %v", b.health)
	}
}
