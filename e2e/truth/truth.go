// Package truth checks what ran where against what was declared: samples
// of the active herd units of every board (read from systemd on the boards
// by the e2e harness, never from herd), replayed moment by moment with what
// the harness knows of the faults (which boards were away or off, when a
// fault was injected) and of the declared count (the scales written and
// their outcome). Check reports overcount over all boards and over the
// reachable ones, a pod's unit active on two boards at once, and dips below
// the declared count once the reachable boards had converged after a
// fault. It has no build tag and needs no lab: its tests run with go test
// ./...
package truth

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// UnitInfo is one active herd unit as systemd on its board reported it.
type UnitInfo struct {
	// Unit is the unit name (herd-<pod>.service).
	Unit string
	// Pod and Owner are the unit file's X-Herd-Pod and X-Herd-Owner
	// (kind/name); Pod falls back to the unit name's when the file is gone.
	Pod, Owner string
	// MainPID is systemd's MainPID of the unit.
	MainPID int
}

// UnitSample is what one board's systemd said at one moment: every active
// herd-*.service.
type UnitSample struct {
	Board string
	// At is when the board's clock (the host's: the lab shares one
	// kernel) read the time just before it listed the units.
	At    time.Time
	Units []UnitInfo
}

// Of is the units of owner (e.g. "deployments/web") in the sample.
func (s UnitSample) Of(owner string) []UnitInfo {
	var out []UnitInfo
	for _, u := range s.Units {
		if u.Owner == owner {
			out = append(out, u)
		}
	}
	return out
}

// ParseSamples reads the output of a board's sampling loop (e2e's
// sampleScript: "@@ <unix time>", `systemctl show -p Id -p MainPID` of the
// active herd units, "@@meta", grep -H of the unit files' X-Herd-Pod and
// X-Herd-Owner lines, "@@end") and calls emit with each complete sample;
// an incomplete one at the end is dropped.
func ParseSamples(r io.Reader, board string, emit func(UnitSample)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur *UnitSample
	pids := map[string]int{}
	meta := map[string]*UnitInfo{}
	inMeta := false
	id, pid := "", -1
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@ "):
			at, err := parseUnixTime(strings.TrimPrefix(line, "@@ "))
			if err != nil {
				cur = nil
				continue
			}
			cur = &UnitSample{Board: board, At: at}
			clear(pids)
			clear(meta)
			inMeta, id, pid = false, "", -1
		case cur == nil:
		case line == "@@meta":
			inMeta = true
		case line == "@@end":
			for unit, pid := range pids {
				u := UnitInfo{Unit: unit, MainPID: pid}
				if m := meta[unit]; m != nil {
					u.Pod, u.Owner = m.Pod, m.Owner
				}
				if u.Pod == "" {
					u.Pod = strings.TrimSuffix(strings.TrimPrefix(unit, "herd-"), ".service")
				}
				cur.Units = append(cur.Units, u)
			}
			sort.Slice(cur.Units, func(i, j int) bool { return cur.Units[i].Unit < cur.Units[j].Unit })
			emit(*cur)
			cur = nil
		case inMeta:
			// /etc/systemd/system/herd-x.service:X-Herd-Pod=x
			file, kv, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			unit := path.Base(file)
			m := meta[unit]
			if m == nil {
				m = &UnitInfo{}
				meta[unit] = m
			}
			if v, ok := strings.CutPrefix(kv, "X-Herd-Pod="); ok {
				m.Pod = v
			} else if v, ok := strings.CutPrefix(kv, "X-Herd-Owner="); ok {
				m.Owner = v
			}
		default:
			id, pid = ShowLine(line, id, pid, pids)
		}
	}
	return sc.Err()
}

// Episode is a stretch of time a condition held, as the samples saw it:
// From the first moment it did, To the first moment it no longer did (or
// the last moment checked).
type Episode struct {
	From, To time.Time
	// What says what held, e.g. "web-3 on b1,b4" or "2 active, 3 declared".
	What string
	// Depth is how far off the count was at worst (units over or under).
	Depth int
}

// Duration is how long the episode lasted (0: seen in one moment only).
func (e Episode) Duration() time.Duration { return e.To.Sub(e.From) }

// Truth is the input of Check: the samples and what the harness knows of
// the faults and of the declared count.
type Truth struct {
	Samples []UnitSample
	// Boards are every board of the fleet.
	Boards []string
	// Owner is the workload counted, e.g. "deployments/web" (Workload.Owner).
	Owner string
	// Stale is how old a board's last sample may be and still stand for
	// it; older, the board is unknown at that moment (or empty when Off
	// says it is off).
	Stale time.Duration
	// Away reports whether board was cut off from the leader's side at t
	// (partitioned away, or its power pulled): it then counts in "all
	// boards" but not in "reachable".
	Away func(board string, t time.Time) bool
	// Off reports whether board's power was off at t (no unit runs).
	Off func(board string, t time.Time) bool
	// Declared is the declared replica count at t: lo and hi bound it
	// (a write in flight or within its grace period makes lo < hi).
	Declared func(t time.Time) (lo, hi int)
	// Disrupted are the moments a fault was injected: the count on the
	// reachable boards may dip after each until it has reached the
	// declared count again.
	Disrupted []time.Time
}

// Verdict is what Check found between two moments.
type Verdict struct {
	// Moments is how many moments were checked (one per sample).
	Moments int
	// OverAll and OverReach are the largest overcount (active units minus
	// the highest declared count) over all boards and over the reachable
	// ones; the Episodes say when.
	OverAll, OverReach       int
	OverAllEps, OverReachEps []Episode
	// Duplicates: a pod's unit active on more than one board at once.
	Duplicates []Episode
	// Dips: fewer active on the reachable boards than declared, after they
	// had reached the declared count since the last fault.
	Dips []Episode
	// Unknown is how long some board's state was not known (no fresh
	// sample and not off).
	Unknown time.Duration
	// MaxReach is the most units seen on the reachable boards.
	MaxReach int
}

// Check replays the samples between from and to, one moment per sample
// (each board standing for what its latest sample said), and reports
// overcount, pods active on two boards at once and dips below the declared
// count on the reachable boards once they had converged.
func Check(tr Truth, from, to time.Time) Verdict {
	var v Verdict
	var overAllOpen, overReachOpen *Episode
	last := map[string]*UnitSample{}
	dups := map[string]*Episode{}
	var dip *Episode
	converged := false
	di := 0
	for len(tr.Disrupted) > di && !tr.Disrupted[di].After(from) {
		di++
	}
	var prev time.Time
	for i := range tr.Samples {
		s := &tr.Samples[i]
		if s.At.After(to) {
			break
		}
		last[s.Board] = s
		if s.At.Before(from) {
			continue
		}
		t := s.At
		v.Moments++
		for di < len(tr.Disrupted) && !tr.Disrupted[di].After(t) {
			converged = false
			di++
		}
		all, reach := 0, 0
		unknown := false
		where := map[string][]string{}
		for _, b := range tr.Boards {
			ls := last[b]
			var units []UnitInfo
			switch {
			case ls != nil && t.Sub(ls.At) <= tr.Stale:
				units = ls.Of(tr.Owner)
			case tr.Off != nil && tr.Off(b, t):
			default:
				unknown = true
				continue
			}
			all += len(units)
			if tr.Away == nil || !tr.Away(b, t) {
				reach += len(units)
			}
			for _, u := range units {
				where[u.Pod] = append(where[u.Pod], b)
			}
		}
		if unknown && !prev.IsZero() {
			v.Unknown += t.Sub(prev)
		}
		prev = t
		lo, hi := tr.Declared(t)
		v.MaxReach = max(v.MaxReach, reach)
		track := func(open **Episode, eps *[]Episode, over int, what string) {
			switch {
			case over > 0 && *open == nil:
				*open = &Episode{From: t, To: t, What: what, Depth: over}
			case over > 0:
				(*open).To = t
				(*open).Depth = max((*open).Depth, over)
			case *open != nil:
				(*open).To = t
				*eps = append(*eps, **open)
				*open = nil
			}
		}
		track(&overAllOpen, &v.OverAllEps, all-hi, fmt.Sprintf("%d active on all boards, declared %d", all, hi))
		track(&overReachOpen, &v.OverReachEps, reach-hi, fmt.Sprintf("%d active on reachable boards, declared %d", reach, hi))
		v.OverAll = max(v.OverAll, all-hi)
		v.OverReach = max(v.OverReach, reach-hi)
		for pod, bs := range where {
			if len(bs) > 1 {
				if e := dups[pod]; e != nil {
					e.To = t
				} else {
					slices.Sort(bs)
					dups[pod] = &Episode{From: t, To: t, What: pod + " on " + strings.Join(bs, ","), Depth: len(bs) - 1}
				}
			}
		}
		for pod, e := range dups {
			if len(where[pod]) < 2 {
				e.To = t
				v.Duplicates = append(v.Duplicates, *e)
				delete(dups, pod)
			}
		}
		if lo != hi {
			converged = false
		} else if !unknown && reach == hi {
			converged = true
		}
		switch {
		case converged && !unknown && reach < lo && dip == nil:
			dip = &Episode{From: t, To: t, What: fmt.Sprintf("%d active on reachable boards, declared %d", reach, lo), Depth: lo - reach}
		case converged && !unknown && reach < lo:
			dip.To = t
			dip.Depth = max(dip.Depth, lo-reach)
		case dip != nil && !unknown:
			dip.To = t
			v.Dips = append(v.Dips, *dip)
			dip = nil
		}
	}
	for _, e := range dups {
		v.Duplicates = append(v.Duplicates, *e)
	}
	if dip != nil {
		v.Dips = append(v.Dips, *dip)
	}
	for _, open := range []struct {
		e   *Episode
		eps *[]Episode
	}{{overAllOpen, &v.OverAllEps}, {overReachOpen, &v.OverReachEps}} {
		if open.e != nil {
			*open.eps = append(*open.eps, *open.e)
		}
	}
	sort.Slice(v.Duplicates, func(i, j int) bool { return v.Duplicates[i].From.Before(v.Duplicates[j].From) })
	return v
}

// Longest is the longest of eps (zero Episode for none).
func Longest(eps []Episode) Episode {
	var l Episode
	for _, e := range eps {
		if e.Duration() >= l.Duration() {
			l = e
		}
	}
	return l
}

// Interval is a stretch of time, To zero while it lasts.
type Interval struct{ From, To time.Time }

// Contains reports whether t falls in the interval.
func (iv Interval) Contains(t time.Time) bool {
	return !t.Before(iv.From) && (iv.To.IsZero() || !t.After(iv.To))
}

// Intervals are the stretches of time each board spent in some state
// (partitioned away, powered off); safe for concurrent use.
type Intervals struct {
	mu sync.Mutex
	m  map[string][]Interval
}

// Begin opens an interval for board at t.
func (s *Intervals) Begin(board string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]Interval{}
	}
	s.m[board] = append(s.m[board], Interval{From: t})
}

// End closes board's open interval at t.
func (s *Intervals) End(board string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.m[board]; len(l) > 0 && l[len(l)-1].To.IsZero() {
		l[len(l)-1].To = t
	}
}

// In reports whether board was in the state at t.
func (s *Intervals) In(board string, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, iv := range s.m[board] {
		if iv.Contains(t) {
			return true
		}
	}
	return false
}

// Write is one scale of the counted deployment and its outcome.
type Write struct {
	Start, End time.Time
	Value      int
	// Via is the server the write went through.
	Via string
	// Err is nil for an acknowledged write.
	Err error
	// ReadBack is the replica count the next read through Via returned
	// (-1: no read, or it failed).
	ReadBack int
}

// Latency is how long the write took to be acknowledged or to fail.
func (w Write) Latency() time.Duration { return w.End.Sub(w.Start) }

// WriteLog records the scales of one deployment and says what replica
// count was declared at any moment; safe for concurrent use.
type WriteLog struct {
	// Initial is the replica count before the first write.
	Initial int
	// Grace is how long after a write ends the count may still follow
	// the value before it (the placer starting or stopping units).
	Grace time.Duration

	mu sync.Mutex
	w  []Write
}

// Add records a write.
func (l *WriteLog) Add(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w = append(l.w, w)
	sort.SliceStable(l.w, func(i, j int) bool { return l.w[i].Start.Before(l.w[j].Start) })
}

// Writes are the writes recorded, in start order.
func (l *WriteLog) Writes() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.w)
}

// Last is the value of the last acknowledged write (Initial if none) and
// the values of failed writes after it (their outcome is unknown: any of
// them may be what is declared).
func (l *WriteLog) Last() (int, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, i := l.Initial, -1
	for j, w := range l.w {
		if w.Err == nil && (i < 0 || w.End.After(l.w[i].End)) {
			cur, i = w.Value, j
		}
	}
	var maybe []int
	for j, w := range l.w {
		if w.Err != nil && (i < 0 || w.Start.After(l.w[i].Start)) && j != i {
			maybe = append(maybe, w.Value)
		}
	}
	return cur, maybe
}

// Declared bounds the declared count at t: the value of the last write
// acknowledged by then, widened by the value before a write in flight or
// acknowledged less than Grace ago, and by failed writes (outcome unknown)
// until a later write has been acknowledged for Grace.
func (l *WriteLog) Declared(t time.Time) (lo, hi int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.Initial
	set := []int{}
	var unknown []int
	for _, w := range l.w {
		if w.Start.After(t) {
			break
		}
		switch {
		case w.End.After(t): // in flight
			set = append(set, cur, w.Value)
			if w.Err != nil {
				unknown = append(unknown, w.Value)
			}
		case w.Err == nil:
			if t.Sub(w.End) < l.Grace {
				set = append(set, cur, w.Value)
			} else {
				unknown = nil
			}
			cur = w.Value
		default:
			unknown = append(unknown, w.Value)
		}
	}
	set = append(set, cur)
	set = append(set, unknown...)
	return slices.Min(set), slices.Max(set)
}

// parseUnixTime reads "SECONDS[.FRACTION]" (date +%s.%N) exactly.
func parseUnixTime(s string) (time.Time, error) {
	secs, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || len(frac) > 9 {
		return time.Time{}, fmt.Errorf("truth: bad time %q", s)
	}
	var nsec int64
	if frac != "" {
		if nsec, err = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("truth: bad time %q", s)
		}
	}
	return time.Unix(sec, nsec), nil
}

// ShowLine reads one line of `systemctl show -p Id -p MainPID` of several
// units (a blank line between units, the properties in systemd's order):
// once a unit's Id and MainPID are both read it goes into pids.
func ShowLine(line, id string, pid int, pids map[string]int) (string, int) {
	if v, ok := strings.CutPrefix(line, "Id="); ok {
		id = v
	} else if v, ok := strings.CutPrefix(line, "MainPID="); ok {
		pid, _ = strconv.Atoi(v)
	} else if line == "" {
		return "", -1
	}
	if id != "" && pid >= 0 {
		pids[id] = pid
		return "", -1
	}
	return id, pid
}
