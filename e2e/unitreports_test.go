//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// testUnitReports: a board's agent reports its own unit changes (systemd's
// D-Bus signals → a signed report over gossip), so the leader learns that
// a pod's process was killed without listing the board over SSH. Each
// round kills the main process of a web pod's unit on a board other than
// the leader's (SIGKILL; Restart=always brings it back) and follows the
// pods over the API's watch: the pod must show the restart while the
// leader's herd_placer_ssh_requests_total for that board stays where it
// was. The time from the kill (the board's clock, which is the host's) to
// the first status change and to the restart counted is logged: the
// BENCHMARKS.md "Unit reports" figures.
func testUnitReports(t *testing.T) {
	s, _ := converge(t)
	ctx := testCtx(t, 3*time.Minute)
	leader := waitLeader(t, ctx, viaExcept())
	board := victim(t, s, leader)
	addr, err := fleet.forwardAddr(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(fleet.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New([]string{"http://" + addr}, client.Options{Token: strings.TrimSpace(string(tok)), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	const rounds = 5
	var seen, counted []time.Duration
	moved := 0
	for round := range rounds {
		s, _, err := fleet.WaitConverged(ctx, leader, Web)
		if err != nil {
			t.Fatal(err)
		}
		pods := Web.PodsOn(s, board)
		if len(pods) == 0 {
			t.Fatalf("no web pod on %s any more: %s", board, podsByBoard(s))
		}
		pod := pods[0]
		before, err := sshRequests(ctx, leader, board)
		if err != nil {
			t.Fatal(err)
		}
		_, rv, err := c.List(ctx, api.KindPod)
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		events, err := c.Watch(wctx, api.KindPod, rv)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		out, err := fleet.SSH(ctx, board, "", "date +%s.%N; systemctl kill -s KILL --kill-whom=main "+pod.Status.Unit)
		if err != nil {
			stop()
			t.Fatalf("kill %s on %s: %v\n%s", pod.Status.Unit, board, err, out)
		}
		killed, err := parseEpoch(strings.TrimSpace(out))
		if err != nil {
			stop()
			t.Fatal(err)
		}
		first, restarted := followRestart(t, wctx, events, pod)
		stop()
		after, err := sshRequests(ctx, leader, board)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, first.Sub(killed))
		counted = append(counted, restarted.Sub(killed))
		if after != before {
			// The two-minute safety-net listing may fall in the window.
			moved++
		}
		t.Logf("round %d: killed %s on %s; leader's status changed after %v, restart counted after %v; leader's SSH requests to %s %v → %v",
			round+1, pod.Metadata.Name, board, first.Sub(killed).Round(time.Millisecond), restarted.Sub(killed).Round(time.Millisecond), board, before, after)
	}
	if moved > 1 {
		t.Errorf("the leader called %s over SSH during %d of %d rounds; reports should make that rare (only the 2-minute resync)", board, moved, rounds)
	}
	slices.Sort(seen)
	slices.Sort(counted)
	t.Logf("unit reports: kill → leader's pod status changed: median %v, max %v; → restart counted: median %v, max %v (%d rounds)",
		seen[rounds/2].Round(time.Millisecond), seen[rounds-1].Round(time.Millisecond),
		counted[rounds/2].Round(time.Millisecond), counted[rounds-1].Round(time.Millisecond), rounds)
}

// followRestart reads pod events until pod's restarts grow past what
// they were, returning when its status first changed and when the restart
// was counted (arrival times of the events).
func followRestart(t *testing.T, ctx context.Context, events <-chan api.WatchEvent, pod api.Pod) (first, restarted time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: no restart seen within 30 s (first change at %v)", pod.Metadata.Name, first)
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("pod %s: watch ended before the restart was seen", pod.Metadata.Name)
			}
			now := time.Now()
			o, err := api.FromRaw(ev.Object)
			if err != nil {
				continue
			}
			p, ok := o.(*api.Pod)
			if !ok || p.Metadata.Name != pod.Metadata.Name {
				continue
			}
			if first.IsZero() {
				first = now
			}
			if p.Status.Restarts > pod.Status.Restarts {
				return first, now
			}
		}
	}
}

// sshRequests reads herd_placer_ssh_requests_total{node=board} from
// leader's metrics listener.
func sshRequests(ctx context.Context, leader, board string) (float64, error) {
	tok, err := os.ReadFile(fleet.Dir + "/state/metrics.token")
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+BoardIP(leader)+":7949/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(strings.SplitN(string(tok), "\n", 2)[0]))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s metrics: %s", leader, resp.Status)
	}
	series := `herd_placer_ssh_requests_total{node="` + board + `"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}

// parseEpoch reads `date +%s.%N`.
func parseEpoch(s string) (time.Time, error) {
	secs, frac, ok := strings.Cut(s, ".")
	if !ok {
		return time.Time{}, fmt.Errorf("not seconds.nanoseconds: %q", s)
	}
	sec, err1 := strconv.ParseInt(secs, 10, 64)
	nsec, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("not seconds.nanoseconds: %q", s)
	}
	return time.Unix(sec, nsec), nil
}
