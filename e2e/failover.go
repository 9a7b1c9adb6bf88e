//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// Workload names what a converged fleet runs: one deployment with a fixed
// replica count and a service in front of it (examples/web.toml).
type Workload struct {
	Deployment string
	Service    string
	// Port is the pod port the service targets (its endpoints carry the
	// pod's host port of that name).
	Port     string
	Replicas int
}

// Web is examples/web.toml.
var Web = Workload{Deployment: "web", Service: "web", Port: "http", Replicas: 3}

// UnitPattern matches the units of the deployment's pods on a board.
func (w Workload) UnitPattern() string { return api.UnitPrefix + w.Deployment + "-*" }

// Live are the pods of the deployment that are not terminal.
func (w Workload) Live(s Snapshot) []api.Pod {
	var out []api.Pod
	for _, p := range s.OwnedPods(w.Deployment) {
		if !p.Status.Phase.Terminal() {
			out = append(out, p)
		}
	}
	return out
}

// Endpoint is where the service should reach pod p: its board IP and host
// port.
func (w Workload) Endpoint(p api.Pod) string {
	return net.JoinHostPort(p.Status.IP, fmt.Sprint(p.Spec.HostPorts[w.Port]))
}

// PodsOn are the live pods bound to board.
func (w Workload) PodsOn(s Snapshot, board string) []api.Pod {
	var out []api.Pod
	for _, p := range w.Live(s) {
		if p.Spec.Node == board {
			out = append(out, p)
		}
	}
	return out
}

// Converged reports whether the fleet runs w exactly as declared: every one
// of boards a Ready node; exactly Replicas live pods, all Running and
// ready; the service listing exactly their board IP:port; and systemd
// agreeing: on each board exactly the units of the pods bound there are
// active and loaded, and no other unit file of the deployment is left.
// units are FleetUnits over boards. The status says what is missing.
func (w Workload) Converged(s Snapshot, units map[string]BoardUnits, boards []string) (bool, string) {
	if ok, why := AllReady(s.Nodes, boards); !ok {
		return false, why
	}
	live := w.Live(s)
	var problems []string
	if len(live) != w.Replicas {
		problems = append(problems, fmt.Sprintf("%d live pods, want %d", len(live), w.Replicas))
	}
	wantUnits := map[string][]string{}
	var wantEP []string
	for _, p := range live {
		if p.Status.Phase != api.PodRunning || !p.Status.Ready {
			problems = append(problems, fmt.Sprintf("pod %s on %s: %s ready=%v", p.Metadata.Name, orNone(p.Spec.Node), orNone(string(p.Status.Phase)), p.Status.Ready))
			continue
		}
		wantUnits[p.Spec.Node] = append(wantUnits[p.Spec.Node], p.Status.Unit)
		wantEP = append(wantEP, w.Endpoint(p))
	}
	svc := s.Service(w.Service)
	if svc == nil {
		problems = append(problems, "service "+w.Service+" missing")
	} else {
		var got []string
		for _, e := range svc.Status.Endpoints {
			got = append(got, e.Address)
		}
		slices.Sort(got)
		slices.Sort(wantEP)
		if !slices.Equal(got, wantEP) {
			problems = append(problems, fmt.Sprintf("endpoints %v, want %v", got, wantEP))
		}
	}
	for _, b := range boards {
		u, ok := units[b]
		if !ok {
			problems = append(problems, b+": units not listed")
			continue
		}
		want := slices.Clone(wantUnits[b])
		slices.Sort(want)
		for _, l := range [][]string{u.Active, u.Loaded, u.Files} {
			got := slices.Clone(l)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s: units active %v loaded %v files %v, want %v", b, u.Active, u.Loaded, u.Files, want))
				break
			}
		}
	}
	if len(problems) > 0 {
		return false, strings.Join(problems, "; ")
	}
	return true, ""
}

// WaitConverged polls through via until w is Converged on every board of
// the fleet, and returns the last complete view it got (snapshot and
// units), also when it gives up.
func (f *Fleet) WaitConverged(ctx context.Context, via string, w Workload) (Snapshot, map[string]BoardUnits, error) {
	var s Snapshot
	var units map[string]BoardUnits
	err := Poll(ctx, 250*time.Millisecond, "a converged fleet ("+w.Deployment+")", func(ctx context.Context) (bool, string) {
		ss, err := f.Snapshot(ctx, via)
		if err != nil {
			return false, err.Error()
		}
		uu, err := f.FleetUnits(ctx, f.Boards, w.UnitPattern())
		if err != nil {
			return false, err.Error()
		}
		s, units = ss, uu
		return w.Converged(s, units, f.Boards)
	})
	return s, units, err
}

// Failover is what was seen after a fault on one board: each stage is the
// time from the fault to the first poll that saw it (0: never seen). The
// fault is the moment scripts/lab took the board's link down (it prints
// that time), or, from a lab that does not, when the fault command
// started. A poll's time is when its answers arrived, so each stage is an
// upper bound, late by at most one poll interval plus one call.
type Failover struct {
	Victim    string
	WasLeader bool
	// FaultDone is when the fault command (scripts/lab kill) returned,
	// and Cut when it took the board's link down, both from when it
	// started (Cut 0: not known).
	FaultDone, Cut time.Duration
	// NotReady: the victim's node is no longer Ready.
	NotReady time.Duration
	// Placed: Replicas live pods are bound to boards other than the victim
	// (Scheduled, Starting or Running).
	Placed time.Duration
	// Running: Replicas pods off the victim are Running (the placer saw
	// their units active).
	Running time.Duration
	// Endpoints: the service lists Replicas endpoints, none on the victim.
	Endpoints time.Duration
	// NewLeader: herdctl status names a leader other than the victim
	// (leader faults only).
	NewLeader time.Duration
	// Polls and PollErrors count the polls and those that failed;
	// PollTime is the time they took together (each poll is three herdctl
	// calls in parallel, plus herdctl status for a leader fault).
	Polls, PollErrors int
	PollTime          time.Duration
	// LastError is the last poll error.
	LastError string
}

// Done reports whether every stage was seen.
func (r Failover) Done() bool {
	return r.NotReady > 0 && r.Placed > 0 && r.Running > 0 && r.Endpoints > 0 && (!r.WasLeader || r.NewLeader > 0)
}

// Missing names the stages not seen.
func (r Failover) Missing() []string {
	var m []string
	add := func(d time.Duration, name string) {
		if d == 0 {
			m = append(m, name)
		}
	}
	add(r.NotReady, "NotReady")
	add(r.Placed, "Placed")
	add(r.Running, "Running")
	add(r.Endpoints, "Endpoints")
	if r.WasLeader {
		add(r.NewLeader, "NewLeader")
	}
	return m
}

func (r Failover) String() string {
	role := "worker"
	if r.WasLeader {
		role = "leader"
	}
	s := fmt.Sprintf("%s %s: NotReady %s, placed %s, running %s, endpoints %s", role, r.Victim,
		fmtStage(r.NotReady), fmtStage(r.Placed), fmtStage(r.Running), fmtStage(r.Endpoints))
	if r.WasLeader {
		s += ", new leader " + fmtStage(r.NewLeader)
	}
	return s + fmt.Sprintf(" (%d polls, %d failed; link cut %s after the kill began, which took %s)", r.Polls, r.PollErrors, fmtStage(r.Cut), fmtStage(r.FaultDone))
}

// linkDownRE matches scripts/lab's "bN: link down at EPOCH" line.
var linkDownRE = regexp.MustCompile(`lab: (\S+): link down at ([0-9]+)\.([0-9]{6})`)

// linkDown returns when the fault command's output says victim's link went
// down.
func linkDown(out, victim string) (time.Time, bool) {
	for _, m := range linkDownRE.FindAllStringSubmatch(out, -1) {
		if m[1] != victim {
			continue
		}
		sec, err1 := strconv.ParseInt(m[2], 10, 64)
		us, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 == nil && err2 == nil {
			return time.Unix(sec, us*1000), true
		}
	}
	return time.Time{}, false
}

// fromCut times every stage of r from the link cut at cut instead of from
// the fault command's start (cut after start).
func (r *Failover) fromCut(cut time.Duration) {
	if cut <= 0 {
		return
	}
	r.Cut = cut
	for _, d := range []*time.Duration{&r.NotReady, &r.Placed, &r.Running, &r.Endpoints, &r.NewLeader} {
		if *d > 0 {
			*d = max(*d-cut, time.Millisecond)
		}
	}
}

func fmtStage(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// PullPower pulls the power on victim (scripts/lab kill) and polls through
// via (a server other than the victim) every interval until every stage of
// the failover of w has been seen or ctx ends; the polls start at once,
// while the kill is still running. wasLeader says whether the victim was
// the leader (then the new leader is watched too).
func (f *Fleet) PullPower(ctx context.Context, victim, via string, wasLeader bool, w Workload, interval time.Duration) (Failover, error) {
	return f.watchFault(ctx, victim, via, wasLeader, w, interval, func(ctx context.Context) (string, error) {
		f.DropForward(victim)
		return f.Lab(ctx, "kill", victim)
	})
}

// PartitionAway cuts victim off alone (scripts/lab partition) and watches
// the failover like PullPower. The partition stays until Heal.
func (f *Fleet) PartitionAway(ctx context.Context, victim, via string, wasLeader bool, w Workload, interval time.Duration) (Failover, error) {
	return f.watchFault(ctx, victim, via, wasLeader, w, interval, func(ctx context.Context) (string, error) {
		f.DropForward(victim)
		return f.Lab(ctx, "partition", victim)
	})
}

// watchFault runs fault (which takes victim down) and meanwhile polls
// through via every interval until every stage of the failover of w has
// been seen after the fault returned, the fault failed, or ctx ended; the
// stages are timed from the link cut when the fault's output says when it
// was.
func (f *Fleet) watchFault(ctx context.Context, victim, via string, wasLeader bool, w Workload, interval time.Duration, fault func(context.Context) (string, error)) (Failover, error) {
	r := Failover{Victim: victim, WasLeader: wasLeader}
	if via == victim {
		return r, fmt.Errorf("e2e: polling through the victim %s", victim)
	}
	victimIP := BoardIP(victim)
	start := time.Now()
	faultErr := make(chan error, 1)
	var faultOut string
	go func() {
		out, err := fault(ctx)
		faultOut = out
		faultErr <- err
	}()
	var faultDone time.Time
	var failed error
	err := Poll(ctx, interval, "failover from "+victim, func(ctx context.Context) (bool, string) {
		select {
		case err := <-faultErr:
			faultDone = time.Now()
			if err != nil {
				failed = err
				return true, ""
			}
		default:
		}
		r.Polls++
		pollStart := time.Now()
		defer func() { r.PollTime += time.Since(pollStart) }()
		s, newLeader, err := f.pollFailover(ctx, via, victim, wasLeader && r.NewLeader == 0)
		at := time.Since(start)
		if err != nil {
			r.PollErrors++
			r.LastError = err.Error()
			return false, err.Error()
		}
		if newLeader {
			r.NewLeader = time.Since(start)
		}
		r.observe(s, w, victimIP, at)
		if r.Done() && !faultDone.IsZero() {
			return true, ""
		}
		return false, fmt.Sprintf("missing %v after %.1fs (poll errors %d: %s)", r.Missing(), at.Seconds(), r.PollErrors, orNone(r.LastError))
	})
	if faultDone.IsZero() { // the fault ends with ctx at the latest
		if e := <-faultErr; e != nil {
			failed = e
		}
		faultDone = time.Now()
	}
	r.FaultDone = faultDone.Sub(start)
	if t, ok := linkDown(faultOut, victim); ok {
		r.fromCut(t.Sub(start))
	}
	if failed != nil {
		return r, fmt.Errorf("e2e: fault on %s: %w", victim, failed)
	}
	return r, err
}

// pollFailover reads a snapshot through via and, when watchLeader, the
// leader at the same time; newLeader says whether a leader other than
// victim was read.
func (f *Fleet) pollFailover(ctx context.Context, via, victim string, watchLeader bool) (s Snapshot, newLeader bool, err error) {
	var leader string
	var leaderErr error
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		if watchLeader {
			leader, leaderErr = f.Leader(ctx, via)
		}
	}()
	s, err = f.Snapshot(ctx, via)
	<-leaderDone
	return s, watchLeader && leaderErr == nil && leader != "" && leader != victim, err
}

// observe records at as the time of each stage of the failover that s
// shows for the first time: the victim not Ready, w's replicas placed and
// running on other boards, and the service's endpoints all off the victim
// (whose IP is victimIP).
func (r *Failover) observe(s Snapshot, w Workload, victimIP string, at time.Duration) {
	victim := r.Victim
	if n := s.Node(victim); r.NotReady == 0 && n != nil && n.Status.Phase != api.NodeReady {
		r.NotReady = at
	}
	placed, running := 0, 0
	for _, p := range w.Live(s) {
		if p.Spec.Node == "" || p.Spec.Node == victim {
			continue
		}
		if p.Status.Phase.Occupies() {
			placed++
		}
		if p.Status.Phase == api.PodRunning {
			running++
		}
	}
	if r.Placed == 0 && placed >= w.Replicas {
		r.Placed = at
	}
	if r.Running == 0 && running >= w.Replicas {
		r.Running = at
	}
	if svc := s.Service(w.Service); r.Endpoints == 0 && svc != nil && len(svc.Status.Endpoints) == w.Replicas {
		clean := true
		for _, e := range svc.Status.Endpoints {
			host, _, _ := net.SplitHostPort(e.Address)
			if e.Node == victim || host == victimIP {
				clean = false
			}
		}
		if clean {
			r.Endpoints = at
		}
	}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds; 0
// for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}
