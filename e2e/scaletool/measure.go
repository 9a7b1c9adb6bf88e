//go:build e2e

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// sizeResult is what one fleet size measured.
type sizeResult struct {
	n, workers, replicas int
	converge, deploy     time.Duration // start to every board Ready; apply to every pod Running
	leader               string
	leaderCPU, leaderRSS float64 // % of a core, MB
	followerCPU          float64 // mean of the two, % of a core
	followerRSS          float64 // MB, mean
	workersCPU           float64 // the workers' process, % of a core
	workersRSS           float64 // MB, the workers' process
	gossipWorker         float64 // bytes/s sent per worker board
	gossipLeader         float64 // bytes/s sent by the leader's gossip
	machineBusy          float64 // % of all cores, whole machine
	cores                int
	leaderChanged        bool
}

// largeResult is what only the largest size measured.
type largeResult struct {
	n          int
	detect     [][3]float64 // per kill: first, median, last observer (ms)
	observers  int
	missed     int      // observers that saw no failure within 30 s
	unsettled  []string // restarts after which the workers did not all count every member alive within a minute
	victims    int
	lostPods   int
	notReady   time.Duration // kill to every victim NotReady
	replaced   time.Duration // kill to every replacement Running
	waveFailed string
}

// measureSize runs one fleet of n boards: converge, deploy, idle window,
// and at the largest size the failure detections and the wave.
func measureSize(ctx context.Context, self, dir string, n int, o options, large bool, log io.Writer) (sizeResult, *largeResult, error) {
	r := sizeResult{n: n, workers: n - 3, replicas: max(1, int(math.Round(o.replicas*float64(n))))}
	fdir := filepath.Join(dir, fmt.Sprintf("n%d", n))
	if err := os.MkdirAll(fdir, 0o700); err != nil {
		return r, nil, err
	}
	fmt.Fprintf(log, "scaletool: %d boards: starting\n", n)
	start := time.Now()
	f, err := startFleet(ctx, self, fdir, n, o.timing)
	if err != nil {
		return r, nil, err
	}
	defer f.stop()
	r.converge = time.Since(start)
	start = time.Now()
	if err := f.deploy(ctx, r.replicas); err != nil {
		return r, nil, err
	}
	r.deploy = time.Since(start)
	fmt.Fprintf(log, "scaletool: %d boards: Ready in %v, %d pods Running in %v; idle %v after %v\n",
		n, r.converge.Round(time.Millisecond), r.replicas, r.deploy.Round(time.Millisecond), o.idle, o.settle)
	time.Sleep(o.settle) // a measurement window, not synchronisation
	if err := f.idle(ctx, o.idle, &r); err != nil {
		return r, nil, err
	}
	if !large {
		return r, nil, nil
	}
	lr := &largeResult{n: n}
	if o.detect > 0 && f.workers != nil {
		fmt.Fprintf(log, "scaletool: %d boards: %d failure detections\n", n, o.detect)
		if err := f.detections(o.detect, lr); err != nil {
			return r, lr, err
		}
	}
	if o.wave > 0 && f.workers != nil {
		fmt.Fprintf(log, "scaletool: %d boards: killing %d at once\n", n, o.wave)
		if err := f.wave(ctx, o.wave, r.replicas, lr); err != nil {
			lr.waveFailed = err.Error()
		}
	}
	return r, lr, nil
}

// deployment is the workload: replicas pods with one dynamic port.
func deployment(replicas int) *api.Deployment {
	return &api.Deployment{
		Kind:     api.KindDeployment,
		Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Template: api.PodTemplate{
				Labels: map[string]string{"app": "web"},
				Exec:   []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
				Ports:  []api.Port{{Name: "http"}},
			},
		},
	}
}

// deploy applies the deployment and waits until every pod is Running.
func (f *fleet) deploy(ctx context.Context, replicas int) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	if _, err := c.Apply(ctx, []api.Object{deployment(replicas)}, false); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return poll(ctx, 3*time.Minute, "every pod Running", func() error {
		running, err := f.running(ctx, nil)
		if err != nil {
			return err
		}
		if running != replicas {
			return fmt.Errorf("%d of %d pods Running", running, replicas)
		}
		return nil
	})
}

// running counts the deployment's Running pods on boards not in dead.
func (f *fleet) running(ctx context.Context, dead map[string]bool) (int, error) {
	pods, err := f.list(ctx, api.KindPod)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range pods {
		p := o.(*api.Pod)
		if p.Spec.Owner.Name == "web" && p.Status.Phase == api.PodRunning && !dead[p.Spec.Node] {
			n++
		}
	}
	return n, nil
}

// idle measures the leader, the followers and the workers' process over d.
func (f *fleet) idle(ctx context.Context, d time.Duration, r *sizeResult) error {
	lead, err := f.leader(ctx)
	if err != nil {
		return err
	}
	r.leader = f.servers[lead].name
	procs := append([]*child{}, f.servers...)
	if f.workers != nil {
		procs = append(procs, f.workers)
	}
	cpu0 := make([]float64, len(procs))
	bytes0 := make([]uint64, len(procs))
	for i, c := range procs {
		if cpu0[i], err = cpuSeconds(c.cmd.Process.Pid); err != nil {
			return err
		}
		if bytes0[i], err = c.gossipBytes(); err != nil {
			return err
		}
	}
	busy0, total0, cores, err := machineTicks()
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(d) // the measurement window itself
	el := time.Since(start).Seconds()
	busy1, total1, _, err := machineTicks()
	if err != nil {
		return err
	}
	r.cores = cores
	r.machineBusy = 100 * float64(busy1-busy0) / float64(total1-total0)
	for i, c := range procs {
		cpu1, err := cpuSeconds(c.cmd.Process.Pid)
		if err != nil {
			return err
		}
		rss, err := rssMB(c.cmd.Process.Pid)
		if err != nil {
			return err
		}
		b1, err := c.gossipBytes()
		if err != nil {
			return err
		}
		pct := 100 * (cpu1 - cpu0[i]) / el
		rate := float64(b1-bytes0[i]) / el
		switch {
		case i == lead:
			r.leaderCPU, r.leaderRSS, r.gossipLeader = pct, rss, rate
		case i < len(f.servers):
			r.followerCPU += pct / 2
			r.followerRSS += rss / 2
		default:
			r.workersCPU, r.workersRSS, r.gossipWorker = pct, rss, rate/float64(len(f.names))
		}
	}
	if now, err := f.leader(ctx); err != nil || now != lead {
		r.leaderChanged = true
	}
	return nil
}

// gossipBytes returns the gossip bytes (UDP and TCP) the process sent.
func (c *child) gossipBytes() (uint64, error) {
	f, err := c.do("bytes")
	if err != nil {
		return 0, err
	}
	if len(f) != 3 {
		return 0, fmt.Errorf("%s: bytes: %q", c.name, f)
	}
	udp, err1 := strconv.ParseUint(f[0], 10, 64)
	tcp, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: bytes: %q", c.name, f)
	}
	return udp + tcp, nil
}

// detections kills k workers one after the other (each brought back and
// seen alive by everyone before the next) and records when the other
// workers counted it dead.
func (f *fleet) detections(k int, lr *largeResult) error {
	for i := range k {
		victim := f.names[(i*7)%len(f.names)]
		out, err := f.workers.do("detect %s", victim)
		if err != nil {
			return err
		}
		if len(out) != 5 {
			return fmt.Errorf("detect: %q", out)
		}
		var s [3]float64
		for j := range 3 {
			if s[j], err = strconv.ParseFloat(out[j], 64); err != nil {
				return fmt.Errorf("detect: %q", out)
			}
		}
		seen, _ := strconv.Atoi(out[3])
		all, _ := strconv.Atoi(out[4])
		lr.detect = append(lr.detect, s)
		lr.observers = all
		lr.missed += all - seen
		if _, err := f.workers.do("start %s", victim); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scaletool: detect %s: %v ms (first, median, last)\n", victim, s)
		if _, err := f.workers.do("settle %d", f.n); err != nil {
			lr.unsettled = append(lr.unsettled, fmt.Sprintf("after killing %s: %v", victim, err))
		}
	}
	return nil
}

// wave powers off k workers at once, preferring boards running a pod: the
// leader's SSH to them fails (fakeboard unreachable) and their agents go
// silent. It times until every victim is NotReady and until replicas pods
// are Running on the other boards.
func (f *fleet) wave(ctx context.Context, k, replicas int, lr *largeResult) error {
	pods, err := f.list(ctx, api.KindPod)
	if err != nil {
		return err
	}
	worker := map[string]bool{}
	for _, n := range f.names {
		worker[n] = true
	}
	var victims []string
	for _, o := range pods {
		p := o.(*api.Pod)
		if p.Spec.Owner.Name == "web" && worker[p.Spec.Node] && !slices.Contains(victims, p.Spec.Node) && len(victims) < k {
			victims = append(victims, p.Spec.Node)
		}
	}
	for _, n := range f.names {
		if len(victims) < k && !slices.Contains(victims, n) {
			victims = append(victims, n)
		}
	}
	dead := map[string]bool{}
	for _, v := range victims {
		dead[v] = true
	}
	for _, o := range pods {
		if p := o.(*api.Pod); p.Spec.Owner.Name == "web" && dead[p.Spec.Node] {
			lr.lostPods++
		}
	}
	lr.victims = len(victims)
	for _, s := range f.servers {
		if _, err := s.do("unreachable %s", strings.Join(victims, " ")); err != nil {
			return err
		}
	}
	out, err := f.workers.do("kill %s", strings.Join(victims, " "))
	if err != nil {
		return err
	}
	ns, err := strconv.ParseInt(out[0], 10, 64)
	if err != nil {
		return fmt.Errorf("kill: %q", out)
	}
	at := time.Unix(0, ns)
	return poll(ctx, 2*time.Minute, "replacements Running", func() error {
		if lr.notReady == 0 {
			nodes, err := f.list(ctx, api.KindNode)
			if err != nil {
				return err
			}
			down := 0
			for _, o := range nodes {
				if nd := o.(*api.Node); dead[nd.Metadata.Name] && nd.Status.Phase != api.NodeReady {
					down++
				}
			}
			if down == len(victims) {
				lr.notReady = time.Since(at)
			}
		}
		n, err := f.running(ctx, dead)
		if err != nil {
			return err
		}
		if n != replicas || lr.notReady == 0 {
			return fmt.Errorf("%d of %d pods Running on live boards", n, replicas)
		}
		lr.replaced = time.Since(at)
		return nil
	})
}

// cpuSeconds is the user+system CPU time of pid (/proc/PID/stat, in
// clock ticks of 1/100 s, Linux's USER_HZ).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return float64(ut+st) / 100, nil
}

// rssMB is VmRSS of pid in MB.
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// machineTicks reads the busy and total ticks of all cores from /proc/stat
// (busy: everything but idle and iowait, guest time being part of user) and the number of cores.
func machineTicks() (busy, total uint64, cores int, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 5 && f[0] == "cpu":
			for i, v := range f[1:min(len(f), 9)] { // user..steal; guest is within user
				n, _ := strconv.ParseUint(v, 10, 64)
				total += n
				if i != 3 && i != 4 {
					busy += n
				}
			}
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu"):
			cores++
		}
	}
	return busy, total, cores, nil
}
