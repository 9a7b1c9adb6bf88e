//go:build e2e

// Command chaostool is the nemesis of scripts/chaos: on a lab of boards
// (default 5: b1-b3 Raft servers, b4-b5 workers) running examples/web.toml
// scaled to one replica a board, it runs N fault cycles, each one of power pulls (of a worker, a
// follower, the leader's board), partitions (of a worker, a follower, the
// leader's board; healed), kill -9 and SIGSTOP of the herd agent (of the
// leader's board and of a worker), with scale writes through a server
// other than the victim every 2 s while the fault lasts. The writes scale a
// second deployment (chaos-writes, whose pods match no node and never
// run), so the counted one's declared count stays fixed and every unit
// above it is an overcount.
//
// Ground truth is systemd on the boards (e2e.GroundTruth: every board's
// active herd units, sampled from its own network namespace), never herd's
// API. It reports, per cycle and in all: overcount (active units above the
// declared count, over all boards and over the boards the leader's side
// can reach), units of one pod active on two boards at once (and for how
// long), dips below the declared count on the reachable boards once they
// had converged, acknowledged writes lost (the next read, and the read at
// the end of each cycle, must show the last acknowledged count), and the
// latency of the writes acknowledged during faults. On a dip or a
// duplicate it saves the boards' journals of the window.
//
//	chaostool [--dir DIR] [--boards 5] [--servers 3] [--interval 300ms] [--hold 10s] [N]
//
// Exit status 1 when a hard invariant broke (a pod on two boards at once,
// a dip, a lost write), 2 when the run itself failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/e2e"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	n        int
	dir      string
	boards   int
	servers  int
	interval time.Duration
	hold     time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{n: 16}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", "/tmp/herd-chaos", "herdctl config, cluster state and saved journals of the run")
	fs.IntVar(&o.boards, "boards", 5, "boards in the lab")
	fs.IntVar(&o.servers, "servers", 3, "Raft servers among them (the others are workers)")
	fs.DurationVar(&o.interval, "interval", 300*time.Millisecond, "how often each board's systemd is sampled")
	fs.DurationVar(&o.hold, "hold", 10*time.Second, "how long each fault lasts (writes go on meanwhile)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scripts/chaos [--dir DIR] [--boards 5] [--servers 3] [--interval 300ms] [--hold 10s] [N]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		n, err := strconv.Atoi(fs.Arg(0))
		if err != nil || n < 1 {
			return o, fmt.Errorf("N %q: want a positive number of fault cycles", fs.Arg(0))
		}
		o.n = n
	default:
		return o, fmt.Errorf("too many arguments: %q", fs.Args())
	}
	if o.interval < 50*time.Millisecond || o.hold < 2*time.Second {
		return o, fmt.Errorf("--interval %v --hold %v: want an interval of at least 50ms and a hold of at least 2s", o.interval, o.hold)
	}
	if o.servers < 3 || o.boards <= o.servers {
		return o, fmt.Errorf("--boards %d --servers %d: want at least 3 servers and a worker", o.boards, o.servers)
	}
	return o, nil
}

// writesDeployment is what the writes scale: its pods match no node, so
// they stay Pending and no unit ever runs.
const (
	writesDeployment = "chaos-writes"
	writesManifest   = `[[deployment]]
name = "chaos-writes"
replicas = 0
[deployment.template]
exec = ["/bin/sleep", "infinity"]
node_selector = { "chaos.herd.dev/none" = "none" }
`
)

// kind is one kind of fault.
type kind struct {
	name string
	// who picks the victim: "worker", "follower" or "leader".
	who string
	// what: "pull", "partition", "kill9" or "stop".
	what string
}

// kinds are run in this order, round and round.
var kinds = []kind{
	{"power pull of a worker", "worker", "pull"},
	{"partition of a worker", "worker", "partition"},
	{"kill -9 of the leader's agent", "leader", "kill9"},
	{"power pull of a follower", "follower", "pull"},
	{"SIGSTOP of the leader's agent", "leader", "stop"},
	{"partition of the leader's board", "leader", "partition"},
	{"kill -9 of a worker's agent", "worker", "kill9"},
	{"power pull of the leader's board", "leader", "pull"},
	{"SIGSTOP of a worker's agent", "worker", "stop"},
	{"partition of a follower", "follower", "partition"},
}

// nemesis is the state of one run.
type nemesis struct {
	o      options
	f      *e2e.Fleet
	w      e2e.Workload
	gt     *e2e.GroundTruth
	writes *e2e.WriteLog
	away   e2e.Intervals
	off    e2e.Intervals
	logf   func(string, ...any)

	mu        sync.Mutex
	disrupted []time.Time
}

// cycle is what one fault cycle did and saw.
type cycle struct {
	n            int
	kind         kind
	victim       string
	leader       string
	start, end   time.Time
	faultAt      time.Time
	recoverAt    time.Time
	converged    time.Duration // from the recovery to a converged fleet (-1: never)
	verdict      e2e.Verdict
	writes       []e2e.Write
	lost         []string
	journals     string
	harnessError string
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	root, err := prepare(o)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	f := e2e.NewFleet(root, o.dir, o.boards, o.servers, logf)
	if f.LabScript, err = e2e.SnapshotLab(root, o.dir); err != nil {
		fmt.Fprintln(stderr, "chaos: copying scripts/lab:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e2e.OnInterrupt(func(s os.Signal) {
		logf("%v: stopping", s)
		cancel()
	})

	sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
	err = f.Start(sctx)
	scancel()
	if err != nil {
		logf("starting the lab: %v", err)
		return 2
	}
	defer f.DropForwards()
	// One replica a board: every victim runs a pod when the fault hits.
	w := e2e.Web
	w.Replicas = o.boards
	if out, err := deploy(ctx, f, root, w); err != nil {
		logf("apply examples/web.toml: %v\n%s", err, out)
		return 2
	}
	logf("examples/web.toml running: %d replicas on %d boards (%d servers)", w.Replicas, o.boards, o.servers)

	nm := &nemesis{o: o, f: f, w: w, logf: logf, writes: &e2e.WriteLog{}}
	nm.gt = f.WatchUnits(ctx, f.Boards, o.interval)
	runStart := time.Now()
	cycles, failed := nm.runCycles(ctx)
	runEnd := time.Now()
	nm.gt.Stop()
	total := e2e.Check(nm.truth(), runStart, runEnd)
	broken := printReport(stdout, o, cycles, total, nm.writes.Writes(), runEnd.Sub(runStart))
	switch {
	case broken:
		return 1
	case failed || len(cycles) < o.n:
		return 2
	}
	return 0
}

// prepare checks that the run can start (as root, from the repository)
// and clears the journals an earlier run saved in o.dir; it returns the
// repository's root.
func prepare(o options) (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("needs root (network namespaces, systemd-nspawn)")
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return "", err
	}
	// Journals saved by an earlier run would pass for this one's.
	if old, err := filepath.Glob(filepath.Join(o.dir, "journals-cycle-*")); err == nil {
		for _, d := range old {
			_ = os.RemoveAll(d)
		}
	}
	return root, nil
}

// deploy applies examples/web.toml scaled to w.Replicas and the writes'
// deployment, and waits (at most 3 minutes) for a converged fleet; on an
// error it also returns the output of the last herdctl run.
func deploy(ctx context.Context, f *e2e.Fleet, root string, w e2e.Workload) ([]byte, error) {
	actx, acancel := context.WithTimeout(ctx, 3*time.Minute)
	defer acancel()
	out, err := f.Herdctl(actx, f.ServerBoards()[0], "", "apply", "-f", filepath.Join(root, "examples", "web.toml"), "--wait", "--timeout", "2m")
	if err == nil {
		out, err = f.Herdctl(actx, f.ServerBoards()[0], "", "scale", "deployment", w.Deployment, "--replicas", strconv.Itoa(w.Replicas))
	}
	if err == nil {
		out, err = f.Herdctl(actx, f.ServerBoards()[0], writesManifest, "apply", "-f", "-")
	}
	if err == nil {
		_, _, err = f.WaitConverged(actx, f.ServerBoards()[0], w)
	}
	return out, err
}

// runCycles runs the o.n fault cycles, the kinds in turn, until ctx ends or
// the lab cannot be restored after a cycle that went wrong; failed says
// whether a cycle went wrong.
func (nm *nemesis) runCycles(ctx context.Context) (cycles []cycle, failed bool) {
	o, logf := nm.o, nm.logf
	for i := range o.n {
		if ctx.Err() != nil {
			break
		}
		c := nm.cycle(ctx, i+1, kinds[i%len(kinds)])
		cycles = append(cycles, c)
		logf("cycle %d/%d %s of %s: %s", i+1, o.n, c.kind.name, c.victim, c.summary())
		if c.harnessError != "" {
			failed = true
			logf("cycle %d: %s; restoring the lab", c.n, c.harnessError)
			if err := nm.restore(ctx); err != nil {
				logf("restore: %v: stopping", err)
				break
			}
		}
	}
	return cycles, failed
}

func (nm *nemesis) truth() e2e.Truth {
	nm.mu.Lock()
	dis := slices.Clone(nm.disrupted)
	nm.mu.Unlock()
	return e2e.Truth{
		Samples:   nm.gt.Samples(),
		Boards:    nm.f.Boards,
		Owner:     nm.w.Owner(),
		Stale:     3 * nm.o.interval,
		Away:      func(b string, t time.Time) bool { return nm.away.In(b, t) || nm.off.In(b, t) },
		Off:       nm.off.In,
		Declared:  func(time.Time) (int, int) { return nm.w.Replicas, nm.w.Replicas },
		Disrupted: dis,
	}
}

func (c cycle) summary() string {
	v := c.verdict
	ok, failed := 0, 0
	for _, w := range c.writes {
		if w.Err == nil {
			ok++
		} else {
			failed++
		}
	}
	conv := "never"
	if c.converged >= 0 {
		conv = fmt.Sprintf("%.1fs", c.converged.Seconds())
	}
	return fmt.Sprintf("leader %s; overcount all %d (longest %.1fs), reachable %d (longest %.1fs); duplicates %d (longest %.1fs); dips %d; writes %d ok %d failed, lost %d; converged %s after recovery",
		orNone(c.leader), v.OverAll, e2e.Longest(v.OverAllEps).Duration().Seconds(), v.OverReach, e2e.Longest(v.OverReachEps).Duration().Seconds(),
		len(v.Duplicates), e2e.Longest(v.Duplicates).Duration().Seconds(), len(v.Dips), ok, failed, len(c.lost), conv)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// cycle runs one fault cycle: wait for a converged fleet, inject the
// fault, write while it holds, set the count back to the baseline, recover,
// wait for a converged fleet and watch 3 s more.
func (nm *nemesis) cycle(ctx context.Context, n int, k kind) cycle {
	c := cycle{n: n, kind: k, converged: -1, start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	f := nm.f
	s, _, err := f.WaitConverged(ctx, nm.anyServer(""), nm.w)
	if err != nil {
		c.harnessError = "not converged before the fault: " + err.Error()
		c.end = time.Now()
		return c
	}
	c.leader, err = f.Leader(ctx, nm.anyServer(""))
	if err != nil || c.leader == "" {
		c.harnessError = fmt.Sprintf("no leader before the fault: %v", err)
		c.end = time.Now()
		return c
	}
	c.victim = nm.pick(k.who, c.leader, s)
	c.start = time.Now()

	// The fault.
	nm.mu.Lock()
	nm.disrupted = append(nm.disrupted, time.Now())
	nm.mu.Unlock()
	c.faultAt = time.Now()
	if err := nm.inject(ctx, k.what, c.victim); err != nil {
		c.harnessError = "fault: " + err.Error()
	}
	// Writes while it holds.
	stop := make(chan struct{})
	done := make(chan []e2e.Write)
	go func() { done <- nm.writer(ctx, c.victim, stop) }()
	select {
	case <-time.After(nm.o.hold): // the fault's duration
	case <-ctx.Done():
	}
	close(stop)
	c.writes = <-done
	// The reachable boards back at (at least) the declared count before
	// the recovery, if they get there: a dip after it is herd's.
	nm.waitReachable(ctx, nm.w.Replicas, 15*time.Second)
	c.recoverAt = time.Now()
	if err := nm.recover(ctx, k.what, c.victim); err != nil && c.harnessError == "" {
		c.harnessError = "recovery: " + err.Error()
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	_, _, err = f.WaitConverged(wctx, nm.anyServer(""), nm.w)
	wcancel()
	if err == nil {
		c.converged = time.Since(c.recoverAt)
	} else if c.harnessError == "" {
		c.harnessError = "not converged after the recovery: " + err.Error()
	}
	select { // watch a while longer
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	c.lost = nm.checkWrites(ctx, c.writes)
	c.end = time.Now()
	c.verdict = e2e.Check(nm.truth(), c.start, c.end)
	if len(c.verdict.Dips) > 0 || len(c.verdict.Duplicates) > 0 {
		c.journals = nm.saveJournals(ctx, n, c.start, c.end)
	}
	return c
}

// pick chooses the victim: the leader, a follower or a worker, preferring
// one that runs a pod.
func (nm *nemesis) pick(who, leader string, s e2e.Snapshot) string {
	var cands []string
	for _, b := range nm.f.Boards {
		switch {
		case who == "leader" && b == leader,
			who == "follower" && b != leader && nm.f.IsServer(b),
			who == "worker" && !nm.f.IsServer(b):
			cands = append(cands, b)
		}
	}
	slices.SortStableFunc(cands, func(a, b string) int {
		return len(nm.w.PodsOn(s, b)) - len(nm.w.PodsOn(s, a))
	})
	return cands[0]
}

// anyServer is a random server other than not.
func (nm *nemesis) anyServer(not string) string {
	var cands []string
	for _, b := range nm.f.ServerBoards() {
		if b != not {
			cands = append(cands, b)
		}
	}
	return cands[rand.IntN(len(cands))]
}

func (nm *nemesis) agentSignal(ctx context.Context, board, sig string) error {
	_, err := nm.f.SSHInside(ctx, board, "", "systemctl kill --kill-whom=main -s "+sig+" herd.service")
	return err
}

func (nm *nemesis) inject(ctx context.Context, what, victim string) error {
	now := time.Now()
	switch what {
	case "pull":
		nm.away.Begin(victim, now)
		err := nm.f.Kill(ctx, victim)
		nm.off.Begin(victim, time.Now())
		return err
	case "partition":
		nm.away.Begin(victim, now)
		return nm.f.Partition(ctx, victim)
	case "kill9":
		return nm.agentSignal(ctx, victim, "KILL")
	case "stop":
		return nm.agentSignal(ctx, victim, "STOP")
	}
	return fmt.Errorf("unknown fault %q", what)
}

func (nm *nemesis) recover(ctx context.Context, what, victim string) error {
	switch what {
	case "pull":
		nm.off.End(victim, time.Now())
		err := nm.f.Boot(ctx, victim)
		nm.away.End(victim, time.Now())
		return err
	case "partition":
		err := nm.f.Heal(ctx)
		nm.away.End(victim, time.Now())
		return err
	case "stop":
		return nm.agentSignal(ctx, victim, "CONT")
	}
	return nil // kill -9: systemd restarts the agent
}

// restore brings the lab back to health after a cycle that went wrong.
func (nm *nemesis) restore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	for _, b := range nm.f.Boards {
		_ = nm.agentSignal(ctx, b, "CONT")
		nm.away.End(b, time.Now())
		nm.off.End(b, time.Now())
	}
	if err := nm.f.Heal(ctx); err != nil {
		return err
	}
	if _, err := nm.f.Lab(ctx, "up", strconv.Itoa(len(nm.f.Boards))); err != nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	s, _, err := nm.f.WaitConverged(wctx, nm.anyServer(""), nm.w)
	wcancel()
	if err == nil {
		return nil
	}
	// A board that never rejoined gossip: its agent joins again through its
	// seeds when restarted (as the e2e suite's restore does).
	for _, b := range nm.f.Boards {
		if n := s.Node(b); n == nil || n.Status.Phase != api.NodeReady {
			nm.logf("restore: %s not Ready: restarting its agent", b)
			if _, err := nm.f.SSHInside(ctx, b, "", "systemctl restart herd.service"); err != nil {
				return err
			}
		}
	}
	_, _, err = nm.f.WaitConverged(ctx, nm.anyServer(""), nm.w)
	return err
}

// writer scales chaos-writes every 2 s (1, 2, 3, 0, 1, …: each write
// changes the count) through a server other than the victim, until stop;
// each acknowledged write is read back at once through the same server.
func (nm *nemesis) writer(ctx context.Context, victim string, stop <-chan struct{}) []e2e.Write {
	var out []e2e.Write
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		cur, _ := nm.writes.Last()
		w := nm.scale(ctx, nm.anyServer(victim), (cur+1)%4)
		out = append(out, w)
		select {
		case <-stop:
			return out
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// scale writes one scale through via and, if acknowledged, reads it back.
func (nm *nemesis) scale(ctx context.Context, via string, replicas int) e2e.Write {
	w := e2e.Write{Start: time.Now(), Value: replicas, Via: via, ReadBack: -1}
	out, err := nm.f.Herdctl(ctx, via, "", "--timeout", "10s", "scale", "deployment", writesDeployment, "--replicas", strconv.Itoa(replicas))
	w.End = time.Now()
	if err != nil {
		w.Err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	nm.writes.Add(w)
	if w.Err == nil {
		if r, err := nm.readReplicas(ctx, via); err == nil {
			w.ReadBack = r
		}
	}
	return w
}

func (nm *nemesis) readReplicas(ctx context.Context, via string) (int, error) {
	out, err := nm.f.Herdctl(ctx, via, "", "--timeout", "5s", "get", "deployments", writesDeployment, "-o", "json")
	if err != nil {
		return -1, err
	}
	var d api.Deployment
	if err := json.Unmarshal(out, &d); err != nil {
		return -1, err
	}
	if d.Spec.Replicas == nil {
		return -1, errors.New("no spec.replicas")
	}
	return *d.Spec.Replicas, nil
}

// waitReachable waits (at most d) until the boards on the leader's side run
// at least n units by the latest samples.
func (nm *nemesis) waitReachable(ctx context.Context, n int, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = e2e.Poll(ctx, nm.o.interval, "", func(context.Context) (bool, string) {
		latest := map[string]e2e.UnitSample{}
		for _, s := range nm.gt.Samples() {
			latest[s.Board] = s
		}
		sum := 0
		now := time.Now()
		for b, s := range latest {
			if !nm.away.In(b, now) && !nm.off.In(b, now) {
				sum += len(s.Of(nm.w.Owner()))
			}
		}
		return sum >= n, ""
	})
}

// checkWrites says which acknowledged writes were lost: one whose read
// back showed another count, or, for the last one, a read now (through
// every server) that shows neither it nor a later failed write's count.
func (nm *nemesis) checkWrites(ctx context.Context, ws []e2e.Write) []string {
	var lost []string
	for _, w := range ws {
		if w.Err == nil && w.ReadBack >= 0 && w.ReadBack != w.Value {
			lost = append(lost, fmt.Sprintf("scale to %d through %s acknowledged at %s, read back %d", w.Value, w.Via, w.End.Format("15:04:05.000"), w.ReadBack))
		}
	}
	cur, maybe := nm.writes.Last()
	for _, via := range nm.f.ServerBoards() {
		var r int
		err := e2e.Poll(ctx, 500*time.Millisecond, "read replicas through "+via, func(ctx context.Context) (bool, string) {
			var err error
			r, err = nm.readReplicas(ctx, via)
			return err == nil, fmt.Sprint(err)
		})
		if err == nil && r != cur && !slices.Contains(maybe, r) {
			lost = append(lost, fmt.Sprintf("read through %s at the end of the cycle: replicas %d, last acknowledged %d", via, r, cur))
		}
	}
	return lost
}

// saveJournals writes every board's journal (herd and its units) of the
// window around a cycle into the run's folder and returns the folder.
func (nm *nemesis) saveJournals(ctx context.Context, n int, from, to time.Time) string {
	dir := filepath.Join(nm.o.dir, fmt.Sprintf("journals-cycle-%02d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	since, until := from.Add(-5*time.Second).Unix(), to.Add(2*time.Second).Unix()
	for _, b := range nm.f.Boards {
		out, err := nm.f.SSHInside(ctx, b, "", fmt.Sprintf("journalctl --no-pager -o short-precise --since @%d --until @%d -u herd.service -u 'herd-*.service'", since, until))
		if err != nil {
			out += "\n(journalctl: " + err.Error() + ")\n"
		}
		_ = os.WriteFile(filepath.Join(dir, b+".log"), []byte(out), 0o644)
	}
	var samples []string
	for _, s := range nm.gt.Samples() {
		if s.At.Before(from) || s.At.After(to) {
			continue
		}
		var us []string
		for _, u := range s.Units {
			us = append(us, fmt.Sprintf("%s(pid %d)", u.Pod, u.MainPID))
		}
		samples = append(samples, fmt.Sprintf("%s %s %s", s.At.Format("15:04:05.000"), s.Board, strings.Join(us, " ")))
	}
	_ = os.WriteFile(filepath.Join(dir, "samples.txt"), []byte(strings.Join(samples, "\n")+"\n"), 0o644)
	return dir
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// printReport writes the markdown report and says whether a hard
// invariant broke.
func printReport(w io.Writer, o options, cycles []cycle, total e2e.Verdict, writes []e2e.Write, took time.Duration) bool {
	fmt.Fprintf(w, "\n## Nemesis: %d fault cycles on %d boards (%d servers), %s\n\n", len(cycles), o.boards, o.servers, took.Round(time.Second))
	fmt.Fprintln(w, "| # | fault | victim | leader | writes ok/failed | ack max | overcount all (longest) | overcount reachable (longest) | on two boards (longest) | dips | lost | converged after recovery |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	var lat []time.Duration
	var failures []string
	lost := 0
	for _, c := range cycles {
		ok, failed := 0, 0
		var cl []time.Duration
		for _, wr := range c.writes {
			if wr.Err == nil {
				ok++
				cl = append(cl, wr.Latency())
			} else {
				failed++
				failures = append(failures, fmt.Sprintf("cycle %d (%s of %s): scale to %d through %s failed after %s: %v", c.n, c.kind.name, c.victim, wr.Value, wr.Via, secs(wr.Latency()), wr.Err))
			}
		}
		lat = append(lat, cl...)
		lost += len(c.lost)
		conv := "never"
		if c.converged >= 0 {
			conv = secs(c.converged)
		}
		v := c.verdict
		dup := "0"
		if len(v.Duplicates) > 0 {
			dup = fmt.Sprintf("%d (%s)", len(v.Duplicates), secs(e2e.Longest(v.Duplicates).Duration()))
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %d/%d | %s | %d (%s) | %d (%s) | %s | %d | %d | %s |\n", c.n, c.kind.name, c.victim, c.leader, ok, failed,
			secs(e2e.Percentile(cl, 100)), v.OverAll, secs(e2e.Longest(v.OverAllEps).Duration()), v.OverReach, secs(e2e.Longest(v.OverReachEps).Duration()),
			dup, len(v.Dips), len(c.lost), conv)
	}
	fmt.Fprintln(w)
	nOK := 0
	for _, wr := range writes {
		if wr.Err == nil {
			nOK++
		}
	}
	fmt.Fprintf(w, "- overcount, all boards: max %d; %d episodes, longest %s\n", total.OverAll, len(total.OverAllEps), secs(e2e.Longest(total.OverAllEps).Duration()))
	fmt.Fprintf(w, "- overcount, reachable boards: max %d; %d episodes, longest %s\n", total.OverReach, len(total.OverReachEps), secs(e2e.Longest(total.OverReachEps).Duration()))
	fmt.Fprintf(w, "- a pod's unit active on two boards at once: %d episodes, longest %s\n", len(total.Duplicates), secs(e2e.Longest(total.Duplicates).Duration()))
	for _, e := range total.Duplicates {
		fmt.Fprintf(w, "  - %s from %s for %s\n", e.What, e.From.Format("15:04:05.000"), secs(e.Duration()))
	}
	fmt.Fprintf(w, "- dips below the declared count on reachable boards once converged: %d\n", len(total.Dips))
	for _, e := range total.Dips {
		fmt.Fprintf(w, "  - %s from %s for %s\n", e.What, e.From.Format("15:04:05.000"), secs(e.Duration()))
	}
	fmt.Fprintf(w, "- acknowledged writes lost: %d (of %d acknowledged, %d writes)\n", lost, nOK, len(writes))
	for _, c := range cycles {
		for _, l := range c.lost {
			fmt.Fprintf(w, "  - cycle %d: %s\n", c.n, l)
		}
	}
	fmt.Fprintf(w, "- write acknowledgement during faults: n %d, p50 %s, p95 %s, max %s; %d writes failed\n", len(lat),
		secs(e2e.Percentile(lat, 50)), secs(e2e.Percentile(lat, 95)), secs(e2e.Percentile(lat, 100)), len(failures))
	for _, fl := range failures {
		fmt.Fprintf(w, "  - %s\n", oneLine(fl))
	}
	fmt.Fprintf(w, "- ground truth: %d moments (one per board sample, every %v per board); boards unknown (no fresh sample, not off) for %s in all\n",
		total.Moments, o.interval, secs(total.Unknown))
	for _, c := range cycles {
		if c.journals != "" {
			fmt.Fprintf(w, "- cycle %d: journals and samples in %s\n", c.n, c.journals)
		}
		if c.harnessError != "" {
			fmt.Fprintf(w, "- cycle %d: harness: %s\n", c.n, oneLine(c.harnessError))
		}
	}
	broken := len(total.Duplicates) > 0 || len(total.Dips) > 0 || lost > 0
	if broken {
		fmt.Fprintln(w, "\nFAIL: a hard invariant broke (a pod on two boards at once, a dip, or a lost write)")
	} else {
		fmt.Fprintln(w, "\nPASS: no pod on two boards at once, no dip, no lost write")
	}
	return broken
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// repoRoot is the directory holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run from the repository")
		}
		dir = parent
	}
}
