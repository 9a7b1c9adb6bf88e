//go:build e2e

// Command benchfailover measures how fast herd recovers from a power pull
// on the lab: K pulls, alternately on a worker board running a pod and on
// the leader's board, each timed from the moment the lab cut the board's
// link (the kill's start when the lab does not say) to the node going NotReady,
// the replacement pod placed, its unit active (pod Running) and the
// service endpoints updated. scripts/bench-failover runs it (as root).
//
//	benchfailover [--reuse] [--keep] [--dir DIR] [--interval 100ms] [K]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/e2e"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/raftstore"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the command line.
type options struct {
	k        int
	reuse    bool
	keep     bool
	dir      string
	interval time.Duration
	boards   int
	servers  int
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{k: 10}
	fs := flag.NewFlagSet("bench-failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.reuse, "reuse", false, "use the running lab and the herdctl config in --dir (from an earlier --keep run) instead of a fresh lab")
	fs.BoolVar(&o.keep, "keep", false, "leave the lab up at the end (for --reuse)")
	fs.StringVar(&o.dir, "dir", "/tmp/herd-bench", "herdctl config (config.toml) and cluster state of the bench's lab")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "poll interval")
	fs.IntVar(&o.boards, "boards", 4, "boards in a fresh lab")
	fs.IntVar(&o.servers, "servers", 3, "Raft servers among them (the others are workers)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scripts/bench-failover [--reuse] [--keep] [--dir DIR] [--interval D] [K]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		k, err := strconv.Atoi(fs.Arg(0))
		if err != nil || k < 1 {
			return o, fmt.Errorf("K %q: want a positive number of power pulls", fs.Arg(0))
		}
		o.k = k
	default:
		return o, fmt.Errorf("too many arguments: %q", fs.Args())
	}
	if o.interval <= 0 {
		return o, fmt.Errorf("--interval %v: want a positive duration", o.interval)
	}
	if o.servers < 3 || o.boards <= o.servers {
		return o, fmt.Errorf("--boards %d --servers %d: want at least 3 servers and a worker", o.boards, o.servers)
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench-failover:", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "bench-failover: needs root (network namespaces, systemd-nspawn)")
		return 1
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(stderr, "bench-failover:", err)
		return 1
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	f := e2e.NewFleet(root, o.dir, o.boards, o.servers, logf)
	if f.LabScript, err = e2e.SnapshotLab(root, o.dir); err != nil {
		fmt.Fprintln(stderr, "bench-failover: copying scripts/lab:", err)
		return 1
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if o.keep || o.reuse {
				f.DropForwards()
				logf("lab left up (herdctl --config %s)", f.ConfigPath())
				return
			}
			if err := f.Stop(); err != nil {
				logf("lab down: %v", err)
			} else {
				logf("lab down")
			}
		})
	}
	defer stop()
	e2e.OnInterrupt(func(s os.Signal) {
		logf("%v: stopping", s)
		stop()
		os.Exit(130)
	})

	ctx := context.Background()
	if o.reuse {
		if _, err := os.Stat(f.ConfigPath()); err != nil {
			fmt.Fprintf(stderr, "bench-failover: --reuse: %v (run once with --keep first)\n", err)
			return 1
		}
		logf("reusing the running lab (herdctl --config %s)", f.ConfigPath())
	} else {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := f.Start(sctx)
		cancel()
		if err != nil {
			logf("starting the lab: %v", err)
			return 1
		}
		logf("lab up, herd bootstrapped")
	}
	w := e2e.Web
	via := f.ServerBoards()[0]
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	out, err := f.Herdctl(actx, via, "", "apply", "-f", filepath.Join(root, "examples", "web.toml"), "--wait", "--timeout", "2m")
	if err == nil {
		_, _, err = f.WaitConverged(actx, via, w)
	}
	cancel()
	if err != nil {
		logf("apply examples/web.toml: %v\n%s", err, out)
		return 1
	}
	logf("examples/web.toml running: %d replicas", w.Replicas)

	var results []pull
	for i := range o.k {
		leaderPull := i%2 == 1
		p, err := onePull(ctx, f, w, leaderPull, o.interval, logf)
		if err != nil {
			logf("pull %d: %v", i+1, err)
			printReport(stdout, o, results)
			return 1
		}
		results = append(results, p)
		logf("pull %d/%d: %v", i+1, o.k, p.Failover)
	}
	printReport(stdout, o, results)
	return 0
}

// pull is one power pull and what was measured.
type pull struct {
	e2e.Failover
	// lostPods is how many pods of the workload ran on the victim.
	lostPods int
}

// onePull pulls the power on a worker board running a pod (leaderPull
// false; a Raft follower with a pod when no worker has one) or on the
// leader's board, measures, boots the board back and waits until the
// fleet has converged again.
func onePull(ctx context.Context, f *e2e.Fleet, w e2e.Workload, leaderPull bool, interval time.Duration, logf func(string, ...any)) (pull, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	via := f.ServerBoards()[0]
	s, _, err := f.WaitConverged(ctx, via, w)
	if err != nil {
		return pull{}, err
	}
	leader, err := f.Leader(ctx, via)
	if err != nil || leader == "" {
		return pull{}, fmt.Errorf("no leader: %v", err)
	}
	victim := ""
	if leaderPull {
		victim = leader
	} else {
		for _, workersFirst := range []bool{true, false} {
			for _, b := range f.Boards {
				if victim == "" && b != leader && f.IsServer(b) != workersFirst && len(w.PodsOn(s, b)) > 0 {
					victim = b
				}
			}
		}
		if victim == "" {
			return pull{}, fmt.Errorf("no board but the leader runs a pod")
		}
	}
	pollVia := ""
	for _, b := range f.ServerBoards() {
		if b != victim && pollVia == "" {
			pollVia = b
		}
	}
	p := pull{lostPods: len(w.PodsOn(s, victim))}
	p.Failover, err = f.PullPower(ctx, victim, pollVia, leaderPull, w, interval)
	if err != nil {
		return p, fmt.Errorf("%v: %w", p.Failover, err)
	}
	if err := f.Boot(ctx, victim); err != nil {
		return p, err
	}
	if _, _, err := f.WaitConverged(ctx, pollVia, w); err != nil {
		return p, fmt.Errorf("after booting %s again: %w", victim, err)
	}
	return p, nil
}

// stage names a measured stage and picks it from a pull.
type stage struct {
	name string
	of   func(pull) (time.Duration, bool) // false: not applicable to this pull
}

var stages = []stage{
	{"node NotReady", func(p pull) (time.Duration, bool) { return p.NotReady, true }},
	{"new leader", func(p pull) (time.Duration, bool) { return p.NewLeader, p.WasLeader }},
	{"replacement placed", func(p pull) (time.Duration, bool) { return p.Placed, p.lostPods > 0 }},
	{"replacement Running (unit active)", func(p pull) (time.Duration, bool) { return p.Running, p.lostPods > 0 }},
	{"endpoints updated", func(p pull) (time.Duration, bool) { return p.Endpoints, p.lostPods > 0 }},
}

func printReport(w io.Writer, o options, results []pull) {
	fmt.Fprintf(w, "\n## Power pulls: %d (interval %v)\n\n", len(results), o.interval)
	fmt.Fprintln(w, "| # | board | role | pods lost | NotReady | new leader | placed | Running | endpoints |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var polls int
	var pollTime time.Duration
	for i, p := range results {
		role := "worker"
		if p.WasLeader {
			role = "leader"
		}
		nl := "-"
		if p.WasLeader {
			nl = secs(p.NewLeader)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %d | %s | %s | %s | %s | %s |\n", i+1, p.Victim, role, p.lostPods,
			secs(p.NotReady), nl, secs(p.Placed), secs(p.Running), secs(p.Endpoints))
		polls += p.Polls
		pollTime += p.PollTime
	}
	for _, role := range []string{"worker", "leader"} {
		var rs []pull
		for _, p := range results {
			if p.WasLeader == (role == "leader") {
				rs = append(rs, p)
			}
		}
		fmt.Fprintf(w, "\n### %s pulls (%d)\n\n", role, len(rs))
		fmt.Fprintln(w, "| stage (from the link cut) | n | p50 | p95 | max |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, st := range stages {
			var ds []time.Duration
			for _, p := range rs {
				if d, ok := st.of(p); ok && d > 0 {
					ds = append(ds, d)
				}
			}
			if len(ds) == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", st.name, len(ds),
				secs(e2e.Percentile(ds, 50)), secs(e2e.Percentile(ds, 95)), secs(e2e.Percentile(ds, 100)))
		}
	}
	if polls > 0 {
		fmt.Fprintf(w, "\nPolls: %d, one every %v plus its own time (mean %.0f ms: three herdctl calls in parallel through an ssh -L forward to a surviving server's API, plus herdctl status on leader pulls). A stage is stamped when the poll that first shows it returns: each number is late by at most about one interval plus one poll.\n",
			polls, o.interval, float64(pollTime.Milliseconds())/float64(polls))
	}
	fmt.Fprintln(w, "\n### Settings")
	lt := gossip.LANTiming()
	fmt.Fprintf(w, "\n- gossip.LANTiming: ProbeInterval %v, ProbeTimeout %v, IndirectChecks %d, SuspicionMult %d, SuspicionMaxTimeoutMult %d, GossipInterval %v, GossipNodes %d, RetransmitMult %d, GossipToTheDeadTime %v, PushPullInterval %v, TCPTimeout %v\n",
		lt.ProbeInterval, lt.ProbeTimeout, lt.IndirectChecks, lt.SuspicionMult, lt.SuspicionMaxTimeoutMult, lt.GossipInterval, lt.GossipNodes, lt.RetransmitMult, lt.GossipToTheDeadTime, lt.PushPullInterval, lt.TCPTimeout)
	rc := raftstore.DefaultConfig()
	fmt.Fprintf(w, "- raftstore.DefaultConfig: HeartbeatTimeout %v, HeartbeatInterval %v, ElectionTimeout %v, LeaderLeaseTimeout %v, CommitTimeout %v\n",
		rc.HeartbeatTimeout, rc.HeartbeatInterval, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout)
	pc := placer.DefaultConfig()
	var quick []string
	for _, d := range pc.QuickObserve {
		quick = append(quick, d.String())
	}
	fmt.Fprintf(w, "- placer.DefaultConfig: ObserveInterval %v (jitter %.0f%%), QuickObserve [%s], RetryBase %v, RetryMax %v\n",
		pc.ObserveInterval, pc.ObserveJitter*100, strings.Join(quick, " "), pc.RetryBase, pc.RetryMax)
}

func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
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
