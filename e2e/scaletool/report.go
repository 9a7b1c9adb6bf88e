//go:build e2e

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// report prints the results as markdown tables.
func report(w io.Writer, o options, rs []sizeResult, lr *largeResult) {
	fmt.Fprintf(w, "## herd scale simulation (gossip preset %s, idle window %v, %d cores)\n\n", o.timing, o.idle, cores(rs))
	fmt.Fprintln(w, "| boards | pods | Ready after | pods Running after | leader CPU % core | leader RSS MB | follower CPU % | follower RSS MB | workers' process CPU % (per board) | workers' process RSS MB (per board) | gossip B/s per board | leader gossip B/s | machine busy % |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		per := func(v float64) string {
			if r.workers == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f (%.2f)", v, v/float64(r.workers))
		}
		lead := fmt.Sprintf("%.2f", r.leaderCPU)
		if r.leaderChanged {
			lead += " (leader changed)"
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %.1f | %.2f | %.1f | %s | %s | %.0f | %.0f | %.0f |\n",
			r.n, r.replicas, secs(r.converge), secs(r.deploy), lead, r.leaderRSS, r.followerCPU, r.followerRSS,
			per(r.workersCPU), per(r.workersRSS), r.gossipWorker, r.gossipLeader, r.machineBusy)
	}
	if lr == nil {
		return
	}
	if len(lr.detect) > 0 {
		var first, med, last []float64
		for _, d := range lr.detect {
			first, med, last = append(first, d[0]), append(med, d[1]), append(last, d[2])
		}
		fmt.Fprintf(w, "\n### Failure detection at %d members (%d kills, %d observing workers each)\n\n", lr.n, len(lr.detect), lr.observers)
		fmt.Fprintln(w, "| from the kill until | p50 ms | p95 ms | max ms |")
		fmt.Fprintln(w, "|---|---:|---:|---:|")
		for _, row := range []struct {
			what string
			v    []float64
		}{{"the first worker sees it dead", first}, {"half the workers see it dead", med}, {"every worker sees it dead", last}} {
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f |\n", row.what, pct(row.v, 50), pct(row.v, 95), pct(row.v, 100))
		}
		fmt.Fprintf(w, "\nObservers that saw no failure within 30 s: %d.\n", lr.missed)
		for _, u := range lr.unsettled {
			fmt.Fprintf(w, "\nNot settled %s\n", u)
		}
	}
	if lr.victims > 0 {
		fmt.Fprintf(w, "\n### Wave: %d boards powered off at once (%d boards, %d pods lost)\n\n", lr.victims, lr.n, lr.lostPods)
		if lr.waveFailed != "" {
			fmt.Fprintf(w, "The wave did not complete: %s\n", lr.waveFailed)
			return
		}
		fmt.Fprintln(w, "| from the kill until | s |")
		fmt.Fprintln(w, "|---|---:|")
		fmt.Fprintf(w, "| every victim NotReady | %s |\n", secs(lr.notReady))
		fmt.Fprintf(w, "| every replacement bound and Running | %s |\n", secs(lr.replaced))
	}
}

func cores(rs []sizeResult) int {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].cores
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// pct is the nearest-rank percentile p of v.
func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
