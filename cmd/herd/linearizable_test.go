package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
)

// TestLinearizable records a history of concurrent reads, scales and
// compare-and-swap updates of one deployment's spec.replicas, sent by
// linClients clients to random agents of three real agent processes, and
// checks it with porcupine against a register (linModel). The control run
// has no faults; the faulty run kills the leader with SIGKILL and restarts
// it, freezes the leader with SIGSTOP and continues it, and kills a
// follower and restarts it. In both, the history of requests must be
// linearizable; the history of client calls (the client's retries
// inside) must be linearizable too: each write call sends one request
// id on all its attempts, so a scale sent again is applied once. On
// failure the
// history's visualization is written to a temporary file named in the
// error. docs/linearizability.md says what is modelled how.
//
// HERD_LINZ_LONG=1 runs the fault cycle three times and the control run
// for 30 s.
func TestLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agent processes")
	}
	long := os.Getenv("HERD_LINZ_LONG") != ""
	dir := t.TempDir()
	bin := filepath.Join(dir, "herd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cl := startLinCluster(t, dir, bin)
	cl.waitHealthy(t)
	ctx := context.Background()
	reps := 1
	d := &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: linDeployment},
		Spec: api.DeploymentSpec{Replicas: &reps, Template: api.PodTemplate{
			Labels: map[string]string{"app": linDeployment},
			Exec:   []string{"/bin/true"},
			// No node has this label: the pods stay pending and
			// nothing runs on this machine.
			NodeSelector: map[string]string{"linz": "nowhere"},
		}}}
	testutil.Eventually(t, 20*time.Second, "creating the deployment", func() error {
		_, err := cl.any.Create(ctx, d)
		if api.IsCode(err, "exists") { // an earlier attempt's
			return nil
		}
		return err
	})

	control, faulty := 10*time.Second, 1
	if long {
		control, faulty = 30*time.Second, 3
	}
	t.Run("control", func(t *testing.T) {
		r := cl.newRun(t)
		r.load(control, func() {})
		r.check(t)
	})
	t.Run("faults", func(t *testing.T) {
		r := cl.newRun(t)
		r.load(0, func() {
			for range faulty {
				r.pause(5 * time.Second)
				leader := cl.leader(t)
				r.fault(t, "kill -9 leader "+leader.name, func() {
					cl.kill(t, leader)
					cl.waitNewLeader(t, leader)
					r.pause(time.Second)
					leader.start(t, cl.bin)
					cl.waitHealthy(t)
				})
				r.pause(5 * time.Second)
				leader = cl.leader(t)
				r.fault(t, "SIGSTOP leader "+leader.name+" for 2.5 s", func() {
					cl.signal(t, leader, syscall.SIGSTOP)
					r.pause(2500 * time.Millisecond)
					cl.signal(t, leader, syscall.SIGCONT)
					cl.waitHealthy(t)
				})
				r.pause(5 * time.Second)
				follower := cl.follower(t)
				r.fault(t, "kill -9 follower "+follower.name, func() {
					cl.kill(t, follower)
					r.pause(2 * time.Second)
					follower.start(t, cl.bin)
					cl.waitHealthy(t)
				})
			}
			r.pause(5 * time.Second)
		})
		r.check(t)
	})
}

const (
	linDeployment = "linz"
	linClients    = 6
	// linValues: writes set replicas to 1..linValues (pending pods).
	linValues = 5
	// linTimeout bounds one request, the client's retries included.
	linTimeout = 5 * time.Second
)

// linCluster is three agent processes on loopback and clients of them.
type linCluster struct {
	bin   string
	procs []*proc
	addrs []string
	// counted is the HTTP client of every operation's client.
	counted *http.Client
	status  []*client.Client // agent i only, for fault injection
	any     *client.Client
}

// client returns a client that sends to agent a first and moves on to the
// next only when a cannot be reached. It retries what the client deems
// safe to retry, unless strict: then it never sends a request twice. A
// new one for each operation, so that every operation starts at its
// random agent (a client starts where its last request was answered).
func (cl *linCluster) client(a int, strict bool) *client.Client {
	opts := client.Options{Token: testToken, Timeout: linTimeout, HTTPClient: cl.counted}
	if strict {
		opts.Retries = -1
	}
	c, err := client.New(append(slices.Clone(cl.addrs[a:]), cl.addrs[:a]...), opts)
	if err != nil {
		panic(err) // the addresses are the test's own
	}
	return c
}

// startLinCluster starts three server agents on loopback ports, as
// TestKill9LeaderLosesNothing does.
func startLinCluster(t *testing.T, dir, bin string) *linCluster {
	t.Helper()
	cl := &linCluster{bin: bin, procs: startAgents(t, bin, dir, "l")}
	t.Cleanup(func() {
		for _, p := range cl.procs {
			if p.cmd != nil && p.cmd.Process != nil {
				p.cmd.Process.Kill()
			}
		}
		if t.Failed() {
			for _, p := range cl.procs {
				b, _ := os.ReadFile(filepath.Join(p.dir, "agent.log"))
				t.Logf("%s log (last 60 lines):\n%s", p.name, lastLines(string(b), 60))
			}
		}
	})
	for _, p := range cl.procs {
		cl.addrs = append(cl.addrs, "http://"+p.api)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil
	base.DialContext = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	cl.counted = &http.Client{Transport: countingTransport{base}}
	for _, a := range cl.addrs {
		cl.status = append(cl.status, newLinClient(t, []string{a}, client.Options{Token: testToken, Timeout: 2 * time.Second, Retries: -1}))
	}
	cl.any = cl.client(0, false)
	return cl
}

// attemptsKey is the context key of an operation's attempts.
type attemptsKey struct{}

// attempt is one request of an operation that was sent (a request whose
// connection could not be made was never sent and is not one).
type attempt struct {
	call, ret int64
	status    int    // 0: no response (the connection broke, a deadline)
	code      string // the API error code of a non-2xx response
}

// attempts collects an operation's attempts, timed on its run's clock.
type attempts struct {
	now func() int64
	mu  sync.Mutex
	all []attempt
}

func (as *attempts) list() []attempt {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.all)
}

// withAttempts returns a context whose requests countingTransport logs.
func (r *linRun) withAttempts() (context.Context, *attempts) {
	as := &attempts{now: r.now}
	return context.WithValue(context.Background(), attemptsKey{}, as), as
}

// countingTransport logs each request of an operation that was sent, so
// that a write the client sent again is recorded as the requests it was
// on the wire: each may have been applied.
type countingTransport struct{ base http.RoundTripper }

func (ct countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	as, _ := req.Context().Value(attemptsKey{}).(*attempts)
	if as == nil {
		return ct.base.RoundTrip(req)
	}
	at := attempt{call: as.now()}
	resp, err := ct.base.RoundTrip(req)
	var op *net.OpError
	if err != nil && errors.As(err, &op) && op.Op == "dial" {
		return resp, err
	}
	if resp != nil {
		at.status = resp.StatusCode
		if resp.StatusCode > 299 {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			var ae api.APIError
			_ = json.Unmarshal(b, &ae)
			at.code = ae.Code
		}
	}
	at.ret = as.now()
	as.mu.Lock()
	as.all = append(as.all, at)
	as.mu.Unlock()
	return resp, err
}

func newLinClient(t *testing.T, addrs []string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// leaders returns the leader each live agent names (verified by the
// agent: a deposed leader is never named), "" where it names none or
// does not answer.
func (cl *linCluster) leaders() []string {
	out := make([]string, len(cl.procs))
	var wg sync.WaitGroup
	for i := range cl.procs {
		wg.Go(func() {
			if st, err := cl.status[i].Status(context.Background()); err == nil {
				out[i] = st.Leader
			}
		})
	}
	wg.Wait()
	return out
}

// waitHealthy waits until every agent answers and names the same leader.
func (cl *linCluster) waitHealthy(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "every agent to name the same leader", func() error {
		ls := cl.leaders()
		for _, l := range ls {
			if l == "" || l != ls[0] {
				return fmt.Errorf("leaders %q", ls)
			}
		}
		return nil
	})
}

// leader returns the leader the agents agree on.
func (cl *linCluster) leader(t *testing.T) *proc {
	t.Helper()
	cl.waitHealthy(t)
	name := cl.leaders()[0]
	for _, p := range cl.procs {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("leader %q is none of the agents", name)
	return nil
}

// follower returns an agent that is not the leader.
func (cl *linCluster) follower(t *testing.T) *proc {
	t.Helper()
	l := cl.leader(t)
	for _, p := range cl.procs {
		if p != l {
			return p
		}
	}
	return nil
}

// waitNewLeader waits until the agents other than old name a leader
// other than old.
func (cl *linCluster) waitNewLeader(t *testing.T, old *proc) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "a new leader", func() error {
		ls := cl.leaders()
		for i, p := range cl.procs {
			if p != old && (ls[i] == "" || ls[i] == old.name) {
				return fmt.Errorf("leaders %q", ls)
			}
		}
		return nil
	})
}

// kill kills p with SIGKILL and waits until it has exited, so that a
// restart finds its ports and data dir free.
func (cl *linCluster) kill(t *testing.T, p *proc) {
	t.Helper()
	cl.signal(t, p, syscall.SIGKILL)
	pid := p.cmd.Process.Pid
	testutil.Until(t, 10*time.Second, p.name+" to exit after SIGKILL", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

func (cl *linCluster) signal(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, p.name, err)
	}
}

// linRun is one recorded history.
type linRun struct {
	cl      *linCluster
	t0      time.Time
	initial int

	mu sync.Mutex
	// ops is the history as the requests were on the wire: a write the
	// client sent again is one operation per request. calls is the
	// history as the client's callers saw it: one operation per call,
	// the client's retries inside.
	ops, calls []porcupine.Operation
	faults     []porcupine.Annotation
	counts     map[string]int
	bad        []string // answers that are a bug of the test or the API
}

// newRun reads the deployment's replicas as the history's initial state.
func (cl *linCluster) newRun(t *testing.T) *linRun {
	t.Helper()
	r := &linRun{cl: cl, counts: map[string]int{}}
	testutil.Eventually(t, 20*time.Second, "reading the deployment", func() error {
		o, err := cl.any.Get(context.Background(), api.KindDeployment, linDeployment)
		if err != nil {
			return err
		}
		r.initial, err = replicasOf(o)
		return err
	})
	r.t0 = time.Now()
	return r
}

func (r *linRun) now() int64 { return time.Since(r.t0).Nanoseconds() }

// pause lets the clients work for d: a fault schedule's step, not a
// synchronisation.
func (r *linRun) pause(d time.Duration) { time.Sleep(d) }

// fault runs a fault (which waits until the cluster has recovered) and
// records it for the visualization.
func (r *linRun) fault(t *testing.T, what string, do func()) {
	t.Helper()
	start := r.now()
	do()
	end := r.now()
	t.Logf("%.1fs–%.1fs: %s", float64(start)/1e9, float64(end)/1e9, what)
	r.mu.Lock()
	r.faults = append(r.faults, porcupine.Annotation{Tag: "faults", Start: start, End: end, Description: what, BackgroundColor: "#fbb"})
	r.mu.Unlock()
}

// load runs linClients clients for d, or while schedule runs when d is 0,
// and returns when every client has finished its last operation.
func (r *linRun) load(d time.Duration, schedule func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Deferred, so that the clients stop also when the schedule fails
	// the test.
	defer wg.Wait()
	defer close(stop)
	for c := range linClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				a := rng.IntN(len(r.cl.procs))
				switch p := rng.IntN(10); {
				case p < 5:
					r.read(c, a)
				case p < 7:
					r.scale(c, a, 1+rng.IntN(linValues))
				default:
					r.cas(c, a, rng.IntN(2) == 0)
				}
			}
		})
	}
	if d > 0 {
		r.pause(d)
	}
	schedule()
	// On a busy machine the window may end with too few acknowledged
	// operations of a kind to check: go on until every kind has minOps,
	// for up to the window's length again (at least 10 s).
	deadline := time.Now().Add(max(d, 10*time.Second))
	for k, _ := r.thin(); k != "" && time.Now().Before(deadline); k, _ = r.thin() {
		r.pause(100 * time.Millisecond) // polling interval
	}
}

// minOps is how many acknowledged operations of each kind a history needs
// to prove anything.
const minOps = 5

// thin names the first kind of operation with fewer than minOps
// acknowledged, and how many it has ("" when none).
func (r *linRun) thin() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range []string{"read ok", "scale ok", "cas ok", "strict cas ok"} {
		if r.counts[k] < minOps {
			return k, r.counts[k]
		}
	}
	return "", 0
}

func replicasOf(o api.RawObject) (int, error) {
	obj, err := api.FromRaw(o)
	if err != nil {
		return 0, err
	}
	d, ok := obj.(*api.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return 0, fmt.Errorf("%s/%s has no spec.replicas", o.Kind, o.Metadata.Name)
	}
	return *d.Spec.Replicas, nil
}

// record records a read, the same in both histories.
func (r *linRun) record(op porcupine.Operation, count string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	r.calls = append(r.calls, op)
	r.counts[count]++
}

func (r *linRun) note(count string) {
	r.mu.Lock()
	r.counts[count]++
	r.mu.Unlock()
}

// unexpected records an answer the API must never give here (bad request,
// invalid, unauthorized, ...): the test fails on it.
func (r *linRun) unexpected(what string, err error) {
	r.mu.Lock()
	r.bad = append(r.bad, fmt.Sprintf("%s: %v", what, err))
	r.mu.Unlock()
}

// read records a linearizable GET through agent a and returns the object
// read, or false when the read failed (a failed read changes nothing and
// is left out of the history).
func (r *linRun) read(c, a int) (api.RawObject, int, bool) {
	call := r.now()
	o, err := r.cl.client(a, false).Get(context.Background(), api.KindDeployment, linDeployment)
	ret := r.now()
	meta := linMeta{Agent: r.cl.procs[a].name, Client: "retrying"}
	if api.IsCode(err, "not_found") {
		meta.Err = err.Error()
		r.record(porcupine.Operation{ClientId: c, Input: linIn{Kind: linRead}, Call: call, Output: linOut{Res: linNotFound}, Return: ret, Metadata: meta}, "read 404")
		return o, 0, false
	}
	if err != nil {
		if isUnexpected(err) {
			r.unexpected("read", err)
		}
		r.note("read failed")
		return o, 0, false
	}
	v, err := replicasOf(o)
	if err != nil {
		r.unexpected("read", err)
		return o, 0, false
	}
	meta.RV = o.Metadata.ResourceVersion
	r.record(porcupine.Operation{ClientId: c, Input: linIn{Kind: linRead}, Call: call, Output: linOut{Res: linOK, Value: v}, Return: ret, Metadata: meta}, "read ok")
	return o, v, true
}

// scale records an unconditional scale to v through agent a, with the
// client's retries: setting replicas to v again is setting it once.
func (r *linRun) scale(c, a, v int) {
	ctx, as := r.withAttempts()
	call := r.now()
	_, err := r.cl.client(a, false).Scale(ctx, linDeployment, v)
	r.write(c, a, linIn{Kind: linScale, Value: v}, call, err, false, as.list(), 0)
}

// cas records a read through agent a and then an update of the read
// object with its resourceVersion, through the retrying or the strict
// client of agent a.
func (r *linRun) cas(c, a int, strict bool) {
	o, v, ok := r.read(c, a)
	if !ok {
		return
	}
	obj, err := api.FromRaw(o)
	if err != nil {
		r.unexpected("cas decode", err)
		return
	}
	next := v%linValues + 1
	obj.(*api.Deployment).Spec.Replicas = &next
	cl := r.cl.client(a, strict)
	ctx, as := r.withAttempts()
	call := r.now()
	_, err = cl.Update(ctx, obj)
	r.write(c, a, linIn{Kind: linCAS, Expect: v, Value: next}, call, err, strict, as.list(), o.Metadata.ResourceVersion)
}

// write records a write that was called at call, sent as attempts, and
// ended with err: in the wire history one operation per attempt, in the
// call history one for the call.
//
// An attempt answered 2xx was applied; 404 is never legal; 409 and 503
// no_leader mean "not applied" and are left out of the history, so that
// a read of the value it would have written fails the check; any other
// ending (a broken connection, a deadline, 503 outcome_unknown) is of
// unknown outcome: it returns at the end of the history, so it may have
// taken effect at any point after it was sent, or never.
//
// A call is the same when it was sent once. Sent more than once, its
// attempts carry one request id, which the store applies at most once:
// an acknowledged call is one operation, in the request history too
// (its attempts are not recorded one by one, since a resend of an applied
// attempt is acknowledged without being applied again), and one that
// ended in a conflict may have been applied by an earlier attempt
// (maybe, within its interval).
func (r *linRun) write(c, a int, in linIn, call int64, err error, strict bool, sent []attempt, rv uint64) {
	ret := r.now()
	meta := linMeta{Agent: r.cl.procs[a].name, Client: "retrying", RV: rv, Sent: int32(len(sent))}
	kind := map[linKind]string{linScale: "scale", linCAS: "cas"}[in.Kind]
	if strict {
		meta.Client = "strict"
		kind = "strict " + kind
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(sent) > 1 {
		r.counts[kind+" sent again"]++
		// The attempts carry one request id: the store applies them
		// at most once, and a resend of an applied attempt is answered
		// without being applied again. So they are one operation in
		// the request history too: the call's.
		before := len(r.calls)
		defer func() {
			if len(r.calls) > before {
				r.ops = append(r.ops, r.calls[len(r.calls)-1])
			}
		}()
	}
	perAttempt := sent
	if len(sent) > 1 {
		perAttempt = nil
	}
	for i, at := range perAttempt {
		m := meta
		m.Sent = int32(i + 1)
		op := porcupine.Operation{ClientId: c, Input: in, Call: at.call, Return: at.ret}
		switch {
		case at.status >= 200 && at.status <= 299:
			op.Output = linOut{Res: linOK}
		case at.status == http.StatusNotFound:
			op.Output = linOut{Res: linNotFound}
		case at.status == http.StatusConflict,
			at.status == http.StatusServiceUnavailable && at.code == api.CodeNoLeader,
			at.status >= 400 && at.status <= 499:
			continue
		default:
			op.Output = linOut{Res: linUnknown}
			op.Return = -1 // the end of the history, set in check
			m.Err = fmt.Sprintf("attempt %d of %d: status %d %s", i+1, len(sent), at.status, at.code)
			r.counts["attempt of unknown outcome"]++
		}
		op.Metadata = m
		r.ops = append(r.ops, op)
	}

	op := porcupine.Operation{ClientId: c, Input: in, Call: call, Return: ret, Metadata: meta}
	var ae *api.APIError
	once := len(sent) <= 1
	switch {
	case err == nil:
		op.Output = linOut{Res: linOK}
		r.calls = append(r.calls, op)
		r.counts[kind+" ok"]++
		return
	case api.IsCode(err, "not_found"):
		op.Output = linOut{Res: linNotFound}
	case isUnexpected(err):
		r.bad = append(r.bad, fmt.Sprintf("%s: %v", kind, err))
		return
	case once && api.IsCode(err, "conflict"):
		r.counts[kind+" conflict"]++
		return
	case once && errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable && ae.Code == api.CodeNoLeader:
		r.counts[kind+" no_leader"]++
		return
	case len(sent) == 0:
		r.counts[kind+" not sent"]++
		return
	case api.IsCode(err, "conflict"):
		op.Output = linOut{Res: linMaybe}
	default:
		op.Output = linOut{Res: linUnknown}
		op.Return = -1
	}
	meta.Err = err.Error()
	op.Metadata = meta
	res := map[linRes]string{linNotFound: " 404", linMaybe: " maybe", linUnknown: " unknown"}[op.Output.(linOut).Res]
	r.calls = append(r.calls, op)
	r.counts[kind+res]++
}

// isUnexpected: an answer that no fault explains (the test's request was
// refused as malformed or unauthorized).
func isUnexpected(err error) bool {
	for _, code := range []string{"invalid", "bad_request", "unauthorized", "forbidden", "exists", "too_large"} {
		if api.IsCode(err, code) {
			return true
		}
	}
	return false
}

// check checks both histories and reports them: both must be
// linearizable. The client sends a write again after a broken connection
// or outcome_unknown, with the same request id, so that when the first
// attempt was applied and another write came in between, the call still
// took effect once (before the ids, it could take effect twice).
func (r *linRun) check(t *testing.T) {
	t.Helper()
	end := r.now() + 1
	var keys []string
	for k := range r.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s %d", k, r.counts[k]))
	}
	t.Logf("%d calls (%d requests in the history) in %.1fs from %d clients: %s", len(r.calls), len(r.ops), float64(end)/1e9, linClients, strings.Join(summary, ", "))
	var lat []time.Duration
	for _, op := range r.calls {
		if op.Output.(linOut).Res == linOK {
			lat = append(lat, time.Duration(op.Return-op.Call))
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
		t.Logf("acknowledged calls: p50 %v, p99 %v, max %v", q(0.5), q(0.99), q(1))
	}
	for _, b := range r.bad {
		t.Errorf("unexpected answer: %s", b)
	}
	// A history without acknowledged reads and writes of every kind
	// proves nothing.
	if k, n := r.thin(); k != "" {
		t.Errorf("only %d %q operations: the history is too thin to check", n, k)
	}
	// The deployment's resourceVersion orders its states: a read that
	// began after another had returned must not see an older one.
	back := rvRegressions(r.ops)
	for _, b := range back[:min(len(back), 5)] {
		t.Errorf("resourceVersion went back: %s", b)
	}
	r.checkHistory(t, "requests", r.ops, end, len(back) > 0, t.Errorf)
	r.checkHistory(t, "client calls", r.calls, end, false, t.Errorf)
}

// checkHistory checks one history with porcupine and reports a failure
// (or, with visualize, a pass too) through report, with the
// visualization written to a temporary file.
func (r *linRun) checkHistory(t *testing.T, name string, hist []porcupine.Operation, end int64, visualize bool, report func(string, ...any)) {
	t.Helper()
	ops := slices.Clone(hist)
	for i := range ops {
		if ops[i].Return < 0 {
			ops[i].Return = end
		}
	}
	model := linModel(r.initial)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 60*time.Second)
	t.Logf("porcupine on the %s: %s in %v", name, res, time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok && !visualize {
		return
	}
	info.AddAnnotations(r.faults)
	f, err := os.CreateTemp("", "herd-linearizable-*.html")
	if err != nil {
		t.Fatal(err)
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		t.Errorf("visualize: %v", err)
	}
	f.Close()
	switch res {
	case porcupine.Unknown:
		report("porcupine did not decide within 60 s on the %d %s; history: %s", len(ops), name, f.Name())
	case porcupine.Illegal:
		report("the %s are not linearizable; visualization: %s\n%s", name, f.Name(), r.explain(ops, info))
	default:
		report("the %s: visualization %s", name, f.Name())
	}
}

// explain names the operations the longest partial linearization could
// not take: the earliest-returning operation left out and what ran
// around it.
func (r *linRun) explain(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	in := map[int64]map[int64]bool{}
	for _, op := range longest {
		if in[op.Call] == nil {
			in[op.Call] = map[int64]bool{}
		}
		in[op.Call][op.Return] = true
	}
	var stuck *porcupine.Operation
	for i := range ops {
		if !in[ops[i].Call][ops[i].Return] && (stuck == nil || ops[i].Return < stuck.Return) {
			stuck = &ops[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "faults:\n")
	for _, f := range r.faults {
		fmt.Fprintf(&b, "  %s\n", describeSpan(f.Start, f.End, f.Description))
	}
	if len(longest) > 0 {
		last := longest[len(longest)-1]
		fmt.Fprintf(&b, "longest partial linearization: %d of %d operations, ending with %s\n", len(longest), len(ops), describeHistOp(last))
	}
	if stuck == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "first operation it cannot place: %s\noperations around it:\n", describeHistOp(*stuck))
	// The 40 operations that began last before it returned and were not
	// over 200 ms before it began.
	var near []porcupine.Operation
	for _, op := range ops {
		if op.Call <= stuck.Return && op.Return >= stuck.Call-int64(200*time.Millisecond) {
			near = append(near, op)
		}
	}
	slices.SortFunc(near, func(x, y porcupine.Operation) int { return cmpInt64(x.Call, y.Call) })
	for _, op := range near[max(0, len(near)-40):] {
		fmt.Fprintf(&b, "  %s\n", describeHistOp(op))
	}
	return b.String()
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rvRegressions returns the reads that returned an older resourceVersion
// than a read that had returned before they began, each with that read.
func rvRegressions(ops []porcupine.Operation) []string {
	var reads []porcupine.Operation
	for _, op := range ops {
		if op.Input.(linIn).Kind == linRead && op.Output.(linOut).Res == linOK {
			reads = append(reads, op)
		}
	}
	byReturn := slices.Clone(reads)
	slices.SortFunc(byReturn, func(x, y porcupine.Operation) int { return cmpInt64(x.Return, y.Return) })
	slices.SortFunc(reads, func(x, y porcupine.Operation) int { return cmpInt64(x.Call, y.Call) })
	var out []string
	var newest *porcupine.Operation // the highest resourceVersion returned so far
	j := 0
	for _, op := range reads {
		for ; j < len(byReturn) && byReturn[j].Return < op.Call; j++ {
			if newest == nil || byReturn[j].Metadata.(linMeta).RV > newest.Metadata.(linMeta).RV {
				newest = &byReturn[j]
			}
		}
		if newest != nil && op.Metadata.(linMeta).RV < newest.Metadata.(linMeta).RV {
			out = append(out, fmt.Sprintf("%s after %s", describeHistOp(op), describeHistOp(*newest)))
		}
	}
	return out
}

func describeSpan(start, end int64, what string) string {
	return fmt.Sprintf("%.3fs–%.3fs %s", float64(start)/1e9, float64(end)/1e9, what)
}

func describeHistOp(op porcupine.Operation) string {
	m, _ := op.Metadata.(linMeta)
	s := describeSpan(op.Call, op.Return, fmt.Sprintf("client %d via %s (%s): %s", op.ClientId, m.Agent, m.Client, describeLinOp(op.Input.(linIn), op.Output.(linOut))))
	if m.RV != 0 {
		s += fmt.Sprintf(" rv %d", m.RV)
	}
	if m.Sent > 1 {
		s += fmt.Sprintf(" sent %d times", m.Sent)
	}
	if m.Err != "" {
		s += " [" + m.Err + "]"
	}
	return s
}
