package placer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/artifact"
)

// observation turns a listed unit into what the controllers read.
func observation(u units.UnitState) controller.UnitObservation {
	o := controller.UnitObservation{
		Unit:           u.Unit,
		Found:          u.LoadState != "" && u.LoadState != "not-found",
		ActiveState:    u.ActiveState,
		SubState:       u.SubState,
		NRestarts:      u.NRestarts,
		ExecMainStatus: u.ExecMainStatus,

		StoppedOnDisconnect: u.StoppedOnDisconnect(),

		ExecMainStartTimestamp: u.ExecMainStartTimestamp,
		ExecMainExitTimestamp:  u.ExecMainExitTimestamp,
		Result:                 u.Result,
		ExecMainStartMonotonic: u.ExecMainStartMonotonic,
		ExecMainExitMonotonic:  u.ExecMainExitMonotonic,
		TimerActiveState:       u.TimerActiveState,
	}
	for _, in := range u.Instances {
		o.Instances = append(o.Instances, observation(in))
	}
	if kind, msg, ok := artifact.ParseStatus(u.ArtifactFailure); ok {
		o.ArtifactReason, o.ArtifactMessage = kind.Reason(), msg
	}
	return o
}

// settled reports whether a unit is where it will stay for a while:
// running and ready, failed, or stopped. Anything else (missing, starting,
// restarting, stopping, not ready yet) asks for a quick re-observation.
func settled(o controller.UnitObservation) bool {
	if !o.Found {
		return false
	}
	switch o.ActiveState {
	case "active":
		return o.Ready == nil || *o.Ready
	case "failed", "inactive":
		return true
	}
	return false
}

// observe folds a listing of the board's units into status: ObservePod for
// every bound pod (with its readiness check when its unit is active) and,
// when fence is set, ObservedUnits for the node (a no-op unless the node
// is being fenced). It returns the writes, whether a bound pod is not
// settled yet and whether a ready pod's check failed without making it
// not ready yet (readiness).
//
// For ObservedUnits a unit counts as present when systemd has it loaded or
// its file is on the board: an enabled unit file systemd has not loaded
// yet would still start at the next boot.
func (w *worker) observe(ctx context.Context, v *view, node *api.Node, observed []units.UnitState, fence bool) ([]controller.Action, bool, bool) {
	now := w.p.clock.Now()
	byUnit := make(map[string]units.UnitState, len(observed))
	listing := make([]controller.UnitObservation, 0, len(observed))
	for _, u := range observed {
		if !units.IsHerdUnit(u.Unit) {
			continue
		}
		byUnit[u.Unit] = u
		o := observation(u)
		o.Found = o.Found || u.FileHash != "" || u.TimerFileHash != "" || len(u.Instances) > 0
		listing = append(listing, o)
	}
	pods := v.ix.PodsOn(node.Metadata.Name)
	ready, doubt := w.readiness(ctx, node, pods, byUnit, now)

	var acts []controller.Action
	unsettled := false
	for _, pod := range pods {
		if !pod.Status.Phase.Occupies() {
			continue
		}
		name := api.UnitName(pod.Metadata.Name)
		o := controller.UnitObservation{Unit: name}
		if u, ok := byUnit[name]; ok {
			o = observation(u)
		}
		o.Ready = ready[pod.Metadata.Name]
		acts = append(acts, w.filesCondition(now, pod, controller.ObservePod(now, pod, o))...)
		if !settled(o) {
			unsettled = true
		}
	}
	for name := range w.fileRefused {
		if !slices.ContainsFunc(pods, func(p *api.Pod) bool { return p.Metadata.Name == name }) {
			delete(w.fileRefused, name)
		}
	}
	if fence {
		acts = append(acts, controller.ObservedUnits(now, node, pods, listing)...)
	}
	return acts, unsettled, doubt
}

// ConditionFilesWritten is the pod condition the placer sets False (reason
// ReasonFileRefused) while the board refuses one of the pod's files: a
// symbolic link in a directory of its path, or setuid/setgid bits without
// allow_setid. The pod's unit is not written or started meanwhile. The
// condition is removed once the files are written.
const (
	ConditionFilesWritten = "FilesWritten"
	ReasonFileRefused     = "FileRefused"
)

// ConditionRenderable is the pod condition the placer sets False (reason
// ReasonInvalidPod) while a pod bound to the board cannot be rendered as a
// unit (a stored pod that breaks a rule admission gained later). Nothing is
// written for it; the condition goes once the pod renders.
const (
	ConditionRenderable = "Renderable"
	ReasonInvalidPod    = "InvalidPod"
)

// filesCondition adds or removes pod's FilesWritten and Renderable
// conditions on top of the status writes acts (ObservePod's, at most one
// for pod) and returns the writes to make.
func (w *worker) filesCondition(now time.Time, pod *api.Pod, acts []controller.Action) []controller.Action {
	base := pod
	if len(acts) == 1 {
		if np, ok := acts[0].Object.(*api.Pod); ok {
			base = np
		}
	}
	var files, render *api.Condition
	msg := ""
	if r, ok := w.fileRefused[pod.Metadata.Name]; ok {
		files = &api.Condition{Type: ConditionFilesWritten, Status: api.ConditionFalse, Reason: ReasonFileRefused, Message: r.msg}
		msg = "a pod file was refused: " + r.msg
	}
	if e := w.renderNoted[pod.Metadata.Name]; e != "" {
		render = &api.Condition{Type: ConditionRenderable, Status: api.ConditionFalse, Reason: ReasonInvalidPod, Message: e}
		msg = "the pod cannot be rendered as a unit: " + e
	}
	conds, c1 := setOrRemove(base.Status.Conditions, ConditionFilesWritten, files, now)
	conds, c2 := setOrRemove(conds, ConditionRenderable, render, now)
	if !c1 && !c2 {
		return acts
	}
	np := *base
	np.Status.Conditions = conds
	reason := "pod files written"
	if msg != "" {
		np.Status.Message = msg
		reason = "pod cannot be placed on the board"
		if files != nil {
			reason = "board refused a pod file"
		}
	}
	return []controller.Action{{Type: controller.ActionUpdateStatus, Kind: api.KindPod, Name: pod.Metadata.Name, Object: &np, Reason: reason}}
}

// setOrRemove sets the condition of type t to c, or removes it when c is
// nil (api.SetCondition, api.RemoveCondition).
func setOrRemove(conds []api.Condition, t string, c *api.Condition, now time.Time) ([]api.Condition, bool) {
	if c == nil {
		return api.RemoveCondition(conds, t)
	}
	return api.SetCondition(conds, *c, now)
}

// probeMemo is the last passing readiness check of a pod, reused until
// its period is over as long as the same process runs.
type probeMemo struct {
	at      time.Time
	pid     int
	started string
}

// readiness runs the readiness checks of the bound pods whose unit is
// active, and returns each result by pod name (pods without a check, or
// whose unit is not active, have none), and whether a ready pod failed a
// check but stays ready until it has failed api.Probe.Failures in a row:
// the pass is then unsettled, so the next check comes with the next quick
// pass rather than a period later. Until the worker has reached the
// board (worker.reached) it runs none and carries over each pod's Ready.
// A check that passed within its period for the same main process is not
// run again. tcp and http checks dial the board from here, up to
// MaxParallelProbes at once; exec checks run on the board through the
// Executor, one at a time.
func (w *worker) readiness(ctx context.Context, node *api.Node, pods []*api.Pod, byUnit map[string]units.UnitState, now time.Time) (map[string]*bool, bool) {
	if !w.reached.Load() {
		// A new worker (a new leader's) that has not reached the board
		// yet keeps what the pods' status says: its view may come from a
		// report of a board that just lost power (the old leader's),
		// where a check would only wait out its timeout and hold up the
		// witness behind it, with no connection whose silence could cut
		// it short.
		out := make(map[string]*bool)
		for _, pod := range pods {
			if pod.Spec.Template.Readiness != nil {
				out[pod.Metadata.Name] = ptr(pod.Status.Ready)
			}
		}
		return out, false
	}
	var remote, local []*check
	out := make(map[string]*bool)
	bound := make(map[string]bool, len(pods))
	for _, pod := range pods {
		bound[pod.Metadata.Name] = true
		pr := pod.Spec.Template.Readiness
		u, ok := byUnit[api.UnitName(pod.Metadata.Name)]
		if pr == nil || !pod.Status.Phase.Occupies() || !ok || !(u.ActiveState == "active" || u.ActiveState == "reloading") {
			delete(w.probes, pod.Metadata.Name)
			delete(w.failures, pod.Metadata.Name)
			continue
		}
		period := time.Duration(pr.PeriodSeconds) * time.Second
		if m, ok := w.probes[pod.Metadata.Name]; ok && m.pid == u.MainPID && m.started == u.ExecMainStartTimestamp && now.Sub(m.at) < period {
			out[pod.Metadata.Name] = ptr(true)
			continue
		}
		c := &check{pod: pod, probe: pr, unit: u}
		if len(pr.Exec) > 0 {
			remote = append(remote, c)
		} else {
			local = append(local, c)
		}
	}
	for name := range w.probes {
		if !bound[name] {
			delete(w.probes, name)
		}
	}
	for name := range w.failures {
		if !bound[name] {
			delete(w.failures, name)
		}
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, w.p.cfg.MaxParallelProbes)
	for _, c := range local {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.ok, c.err = w.check(ctx, node, c.pod, c.probe)
		})
	}
	for _, c := range remote {
		c.ok, c.err = w.check(ctx, node, c.pod, c.probe)
	}
	wg.Wait()

	return w.fold(append(local, remote...), out, now)
}

// check is one readiness check of a pass: its pod, probe and unit, and
// the outcome.
type check struct {
	pod   *api.Pod
	probe *api.Probe
	unit  units.UnitState
	ok    bool
	err   error
}

// fold records the checks' outcomes into out (by pod name) and the
// worker's memory (the passing check's memo, the failures in a row): a
// pod not yet ready is ready at its first pass; a ready pod stays ready
// until it has failed api.Probe.Failures checks in a row. It returns out
// and whether a ready pod failed short of that (readiness's doubt).
func (w *worker) fold(checks []*check, out map[string]*bool, now time.Time) (map[string]*bool, bool) {
	doubt := false
	for _, c := range checks {
		name := c.pod.Metadata.Name
		if c.ok {
			out[name] = ptr(true)
			w.probes[name] = probeMemo{at: now, pid: c.unit.MainPID, started: c.unit.ExecMainStartTimestamp}
			delete(w.failures, name)
			continue
		}
		delete(w.probes, name)
		if !c.pod.Status.Ready {
			out[name] = ptr(false)
			w.log.Debug("readiness check failed", "pod", name, "err", c.err)
			continue
		}
		w.failures[name]++
		n, limit := w.failures[name], c.probe.Failures()
		if n < limit {
			out[name] = ptr(true)
			doubt = true
			w.log.Info("readiness check failed; the pod stays ready until it fails in a row", "pod", name,
				"failed", n, "threshold", limit, "err", c.err)
			continue
		}
		out[name] = ptr(false)
		delete(w.failures, name)
		w.log.Info("readiness check failed in a row: the pod is not ready", "pod", name, "failed", n, "err", c.err)
	}
	return out, doubt
}

func ptr[T any](v T) *T { return &v }

// errProbe: a readiness check could not be run as specified.
var errProbe = errors.New("placer: readiness check")

// check runs one readiness check: tcp connects to the board's address and
// the pod's host port, http GETs the path there (2xx and 3xx pass), exec
// runs argv on the board in the pod's unit context, as the pod's user
// (Executor.Probe; exit 0 passes). Each has the probe's timeout.
func (w *worker) check(ctx context.Context, node *api.Node, pod *api.Pod, pr *api.Probe) (bool, error) {
	timeout := time.Duration(pr.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = w.p.cfg.ProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case len(pr.Exec) > 0:
		unit := api.UnitName(pod.Metadata.Name)
		status, err := w.p.exec.Probe(ctx, w.node, ProbeCommand{
			Unit:            unit,
			User:            pod.Spec.Template.User,
			WorkingDir:      pod.Spec.Template.WorkingDir,
			EnvironmentFile: units.EnvFilePath(unit),
			Timeout:         timeout,
			Argv:            pr.Exec,
		})
		if err != nil {
			return false, err
		}
		if status != 0 {
			return false, fmt.Errorf("%w: exec exited with status %d", errProbe, status)
		}
		return true, nil
	case pr.TCP != "":
		addr, err := boardAddr(node, pod, pr.TCP)
		if err != nil {
			return false, err
		}
		conn, err := w.p.cfg.Dial(ctx, "tcp", addr)
		if err != nil {
			return false, err
		}
		conn.Close()
		return true, nil
	case pr.HTTP != "":
		ref := pr.HTTPPort
		if ref == "" && len(pod.Spec.Template.Ports) > 0 {
			ref = pod.Spec.Template.Ports[0].Name
		}
		addr, err := boardAddr(node, pod, ref)
		if err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+pr.HTTP, nil)
		if err != nil {
			return false, fmt.Errorf("%w: http path %q: %w", errProbe, pr.HTTP, err)
		}
		req.Header.Set("User-Agent", "herd-readiness")
		resp, err := w.p.http.Do(req)
		if err != nil {
			return false, err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Errorf("%w: http status %d", errProbe, resp.StatusCode)
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: none of tcp, http or exec is set", errProbe)
}

// boardAddr returns host:port for a probe's port reference (a port name,
// or a number) on the node's address.
func boardAddr(node *api.Node, pod *api.Pod, ref string) (string, error) {
	if node.Status.Address == "" {
		return "", fmt.Errorf("%w: node %s has no address", errProbe, node.Metadata.Name)
	}
	port, err := hostPort(pod, ref)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(node.Status.Address, strconv.Itoa(port)), nil
}

// hostPort resolves a port reference: a number is the host port itself; a
// name is looked up in spec.hostPorts, then in the template's fixed ports.
func hostPort(pod *api.Pod, ref string) (int, error) {
	if ref == "" {
		return 0, fmt.Errorf("%w: no port to check", errProbe)
	}
	if ref[0] >= '0' && ref[0] <= '9' {
		n, err := strconv.Atoi(ref)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("%w: port %q is not a port number", errProbe, ref)
		}
		return n, nil
	}
	if n, ok := pod.Spec.HostPorts[ref]; ok && n > 0 {
		return n, nil
	}
	for _, p := range pod.Spec.Template.Ports {
		if p.Name == ref && p.Port > 0 {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("%w: pod %s has no host port named %q", errProbe, pod.Metadata.Name, ref)
}
