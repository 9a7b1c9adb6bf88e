//go:build e2e

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "member" {
		os.Exit(runMember(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options of a measurement run.
type options struct {
	sizes    []int
	idle     time.Duration
	settle   time.Duration
	detect   int
	wave     int
	replicas float64
	timing   string
	dir      string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("scaletool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	sizes := fs.String("sizes", "10,25,50,100", "fleet sizes (boards, servers included), comma-separated")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "idle window per size")
	fs.DurationVar(&o.settle, "settle", 15*time.Second, "pause after the fleet converged, before the idle window")
	fs.IntVar(&o.detect, "detect", 20, "failure detections at the largest size (0: none)")
	fs.IntVar(&o.wave, "wave", 20, "boards killed at once at the largest size (0: no wave)")
	fs.Float64Var(&o.replicas, "replicas", 0.6, "replicas of the deployment, as a fraction of the boards")
	fs.StringVar(&o.timing, "timing", "lan", "gossip preset: lan (what boards use) or local")
	fs.StringVar(&o.dir, "dir", "", "work directory (default: a new temporary one, removed at the end)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 || n > 750 {
			return o, fmt.Errorf("--sizes: %q: want a number of boards from 3 to 750", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if _, err := timingOf(o.timing); err != nil {
		return o, fmt.Errorf("--timing: %w", err)
	}
	if o.replicas <= 0 || o.replicas > 5 {
		return o, fmt.Errorf("--replicas %v: want a fraction in (0, 5]", o.replicas)
	}
	if o.idle <= 0 || o.settle < 0 || o.detect < 0 || o.wave < 0 {
		return o, fmt.Errorf("--idle must be positive, --settle, --detect and --wave not negative")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "scaletool:", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "scaletool:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "herd-scale-"); err != nil {
			fmt.Fprintln(stderr, "scaletool:", err)
			return 2
		}
		defer os.RemoveAll(dir)
	}
	var results []sizeResult
	largest := o.sizes[0]
	for _, n := range o.sizes {
		largest = max(largest, n)
	}
	var extra *largeResult
	for _, n := range o.sizes {
		r, large, err := measureSize(ctx, self, dir, n, o, n == largest, stderr)
		if large != nil {
			extra = large
		}
		if err != nil {
			fmt.Fprintf(stderr, "scaletool: %d boards: %v\n", n, err)
			report(stdout, o, results, extra) // what was measured so far
			return 1
		}
		results = append(results, r)
		fmt.Fprintf(stderr, "scaletool: %d boards: leader %s CPU %.2f%% RSS %.1f MB; followers %.2f%%; workers %.1f%%; gossip %.0f B/s per board; machine busy %.0f%%\n",
			n, r.leader, r.leaderCPU, r.leaderRSS, r.followerCPU, r.workersCPU, r.gossipWorker, r.machineBusy)
	}
	report(stdout, o, results, extra)
	return 0
}
