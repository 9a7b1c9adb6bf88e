//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herd-dev/herd/api"
)

// ServicePort is the port examples/web.toml's service owns on every board
// (its proxy port).
const ServicePort = 8080

// DNSPort is where every agent answers DNS for herd. (dns_listen's
// default).
const DNSPort = 8600

// Dig asks board's agent for name's records of type qtype with Debian's
// dig (+short): one line per record.
func Dig(ctx context.Context, board, name, qtype string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", "+short", "+time=2", "+tries=2", "-p", strconv.Itoa(DNSPort),
		"@"+BoardIP(board), name, qtype).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("dig @%s %s %s: %v: %s", board, name, qtype, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines, nil
}

// DNSEndpoints is what board's DNS says service's port runs on: the
// board IP:port of every SRV record of _PORT._tcp.SERVICE.svc.herd.,
// and the A records of SERVICE.svc.herd., both sorted.
func DNSEndpoints(ctx context.Context, board, service, port string) (srv, a []string, err error) {
	lines, err := Dig(ctx, board, "_"+port+"._tcp."+service+".svc.herd.", "SRV")
	if err != nil {
		return nil, nil, err
	}
	for _, l := range lines {
		f := strings.Fields(l) // priority weight port target
		if len(f) != 4 {
			return nil, nil, fmt.Errorf("SRV record %q", l)
		}
		b := strings.TrimSuffix(f[3], ".node.herd.")
		srv = append(srv, net.JoinHostPort(BoardIP(b), f[2]))
	}
	slices.Sort(srv)
	a, err = Dig(ctx, board, service+".svc.herd.", "A")
	return srv, a, err
}

// WantDNS is what DNSEndpoints should return for a service: its
// endpoints' addresses and their distinct board IPs, sorted.
func WantDNS(svc api.Service, port string) (srv, a []string) {
	for _, e := range svc.Status.Endpoints {
		if e.Port != port {
			continue
		}
		srv = append(srv, e.Address)
		host, _, _ := net.SplitHostPort(e.Address)
		a = append(a, host)
	}
	slices.Sort(srv)
	slices.Sort(a)
	return srv, slices.Compact(a)
}

// Request is one HTTP request of a RequestLoop.
type Request struct {
	Board string        // whose service port it went to
	At    time.Duration // when it started, since the loop began
	Took  time.Duration
	Err   string // "" on success (HTTP 200)
}

// RequestLoop is a loop of HTTP requests through service ports.
type RequestLoop struct {
	Start time.Time
	mu    sync.Mutex
	reqs  []Request
	wg    sync.WaitGroup
	done  chan struct{}
}

// StartRequests starts one curl (a real client, a new connection each
// time) every interval through the service port of boards in turn, until
// Stop.
func StartRequests(boards []string, interval time.Duration) *RequestLoop {
	l := &RequestLoop{Start: time.Now(), done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 0; ; i++ {
			b := boards[i%len(boards)]
			l.mu.Lock()
			l.reqs = append(l.reqs, Request{Board: b, Err: "running"})
			idx := len(l.reqs) - 1
			l.mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				r := curl(b, l.Start)
				l.mu.Lock()
				l.reqs[idx] = r
				l.mu.Unlock()
			}()
			select {
			case <-l.done:
				return
			case <-t.C:
			}
		}
	}()
	return l
}

// Requests returns the requests so far, in start order (those still
// running have Err "running").
func (l *RequestLoop) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// LastOK reports whether the last n finished requests all succeeded.
func (l *RequestLoop) LastOK(n int) bool {
	reqs := l.Requests()
	ok := 0
	for i := len(reqs) - 1; i >= 0 && ok < n; i-- {
		switch reqs[i].Err {
		case "running":
			continue
		case "":
			ok++
		default:
			return false
		}
	}
	return ok == n
}

// Stop ends the loop, waits for the requests in flight and returns them
// all.
func (l *RequestLoop) Stop() []Request {
	close(l.done)
	l.wg.Wait()
	return l.Requests()
}

func curl(board string, start time.Time) Request {
	at := time.Now()
	url := "http://" + net.JoinHostPort(BoardIP(board), strconv.Itoa(ServicePort)) + "/"
	out, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", url).CombinedOutput()
	r := Request{Board: board, At: at.Sub(start), Took: time.Since(at)}
	switch {
	case err != nil:
		r.Err = strings.TrimSpace(fmt.Sprintf("%v: %s", err, out))
	case strings.TrimSpace(string(out)) != "200":
		r.Err = "HTTP " + strings.TrimSpace(string(out))
	}
	return r
}

// Outage summarises a RequestLoop around a fault at faultAt (since the
// loop began): failed requests, and how long after the fault the last
// failed request started (0 without failures).
func Outage(reqs []Request, faultAt time.Duration) (failed int, recovered time.Duration, worst time.Duration) {
	for _, r := range reqs {
		worst = max(worst, r.Took)
		if r.Err == "" {
			continue
		}
		failed++
		recovered = max(recovered, r.At+r.Took-faultAt)
	}
	return failed, recovered, worst
}
