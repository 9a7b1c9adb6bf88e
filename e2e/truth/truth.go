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
	r := newReplay(tr, from)
	for i := range tr.Samples {
		s := &tr.Samples[i]
		if s.At.After(to) {
			break
		}
		r.last[s.Board] = s
		if s.At.Before(from) {
			continue
		}
		r.moment(s.At)
	}
	return r.finish()
}

// replay is Check's state from one moment to the next: the latest sample
// of each board, the episodes still open, and whether the reachable boards
// have reached the declared count since the last fault.
type replay struct {
	tr                 Truth
	v                  Verdict
	last               map[string]*UnitSample
	overAll, overReach *Episode
	dups               map[string]*Episode
	dip                *Episode
	converged          bool
	// di is the index of the first fault in tr.Disrupted not yet replayed.
	di int
	// prev is the previous moment (zero before the first).
	prev time.Time
}

// newReplay starts a replay at from: the faults injected by then are
// already past.
func newReplay(tr Truth, from time.Time) *replay {
	r := &replay{tr: tr, last: map[string]*UnitSample{}, dups: map[string]*Episode{}}
	for len(tr.Disrupted) > r.di && !tr.Disrupted[r.di].After(from) {
		r.di++
	}
	return r
}

// moment checks the boards at t, a sample's time, against the declared
// count and carries the episodes on.
func (r *replay) moment(t time.Time) {
	r.v.Moments++
	for r.di < len(r.tr.Disrupted) && !r.tr.Disrupted[r.di].After(t) {
		r.converged = false
		r.di++
	}
	c := countAt(r.tr, r.last, t)
	if c.unknown && !r.prev.IsZero() {
		r.v.Unknown += t.Sub(r.prev)
	}
	r.prev = t
	lo, hi := r.tr.Declared(t)
	r.v.MaxReach = max(r.v.MaxReach, c.reach)
	trackOver(&r.overAll, &r.v.OverAllEps, t, c.all-hi, fmt.Sprintf("%d active on all boards, declared %d", c.all, hi))
	trackOver(&r.overReach, &r.v.OverReachEps, t, c.reach-hi, fmt.Sprintf("%d active on reachable boards, declared %d", c.reach, hi))
	r.v.OverAll = max(r.v.OverAll, c.all-hi)
	r.v.OverReach = max(r.v.OverReach, c.reach-hi)
	r.trackDuplicates(t, c.where)
	r.trackDip(t, c, lo, hi)
}

// tally is what the boards ran at one moment.
type tally struct {
	// all and reach are the owner's active units on all boards and on
	// the reachable ones.
	all, reach int
	// unknown: some board had no fresh sample and was not off.
	unknown bool
	// where are the boards each pod's unit was active on.
	where map[string][]string
}

// countAt counts the owner's units at t on each board by its latest
// sample: a board with no sample fresher than tr.Stale runs nothing if
// it is off, else it is unknown and not counted.
func countAt(tr Truth, last map[string]*UnitSample, t time.Time) tally {
	c := tally{where: map[string][]string{}}
	for _, b := range tr.Boards {
		ls := last[b]
		var units []UnitInfo
		switch {
		case ls != nil && t.Sub(ls.At) <= tr.Stale:
			units = ls.Of(tr.Owner)
		case tr.Off != nil && tr.Off(b, t):
		default:
			c.unknown = true
			continue
		}
		c.all += len(units)
		if tr.Away == nil || !tr.Away(b, t) {
			c.reach += len(units)
		}
		for _, u := range units {
			c.where[u.Pod] = append(c.where[u.Pod], b)
		}
	}
	return c
}

// trackOver carries an overcount episode on at t: over > 0 opens *open
// or extends it, over <= 0 closes it into eps.
func trackOver(open **Episode, eps *[]Episode, t time.Time, over int, what string) {
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

// trackDuplicates opens or extends an episode for each pod active on more
// than one board at t and closes those of the pods no longer so.
func (r *replay) trackDuplicates(t time.Time, where map[string][]string) {
	for pod, bs := range where {
		if len(bs) > 1 {
			if e := r.dups[pod]; e != nil {
				e.To = t
			} else {
				slices.Sort(bs)
				r.dups[pod] = &Episode{From: t, To: t, What: pod + " on " + strings.Join(bs, ","), Depth: len(bs) - 1}
			}
		}
	}
	for pod, e := range r.dups {
		if len(where[pod]) < 2 {
			e.To = t
			r.v.Duplicates = append(r.v.Duplicates, *e)
			delete(r.dups, pod)
		}
	}
}

// trackDip decides whether the reachable boards have converged (every
// board known and the declared count reached while it is settled; an
// unsettled count, lo < hi, or a fault undoes it) and, once they have,
// opens or extends a dip while fewer than lo run there; the next moment
// with every board known and no dip closes it.
func (r *replay) trackDip(t time.Time, c tally, lo, hi int) {
	if lo != hi {
		r.converged = false
	} else if !c.unknown && c.reach == hi {
		r.converged = true
	}
	switch {
	case r.converged && !c.unknown && c.reach < lo && r.dip == nil:
		r.dip = &Episode{From: t, To: t, What: fmt.Sprintf("%d active on reachable boards, declared %d", c.reach, lo), Depth: lo - c.reach}
	case r.converged && !c.unknown && c.reach < lo:
		r.dip.To = t
		r.dip.Depth = max(r.dip.Depth, lo-c.reach)
	case r.dip != nil && !c.unknown:
		r.dip.To = t
		r.v.Dips = append(r.v.Dips, *r.dip)
		r.dip = nil
	}
}

// finish closes the episodes still open at the last moment and orders
// the duplicates by when they began.
func (r *replay) finish() Verdict {
	v := r.v
	for _, e := range r.dups {
		v.Duplicates = append(v.Duplicates, *e)
	}
	if r.dip != nil {
		v.Dips = append(v.Dips, *r.dip)
	}
	for _, open := range []struct {
		e   *Episode
		eps *[]Episode
	}{{r.overAll, &v.OverAllEps}, {r.overReach, &v.OverReachEps}} {
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
