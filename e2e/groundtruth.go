//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
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

// sampleScript runs on a board for as long as its SSH session lasts and
// prints, every interval, a sample: "@@ <unix time>", then `systemctl
// show` of every active herd unit (Id, MainPID), then "@@meta" and the
// X-Herd-Pod and X-Herd-Owner lines of the unit files, then "@@end".
const sampleScript = `while :; do
echo "@@ $(date +%%s.%%N)"
u=$(systemctl list-units --plain --no-legend --state=active 'herd-*.service' | awk '{print $1}')
[ -n "$u" ] && systemctl show -p Id -p MainPID $u
echo @@meta
grep -H -e '^X-Herd-Pod=' -e '^X-Herd-Owner=' /etc/systemd/system/herd-*.service 2>/dev/null
echo @@end
sleep %s
done`

// GroundTruth samples the herd units of every board from the boards' own
// systemd, never from herd: one SSH session per board (from the board's own
// network namespace, so it works while the board is partitioned away) runs
// a loop that lists the active herd-* units every interval. A session that
// ends (power pulled, board booting) is started again until Stop.
type GroundTruth struct {
	f        *Fleet
	interval time.Duration

	mu      sync.Mutex
	samples []UnitSample
	errs    map[string]string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// WatchUnits starts sampling boards every interval until Stop (or ctx
// ends).
func (f *Fleet) WatchUnits(ctx context.Context, boards []string, interval time.Duration) *GroundTruth {
	ctx, cancel := context.WithCancel(ctx)
	g := &GroundTruth{f: f, interval: interval, cancel: cancel, errs: map[string]string{}}
	for _, b := range boards {
		g.wg.Add(1)
		go g.watch(ctx, b)
	}
	return g
}

// Stop ends the sampling and waits for the sessions to end.
func (g *GroundTruth) Stop() {
	g.cancel()
	g.wg.Wait()
}

// Samples are the samples so far of every board, in time order.
func (g *GroundTruth) Samples() []UnitSample {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.samples)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// LastError is the last reason board's session ended ("" if none did).
func (g *GroundTruth) LastError(board string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errs[board]
}

func (g *GroundTruth) watch(ctx context.Context, board string) {
	defer g.wg.Done()
	script := fmt.Sprintf(sampleScript, strconv.FormatFloat(g.interval.Seconds(), 'f', 3, 64))
	for ctx.Err() == nil {
		err := g.session(ctx, board, script)
		g.mu.Lock()
		g.errs[board] = fmt.Sprint(err)
		g.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // the board is off or booting: try again
		}
	}
}

// session runs the sampling loop on board until the session ends.
func (g *GroundTruth) session(ctx context.Context, board, script string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", "herd-"+board,
		"ssh", "-F", g.f.SSHConfig, "-o", "ConnectTimeout=2", "-o", "BatchMode=yes",
		"-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2", board, script)
	cmd.Env = cleanEnv()
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
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
			sec, err := strconv.ParseFloat(strings.TrimPrefix(line, "@@ "), 64)
			if err != nil {
				cur = nil
				continue
			}
			cur = &UnitSample{Board: board, At: time.Unix(0, int64(sec*1e9))}
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
			g.mu.Lock()
			g.samples = append(g.samples, *cur)
			g.mu.Unlock()
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
			id, pid = showLine(line, id, pid, pids)
		}
	}
	err = cmd.Wait()
	if err == nil {
		err = fmt.Errorf("session ended")
	}
	return fmt.Errorf("%w: %s", err, strings.TrimSpace(lastLines(stderr.String(), 2)))
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

// UnitPIDs is the MainPID of every active herd unit on board (ssh from the
// board's own namespace).
func (f *Fleet) UnitPIDs(ctx context.Context, board string) (map[string]int, error) {
	out, err := f.SSHInside(ctx, board, "", `u=$(systemctl list-units --plain --no-legend --state=active 'herd-*.service' | awk '{print $1}'); [ -z "$u" ] || systemctl show -p Id -p MainPID $u`)
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	id, pid := "", -1
	for _, line := range strings.Split(out, "\n") {
		id, pid = showLine(line, id, pid, pids)
	}
	return pids, nil
}

// showLine reads one line of `systemctl show -p Id -p MainPID` of several
// units (a blank line between units, the properties in systemd's order):
// once a unit's Id and MainPID are both read it goes into pids.
func showLine(line, id string, pid int, pids map[string]int) (string, int) {
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

// Owner is how the deployment's units name their owner (X-Herd-Owner).
func (w Workload) Owner() string { return string(api.KindDeployment) + "/" + w.Deployment }
