//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/e2e/truth"
)

// The ground-truth types and the checker live in e2e/truth (no build tag,
// tested without the lab); these aliases keep the harness's names.
type (
	UnitInfo   = truth.UnitInfo
	UnitSample = truth.UnitSample
	Episode    = truth.Episode
	Truth      = truth.Truth
	Verdict    = truth.Verdict
	Interval   = truth.Interval
	Intervals  = truth.Intervals
	Write      = truth.Write
	WriteLog   = truth.WriteLog
)

// Check is truth.Check.
func Check(tr Truth, from, to time.Time) Verdict { return truth.Check(tr, from, to) }

// Longest is truth.Longest.
func Longest(eps []Episode) Episode { return truth.Longest(eps) }

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
	err = truth.ParseSamples(out, board, func(s UnitSample) {
		g.mu.Lock()
		g.samples = append(g.samples, s)
		g.mu.Unlock()
	})
	if werr := cmd.Wait(); werr != nil || err == nil {
		err = werr
	}
	if err == nil {
		err = fmt.Errorf("session ended")
	}
	return fmt.Errorf("%w: %s", err, strings.TrimSpace(lastLines(stderr.String(), 2)))
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
		id, pid = truth.ShowLine(line, id, pid, pids)
	}
	return pids, nil
}

// Owner is how the deployment's units name their owner (X-Herd-Owner).
func (w Workload) Owner() string { return string(api.KindDeployment) + "/" + w.Deployment }
