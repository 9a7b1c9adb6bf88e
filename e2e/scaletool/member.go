//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent"
	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
)

// Fixed ports on every member's own loopback address.
const (
	gossipPort = 7946
	raftPort   = 7947
	apiPort    = 7948
)

// spec is what the driver hands one member process (a JSON file, 0600:
// it holds the cluster key).
type spec struct {
	Members []memberSpec `json:"members"`
	Join    []string     `json:"join"` // gossip addresses of the servers
	Key     []byte       `json:"key"`
	Timing  string       `json:"timing"` // "lan" or "local"
}

// memberSpec is one simulated board.
type memberSpec struct {
	Name   string `json:"name"`
	IP     string `json:"ip"`
	Dir    string `json:"dir"`
	Server bool   `json:"server"`
}

// timingOf returns the gossip preset named s.
func timingOf(s string) (gossip.Timing, error) {
	switch s {
	case "lan":
		return gossip.LANTiming(), nil
	case "local":
		return gossip.LocalTiming(), nil
	}
	return gossip.Timing{}, fmt.Errorf("timing %q: want lan or local", s)
}

// proc runs the members of one process and answers the driver's commands.
type proc struct {
	spec   spec
	timing gossip.Timing
	fleet  *fakeboard.Fleet // the boards as this process's leader sees them
	log    *slog.Logger
	sink   *byteSink

	mu   sync.Mutex
	live map[string]*member
}

// member is one running agent.
type member struct {
	ms   memberSpec
	a    *agent.Agent
	stop context.CancelFunc
	done chan struct{}
}

// runMember is `scaletool member --spec FILE`: start every member of the
// spec, then serve commands on stdin (one a line, answered by one line on
// stdout starting with "ok" or "err") until stdin ends.
func runMember(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("member", flag.ContinueOnError)
	fs.SetOutput(stderr)
	specFile := fs.String("spec", "", "the member spec (JSON)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	data, err := os.ReadFile(*specFile)
	if err != nil {
		fmt.Fprintln(stderr, "scaletool member:", err)
		return 2
	}
	var sp spec
	if err := json.Unmarshal(data, &sp); err != nil {
		fmt.Fprintf(stderr, "scaletool member: %s: %v\n", *specFile, err)
		return 2
	}
	timing, err := timingOf(sp.Timing)
	if err != nil {
		fmt.Fprintln(stderr, "scaletool member:", err)
		return 2
	}
	p := &proc{spec: sp, timing: timing, fleet: fakeboard.New(), sink: installSink(),
		log:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		live: map[string]*member{}}
	for _, ms := range sp.Members {
		if err := p.start(ms.Name); err != nil {
			fmt.Fprintln(stderr, "scaletool member:", err)
			return 1
		}
	}
	fmt.Fprintln(stdout, "ok started", len(sp.Members))
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		out, err := p.command(fields[0], fields[1:])
		if err != nil {
			fmt.Fprintln(stdout, "err", err)
			continue
		}
		fmt.Fprintln(stdout, "ok", out)
	}
	p.crash(p.names()...)
	return 0
}

// command runs one driver command.
func (p *proc) command(cmd string, args []string) (string, error) {
	switch cmd {
	case "kill": // kill NAME...: power cut, all at once
		return strconv.FormatInt(p.crash(args...).UnixNano(), 10), nil
	case "start": // start NAME...
		for _, n := range args {
			if err := p.start(n); err != nil {
				return "", err
			}
		}
		return "", nil
	case "detect": // detect NAME: kill it, time until every other member here sees it dead
		if len(args) != 1 {
			return "", errors.New("detect NAME")
		}
		return p.detect(args[0])
	case "settle": // settle N: wait until every member here sees N alive members
		if len(args) != 1 {
			return "", errors.New("settle N")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return "", err
		}
		return "", p.settle(n, time.Minute)
	case "bytes": // gossip bytes sent by this process's members so far
		return fmt.Sprintf("%d %d %d", p.sink.udp.Load(), p.sink.tcp.Load(), len(p.names())), nil
	case "unreachable": // unreachable NAME...: the leader's SSH to them fails
		for _, n := range args {
			p.fleet.Board(n).SetUnreachable(true)
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

// start starts the member of the spec named name.
func (p *proc) start(name string) error {
	i := slices.IndexFunc(p.spec.Members, func(m memberSpec) bool { return m.Name == name })
	if i < 0 {
		return fmt.Errorf("no member %q", name)
	}
	ms := p.spec.Members[i]
	cfg := agent.DefaultConfig()
	cfg.Name = ms.Name
	cfg.DataDir = ms.Dir
	cfg.Server = ms.Server
	if ms.Server {
		cfg.BootstrapExpect = 3
	}
	cfg.GossipKeyFile, cfg.ServerKeyFile, cfg.ClusterKeyFile = "", "", ""
	cfg.GossipBind = fmt.Sprintf("%s:%d", ms.IP, gossipPort)
	cfg.RaftBind = fmt.Sprintf("%s:%d", ms.IP, raftPort)
	cfg.APIListen = []string{fmt.Sprintf("%s:%d", ms.IP, apiPort)}
	cfg.SSHAddress = ms.IP + ":22"
	cfg.SSHHostKeyFile = ""
	cfg.DNSListen = "off"
	cfg.ServiceProxy = "off"
	for _, j := range p.spec.Join {
		if j != cfg.GossipBind {
			cfg.Join = append(cfg.Join, j)
		}
	}
	facts := api.BoardFacts{Arch: "arm64", MemoryBytes: 1 << 30, CPUs: 4}
	timing := p.timing
	opts := agent.Options{ClusterKey: p.spec.Key, Logger: p.log, GossipTiming: &timing, Facts: &facts,
		ServiceViewFile: filepath.Join(ms.Dir, "services.json")}
	if ms.Server {
		opts.Executor = p.fleet
	}
	a, err := agent.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{ms: ms, a: a, stop: cancel, done: make(chan struct{})}
	go func() { defer close(m.done); a.Run(ctx) }()
	p.mu.Lock()
	p.live[name] = m
	p.mu.Unlock()
	return nil
}

// names returns the running members.
func (p *proc) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.live))
	for n := range p.live {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// crash stops the named members as a power cut would: gossip goes silent
// at once (no leave), then the rest of each agent is stopped. It returns
// when the last one fell silent.
func (p *proc) crash(names ...string) time.Time {
	p.mu.Lock()
	var ms []*member
	for _, n := range names {
		if m := p.live[n]; m != nil {
			ms = append(ms, m)
			delete(p.live, n)
		}
	}
	p.mu.Unlock()
	for _, m := range ms {
		m.a.Gossip().Shutdown()
	}
	at := time.Now()
	for _, m := range ms {
		m.stop()
	}
	for _, m := range ms {
		<-m.done
	}
	return at
}

// detect kills name and reports, in milliseconds from the kill, when the
// first, the median and the last other member of this process counted a
// failure, and how many of them did. A member counting some other failure
// in the window is counted too; the driver checks for false deaths.
func (p *proc) detect(name string) (string, error) {
	p.mu.Lock()
	if p.live[name] == nil {
		p.mu.Unlock()
		return "", fmt.Errorf("%s is not running", name)
	}
	type obs struct {
		g    *gossip.Gossip
		base uint64
		seen time.Duration
	}
	var others []*obs
	for n, m := range p.live {
		if n != name {
			g := m.a.Gossip()
			others = append(others, &obs{g: g, base: g.Stats().Failures, seen: -1})
		}
	}
	p.mu.Unlock()
	at := p.crash(name)
	left := len(others)
	deadline := at.Add(30 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for left > 0 && time.Now().Before(deadline) {
		<-tick.C
		now := time.Since(at)
		for _, o := range others {
			if o.seen < 0 && o.g.Stats().Failures > o.base {
				o.seen = now
				left--
			}
		}
	}
	var seen []time.Duration
	for _, o := range others {
		if o.seen >= 0 {
			seen = append(seen, o.seen)
		}
	}
	if len(seen) == 0 {
		return "", fmt.Errorf("nobody saw %s die within 30s", name)
	}
	slices.Sort(seen)
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 1, 64) }
	return fmt.Sprintf("%s %s %s %d %d", ms(seen[0]), ms(seen[len(seen)/2]), ms(seen[len(seen)-1]), len(seen), len(others)), nil
}

// settle waits until every running member counts n alive members.
func (p *proc) settle(n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		bad := ""
		for name, m := range p.live {
			if got := m.a.Gossip().NumMembers(); got != n {
				bad = fmt.Sprintf("%s sees %d alive", name, got)
				break
			}
		}
		p.mu.Unlock()
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after %v: %s, want %d", d, bad, n)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's view: no event to wait on
	}
}
