//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// availabilityWatch polls web's pods until stopped and keeps the fewest
// Running-and-ready and the most live pods it saw: a drain or rebalance
// must never take web below replicas - max_unavailable (3 with the default
// strategy) nor above replicas + max_surge (4).
type availabilityWatch struct {
	mu                sync.Mutex
	minReady, maxLive int
	polls, errs       int
	minAt             string // the pods when minReady was seen
	stop              context.CancelFunc
	done              chan struct{}
}

func watchAvailability(t *testing.T, via string) *availabilityWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &availabilityWatch{minReady: 1 << 30, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(pollFast)
		defer tick.Stop()
		for {
			pods, err := list[api.Pod](ctx, fleet, via, api.KindPod)
			w.mu.Lock()
			if err == nil {
				s := Snapshot{Pods: pods}
				live, ready := Web.Live(s), 0
				for _, p := range live {
					if p.Status.Phase == api.PodRunning && p.Status.Ready {
						ready++
					}
				}
				w.polls++
				if ready < w.minReady {
					w.minReady, w.minAt = ready, podsByBoard(s)
				}
				w.maxLive = max(w.maxLive, len(live))
			} else if ctx.Err() == nil {
				w.errs++
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *availabilityWatch) end() { w.stop(); <-w.done }

// check stops the watch and fails t if web went below replicas ready or
// above replicas+1 live.
func (w *availabilityWatch) check(t *testing.T, what string) {
	t.Helper()
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: %d polls (%d failed), fewest ready %d, most live %d", what, w.polls, w.errs, w.minReady, w.maxLive)
	if w.polls == 0 {
		t.Errorf("%s: no poll of the pods succeeded", what)
	}
	if w.minReady < Web.Replicas {
		t.Errorf("%s: only %d web pods Running and ready at one point (%s), want never below %d", what, w.minReady, w.minAt, Web.Replicas)
	}
	if w.maxLive > Web.Replicas+1 {
		t.Errorf("%s: %d live web pods at one point, want at most %d (max_surge 1)", what, w.maxLive, Web.Replicas+1)
	}
}

// webBoards counts web's live pods per board.
func webBoards(s Snapshot) map[string]int {
	n := map[string]int{}
	for _, p := range Web.Live(s) {
		n[p.Spec.Node]++
	}
	return n
}

// testDrainRebalance drains two boards that run web, one after the other,
// with herdctl drain: each ends empty, web never has fewer than its 3
// replicas ready nor more than 4 pods. Uncordoned, the boards stay empty
// until herdctl rebalance spreads web again (one pod per board at most),
// still without going below 3 ready and without a new revision.
func testDrainRebalance(t *testing.T) {
	restoreLab(t)
	s, _ := converge(t)
	ctx := testCtx(t, 5*time.Minute)
	t.Cleanup(func() {
		cctx := testCtx(t, time.Minute)
		if out, err := fleet.Herdctl(cctx, "", "", append([]string{"uncordon"}, fleet.Boards...)...); err != nil {
			t.Errorf("restore: uncordon: %v\n%s", err, out)
		}
	})
	before := webDeployment(ctx, t, viaExcept())
	var drained []string
	for b, n := range webBoards(s) {
		if n > 0 && len(drained) < 2 {
			drained = append(drained, b)
		}
	}
	slices.Sort(drained)
	if len(drained) < 2 {
		t.Fatalf("web runs on %v, want at least two boards", webBoards(s))
	}

	for _, b := range drained {
		w := watchAvailability(t, viaExcept())
		t0 := time.Now()
		out, err := fleet.Herdctl(ctx, "", "", "drain", b, "--timeout", "2m")
		if err != nil {
			t.Fatalf("drain %s: %v\n%s", b, err, out)
		}
		took := time.Since(t0)
		w.check(t, "drain "+b)
		if !strings.Contains(string(out), "node/"+b+" drained") {
			t.Errorf("drain %s said:\n%s", b, out)
		}
		s, _, err := fleet.WaitConverged(ctx, viaExcept(), Web)
		if err != nil {
			t.Fatal(err)
		}
		if n := webBoards(s)[b]; n != 0 {
			t.Errorf("after drain %s: %d web pods still there (%s)", b, n, podsByBoard(s))
		}
		t.Logf("drain %s took %.1fs: %s\n%s", b, took.Seconds(), podsByBoard(s), out)
	}

	if out, err := fleet.Herdctl(ctx, "", "", append([]string{"uncordon"}, drained...)...); err != nil {
		t.Fatalf("uncordon: %v\n%s", err, out)
	}
	plan, err := fleet.Herdctl(ctx, "", "", "rebalance", "--dry-run")
	if err != nil || !strings.Contains(string(plan), "moves (now") {
		t.Fatalf("rebalance --dry-run: %v\n%s", err, plan)
	}
	t.Logf("rebalance plan:\n%s", plan)

	w := watchAvailability(t, viaExcept())
	t0 := time.Now()
	out, err := fleet.Herdctl(ctx, "", "", "rebalance", "deployment", "web", "--timeout", "2m")
	if err != nil {
		t.Fatalf("rebalance: %v\n%s", err, out)
	}
	took := time.Since(t0)
	w.check(t, "rebalance")
	s, _, err = fleet.WaitConverged(ctx, viaExcept(), Web)
	if err != nil {
		t.Fatal(err)
	}
	for b, n := range webBoards(s) {
		if n > 1 {
			t.Errorf("after rebalance: %d web pods on %s (%s), want at most 1 per board", n, b, podsByBoard(s))
		}
	}
	after := webDeployment(ctx, t, viaExcept())
	if r0, r1 := api.TemplateHash(before.Spec.Template), api.TemplateHash(after.Spec.Template); r0 != r1 || after.Status.Revision != before.Status.Revision {
		t.Errorf("rebalance changed the revision: %s (%s) -> %s (%s)", r0, before.Status.Revision, r1, after.Status.Revision)
	}
	t.Logf("rebalance took %.1fs: %s\n%s", took.Seconds(), podsByBoard(s), out)
}
