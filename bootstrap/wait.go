package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// ErrNotFormed: the cluster did not form before the deadline.
var ErrNotFormed = fmt.Errorf("bootstrap: cluster did not form")

// Formed reports whether st shows a cluster with a leader in which every
// one of names is an alive gossip member, and if not, what is missing.
func Formed(st api.ClusterStatus, names []string) (bool, string) {
	var missing []string
	if st.Leader == "" {
		missing = append(missing, "no leader elected")
	}
	var absent []string
	for _, n := range names {
		if !st.Alive(n) {
			absent = append(absent, n)
		}
	}
	if len(absent) > 0 {
		missing = append(missing, fmt.Sprintf("%d of %d boards alive (waiting for %s)", len(names)-len(absent), len(names), strings.Join(absent, ", ")))
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

// WaitForCluster asks status every interval until Formed holds for names
// or ctx ends. progress (optional) receives each new situation once. On
// timeout the error says what was still missing.
func WaitForCluster(ctx context.Context, status func(context.Context) (api.ClusterStatus, error), names []string, interval time.Duration, progress func(string)) (api.ClusterStatus, error) {
	if progress == nil {
		progress = func(string) {}
	}
	last := ""
	report := func(s string) {
		if s != last {
			last = s
			progress(s)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := status(ctx)
		if err == nil {
			ok, why := Formed(st, names)
			if ok {
				return st, nil
			}
			report(why)
		} else if ctx.Err() == nil {
			report(fmt.Sprintf("agent API not reachable yet: %v", err))
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = ctx.Err().Error()
			}
			return st, fmt.Errorf("%w: %s", ErrNotFormed, last)
		case <-t.C:
		}
	}
}
