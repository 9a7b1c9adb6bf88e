package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// rolloutProgress is how far the rollout of one deployment or daemon got,
// read from the object alone. It is pure data: the formatters below turn it
// into apply --wait's and rollout status's lines.
type rolloutProgress struct {
	kind     api.Kind
	name     string
	gen      int64 // metadata.generation
	observed int64 // status.observedGeneration
	// want is spec.replicas (deployments) or status.desired (daemons).
	want int
	// updated is status.updatedReplicas (deployments) or status.current
	// (daemons, which do not count pods by revision).
	updated int
	// total is every pod the controller keeps, old revisions included:
	// status.replicas or status.current.
	total int
	// available is status.availableReplicas or status.ready.
	available int
	// failure is the reason and message of a ReplicaFailure condition that
	// is True, "" otherwise.
	failure string
}

// progressOf reads o's rollout progress; ok is false for kinds that have
// no rollout.
func progressOf(o api.Object) (p rolloutProgress, ok bool) {
	m := o.GetMeta()
	p = rolloutProgress{kind: o.GetKind(), name: m.Name, gen: m.Generation}
	var conds []api.Condition
	switch o := o.(type) {
	case *api.Deployment:
		st := o.Status
		p.observed, p.want, p.updated, p.total, p.available = st.ObservedGeneration, replicasOf(o), st.UpdatedReplicas, st.Replicas, st.AvailableReplicas
		conds = st.Conditions
	case *api.Daemon:
		st := o.Status
		p.observed, p.want, p.updated, p.total, p.available = st.ObservedGeneration, st.Desired, st.Current, st.Current, st.Ready
		conds = st.Conditions
	default:
		return p, false
	}
	for _, c := range conds {
		if c.Type == api.ConditionReplicaFailure && c.Status == api.ConditionTrue {
			p.failure = c.Message
			if c.Reason != "" {
				p.failure = c.Reason + ": " + c.Message
			}
		}
	}
	return p, true
}

// isObserved reports whether the controller has seen the current spec.
func (p rolloutProgress) isObserved() bool { return p.observed >= p.gen }

// done reports whether the rollout is finished: the current generation is
// observed, every wanted pod is updated and available, and no other pod
// (of an old revision, or surplus) is left.
func (p rolloutProgress) done() bool {
	return p.isObserved() && p.updated == p.want && p.available == p.want && p.total == p.want
}

// applyLine is apply --wait's progress text.
func (p rolloutProgress) applyLine() string {
	if !p.isObserved() {
		return fmt.Sprintf("waiting for generation %d to be observed (observed %d)", p.gen, p.observed)
	}
	if p.kind == api.KindDaemon {
		switch {
		case p.available != p.want:
			return fmt.Sprintf("%d of %d ready", p.available, p.want)
		case p.total != p.want:
			return fmt.Sprintf("%d pods, want %d: waiting for surplus pods to stop", p.total, p.want)
		}
		return fmt.Sprintf("rolled out: %d of %d ready", p.available, p.want)
	}
	switch {
	case p.available < p.want:
		return fmt.Sprintf("%d of %d replicas available (%d updated)", p.available, p.want, p.updated)
	case p.available > p.want:
		return fmt.Sprintf("%d replicas available, want %d: waiting for old replicas to stop", p.available, p.want)
	case p.updated != p.want:
		return fmt.Sprintf("%d of %d replicas updated", p.updated, p.want)
	case p.total != p.want:
		return fmt.Sprintf("%d replicas, want %d: waiting for old replicas to stop", p.total, p.want)
	}
	return fmt.Sprintf("rolled out: %d of %d replicas available", p.available, p.want)
}

// rolloutStatus says whether o (a deployment or daemon) is rolled out, and
// how far it got, in apply --wait's words.
func rolloutStatus(o api.Object) (done bool, msg string) {
	p, ok := progressOf(o)
	if !ok {
		return true, "nothing to wait for"
	}
	return p.done(), p.applyLine()
}

// who is `deployment "web"`, as rollout status names an object.
func (p rolloutProgress) who() string { return fmt.Sprintf("%s %q", singular(p.kind), p.name) }

// pendingReason says what rollout status still waits for, "" when done.
func (p rolloutProgress) pendingReason() string {
	pods := "replicas"
	if p.kind == api.KindDaemon {
		pods = "pods"
	}
	switch {
	case !p.isObserved():
		return fmt.Sprintf("spec update not observed yet (generation %d, observed %d)", p.gen, p.observed)
	case p.kind == api.KindDeployment && p.updated < p.want:
		return fmt.Sprintf("%d out of %d new replicas have been updated", p.updated, p.want)
	case p.kind == api.KindDaemon && p.total < p.want:
		return fmt.Sprintf("%d out of %d pods have been placed", p.total, p.want)
	case p.total > p.want:
		return fmt.Sprintf("%d old %s are pending termination", p.total-p.want, pods)
	case p.kind == api.KindDaemon && p.available != p.want:
		return fmt.Sprintf("%d of %d pods are ready", p.available, p.want)
	case p.available != p.want:
		return fmt.Sprintf("%d of %d updated replicas are available", p.available, p.want)
	case p.updated != p.want:
		return fmt.Sprintf("%d of %d %s are updated", p.updated, p.want, pods)
	}
	return ""
}

// statusLine is rollout status's progress line, kubectl's words.
func (p rolloutProgress) statusLine() string {
	switch r := p.pendingReason(); {
	case r == "":
		return p.who() + " successfully rolled out"
	case !p.isObserved():
		return fmt.Sprintf("Waiting for %s spec update to be observed...", p.who())
	default:
		return fmt.Sprintf("Waiting for %s rollout to finish: %s...", p.who(), r)
	}
}

// rolloutTarget is one object a rollout waiter follows.
type rolloutTarget struct {
	kind    api.Kind
	name    string
	rv      uint64 // newest resourceVersion seen
	seen    bool
	last    rolloutProgress
	line    string // last progress line printed
	warning string // last ReplicaFailure printed
	done    bool
}

// rolloutWaiter follows deployments and daemons until they are rolled out,
// printing a line each time one's progress reads differently. It is used
// by one goroutine.
type rolloutWaiter struct {
	stdout, stderr io.Writer
	targets        map[string]*rolloutTarget // by kind/name
	// line renders a target's progress line.
	line func(rolloutProgress) string
	// timedOut is the error for a target not done when time ran out.
	timedOut func(t *rolloutTarget, timeout time.Duration) error
}

func (w *rolloutWaiter) add(kind api.Kind, name string) {
	w.targets[ref(kind, name)] = &rolloutTarget{kind: kind, name: name}
}

// update takes a newer state of a target and prints progress, and the
// message of a ReplicaFailure condition as a warning (once per message).
func (w *rolloutWaiter) update(o api.Object) {
	t, ok := w.targets[ref(o.GetKind(), o.GetMeta().Name)]
	if !ok || o.GetMeta().ResourceVersion < t.rv {
		return
	}
	p, ok := progressOf(o)
	if !ok {
		return
	}
	t.rv, t.seen, t.last = o.GetMeta().ResourceVersion, true, p
	t.done = p.done()
	if line := w.line(p); line != t.line {
		t.line = line
		fmt.Fprintln(w.stdout, line)
	}
	if p.failure != "" && p.failure != t.warning {
		fmt.Fprintf(w.stderr, "warning: %s: %s\n", ref(t.kind, t.name), p.failure)
	}
	t.warning = p.failure
}

func (w *rolloutWaiter) allDone() bool {
	for _, t := range w.targets {
		if !t.done {
			return false
		}
	}
	return true
}

// pending returns one error per target not yet rolled out.
func (w *rolloutWaiter) pending(timeout time.Duration) error {
	var keys []string
	for k, t := range w.targets {
		if !t.done {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var errs multiError
	for _, k := range keys {
		errs = append(errs, w.timedOut(w.targets[k], timeout))
	}
	return errs
}

// wait watches the targets until each is rolled out or ctx ends; at its
// deadline the error names what each unfinished target waits for. Kinds
// are listed first, then watched from the oldest list: replayed events are
// harmless (update ignores older states). A target deleted meanwhile is an
// error; a broken stream is re-listed after a pause.
func (w *rolloutWaiter) wait(ctx context.Context, c apiClient, timeout, retry time.Duration) error {
	kinds := map[api.Kind]bool{}
	for _, t := range w.targets {
		kinds[t.kind] = true
	}
	var watchKind api.Kind // "" watches every kind
	if len(kinds) == 1 {
		for k := range kinds {
			watchKind = k
		}
	}
	failed := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return w.pending(timeout)
		}
		return err
	}
	for {
		var fromRV uint64
		first := true
		for _, k := range []api.Kind{api.KindDeployment, api.KindDaemon} {
			if !kinds[k] {
				continue
			}
			raws, rv, err := c.List(ctx, k)
			if err != nil {
				return failed(err)
			}
			if first || rv < fromRV {
				fromRV, first = rv, false
			}
			found := map[string]bool{}
			for _, r := range raws {
				r.Kind = k
				o, err := api.FromRaw(r)
				if err != nil {
					return err
				}
				found[ref(k, r.Metadata.Name)] = true
				w.update(o)
			}
			for key, t := range w.targets {
				if t.kind == k && !found[key] {
					return fmt.Errorf("%s was deleted while waiting for its rollout", key)
				}
			}
		}
		if w.allDone() {
			return nil
		}
		end, err := watchEvents(ctx, c, watchKind, fromRV, func(ev api.WatchEvent) (bool, error) {
			key := ref(ev.Object.Kind, ev.Object.Metadata.Name)
			if _, ok := w.targets[key]; !ok {
				return false, nil
			}
			if ev.Type == api.EventDeleted {
				return false, fmt.Errorf("%s was deleted while waiting for its rollout", key)
			}
			o, err := api.FromRaw(ev.Object)
			if err != nil {
				return false, err
			}
			w.update(o)
			return w.allDone(), nil
		})
		if err != nil {
			return failed(err)
		}
		if end == watchStopped {
			return nil
		}
		if end == watchBroken {
			if err := sleepCtx(ctx, retry); err != nil {
				return failed(err)
			}
		}
	}
}

// waitApplied is apply --wait: it follows the applied deployments and
// daemons until each is rolled out, printing "deployment/web: ..." lines.
func (a *app) waitApplied(ctx context.Context, c apiClient, results []api.ApplyResult, timeout time.Duration) error {
	w := &rolloutWaiter{
		stdout:  a.stdout,
		stderr:  a.stderr,
		targets: map[string]*rolloutTarget{},
		line: func(p rolloutProgress) string {
			return ref(p.kind, p.name) + ": " + p.applyLine()
		},
		timedOut: func(t *rolloutTarget, timeout time.Duration) error {
			msg := "no status yet"
			if t.seen {
				msg = t.last.applyLine()
			}
			return fmt.Errorf("timed out after %v waiting for %s: %s", timeout, ref(t.kind, t.name), msg)
		},
	}
	for _, r := range results {
		if r.Kind == api.KindDeployment || r.Kind == api.KindDaemon {
			w.add(r.Kind, r.Name)
		}
	}
	if len(w.targets) == 0 {
		return nil
	}
	return w.wait(ctx, c, timeout, a.watchRetry)
}

func (a *app) rolloutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "rollout",
		Short:             "Follow, list and undo the rollouts of a deployment or daemon",
		Args:              cobra.ArbitraryArgs,
		RunE:              groupRunE,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	status := &cobra.Command{
		Use:   "status (deployment|daemon) NAME",
		Short: "Wait until a deployment or daemon is rolled out, showing progress",
		Long: `Wait until a deployment or daemon is rolled out, printing a line each time
its progress changes.

A deployment is rolled out when its current spec has been observed by the
controller (status.observedGeneration >= metadata.generation), every wanted
replica is updated and available, and no old replica is left. A daemon is
rolled out when its spec has been observed and as many pods as matching
nodes exist and are ready. A ReplicaFailure condition is printed as a warning
while waiting goes on.

Exits 0 once rolled out, 1 when --timeout (default 5m) passes first.`,
		Example: `  herdctl rollout status deployment web
  herdctl rollout status deploy/web --timeout 2m
  herdctl rollout status daemon node-exporter`,
		Args:              argsBetween(1, 2),
		ValidArgsFunction: a.rolloutCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := getArgs(args)
			if err != nil {
				return err
			}
			if kind != api.KindDeployment && kind != api.KindDaemon {
				return usagef("rollout status: only deployments and daemons have rollouts, not %s", kind)
			}
			if name == "" {
				return usagef("rollout status: missing NAME")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultWaitTimeout)
			defer cancel()
			timeout := a.effectiveTimeout(defaultWaitTimeout)
			// Fail early, with the server's message, on a missing object.
			if _, err := c.Get(ctx, kind, name); err != nil {
				return err
			}
			w := &rolloutWaiter{
				stdout:  a.stdout,
				stderr:  a.stderr,
				targets: map[string]*rolloutTarget{},
				line:    rolloutProgress.statusLine,
				timedOut: func(t *rolloutTarget, timeout time.Duration) error {
					reason := "no status yet"
					if t.seen {
						reason = t.last.pendingReason()
					}
					who := rolloutProgress{kind: t.kind, name: t.name}.who()
					return fmt.Errorf("timed out after %v waiting for %s rollout to finish: %s", timeout, who, reason)
				},
			}
			w.add(kind, name)
			return w.wait(ctx, c, timeout, a.watchRetry)
		},
	}
	cmd.AddCommand(status, a.rolloutHistoryCmd(), a.rolloutUndoCmd())
	return cmd
}
