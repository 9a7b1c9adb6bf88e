package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// Drain and rebalance record an intent in the store (node spec.drain,
// deployment spec.rebalance) with compare-and-swap; the leader's
// deployment controller makes the moves, one at a time per deployment,
// never below the strategy's availability (api/move.go). These commands
// then follow the fleet and print what moves.

// withdrawTimeout bounds withdrawing a drain after the command's own limit
// ran out.
const withdrawTimeout = 10 * time.Second

func (a *app) drainCmd() *cobra.Command {
	var daemons, wait bool
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a board and move its pods to the others, one at a time",
		Long: `Cordon a board and move its deployments' pods to other boards. Each pod is
replaced first (with max_surge 0, within max_unavailable) and deleted once its
replacement is available, so a deployment never has fewer available pods than
its strategy allows. Daemons' pods stay unless --daemons is given; they come
back when the board is uncordoned.

drain waits until the board is empty (limit --timeout, default 5m). When time
runs out or the command is interrupted it withdraws the drain request: moves
in flight finish or are cancelled, and the board stays cordoned. With
--wait=false it records the request and returns; herdctl describe node NODE
shows the progress, and herdctl uncordon NODE ends it.`,
		Example: `  herdctl drain b2
  herdctl drain b2 --daemons --timeout 10m
  herdctl uncordon b2`,
		Args: argsBetween(1, 1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeNames(cmd, api.KindNode, nil), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.drain(cmd, trimKindPrefix(args[0], "node"), daemons, wait)
		},
	}
	cmd.Flags().BoolVar(&daemons, "daemons", false, "also stop the daemons' pods on the board (they return on uncordon)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the board is drained; on timeout withdraw the request")
	return cmd
}

func (a *app) drain(cmd *cobra.Command, name string, daemons, wait bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.waitContext(cmd, wait)
	defer cancel()
	err = updateNode(ctx, c, name, func(n *api.Node) bool {
		want := &api.NodeDrain{Daemons: daemons, Requested: a.clock.Now().UTC()}
		if n.Spec.Unschedulable && n.Draining() && n.Spec.Drain.Daemons == daemons {
			return false
		}
		n.Spec.Unschedulable, n.Spec.Drain = true, want
		return true
	})
	if err != nil {
		return fmt.Errorf("node/%s: %w", name, err)
	}
	fmt.Fprintf(a.stdout, "node/%s cordoned, draining\n", name)
	if !wait {
		return nil
	}
	var left []*api.Pod
	last := ""
	err = a.follow(ctx, c, func(v *fleetView) (bool, error) {
		n := v.nodes[name]
		switch {
		case n == nil:
			return false, fmt.Errorf("node/%s was deleted while draining", name)
		case !n.Draining():
			return false, fmt.Errorf("the drain of node/%s was withdrawn (herdctl uncordon?)", name)
		}
		left = api.DrainLeft(n, v.podList())
		if line := drainLine(name, left, v.pods); line != last {
			last = line
			fmt.Fprintln(a.stdout, line)
		}
		return len(left) == 0, nil
	})
	if err == nil {
		fmt.Fprintf(a.stdout, "node/%s drained\n", name)
		return nil
	}
	if ctx.Err() == nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), withdrawTimeout)
	defer wcancel()
	werr := updateNode(wctx, c, name, func(n *api.Node) bool {
		had := n.Draining()
		n.Spec.Drain = nil
		return had
	})
	what := "the drain request was withdrawn and the board stays cordoned (herdctl drain to try again, herdctl uncordon to undo)"
	if werr != nil {
		what = fmt.Sprintf("withdrawing the drain request failed (%v): it stays in force until herdctl uncordon", werr)
	}
	why := "interrupted"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = fmt.Sprintf("timed out after %v", a.effectiveTimeout(defaultWaitTimeout))
	}
	return fmt.Errorf("%s draining node/%s, %s; %s", why, name, leftSummary(left, nil), what)
}

// drainLine is drain's progress line: what is left on the board, and
// for each pod, its replacement's state when it has one.
func drainLine(node string, left []*api.Pod, pods map[string]*api.Pod) string {
	if len(left) == 0 {
		return fmt.Sprintf("node/%s: no pods left", node)
	}
	return fmt.Sprintf("node/%s: %s", node, leftSummary(left, pods))
}

// leftSummary says how many pods are left and which; with pods, also how
// each one's replacement is doing.
func leftSummary(left []*api.Pod, pods map[string]*api.Pod) string {
	repl := map[string]*api.Pod{}
	for _, p := range pods {
		if p.Spec.Replaces != "" {
			repl[p.Spec.Replaces] = p
		}
	}
	parts := make([]string, 0, len(left))
	for _, p := range left {
		s := p.Metadata.Name
		if q := repl[p.Metadata.Name]; q != nil {
			s += " (replacement " + q.Metadata.Name + " " + podState(q) + ")"
		}
		parts = append(parts, s)
	}
	noun := "pods"
	if len(left) == 1 {
		noun = "pod"
	}
	return fmt.Sprintf("%d %s left: %s", len(left), noun, strings.Join(parts, ", "))
}

// podState is a pod's phase, where it is and why, in a few words.
func podState(p *api.Pod) string {
	s := string(p.Status.Phase)
	if s == "" {
		s = string(api.PodPending)
	}
	if p.Status.Phase == api.PodRunning && !p.Status.Ready {
		s += ", not ready"
	}
	if p.Spec.Node != "" {
		s += " on " + p.Spec.Node
	}
	if p.Status.Message != "" && p.Status.Phase != api.PodRunning {
		s += ": " + p.Status.Message
	}
	return s
}

// updateNode changes node name with compare-and-swap, retrying a few times
// when the node controller writes in between; change reports whether it
// changed anything (nothing is written otherwise).
func updateNode(ctx context.Context, c apiClient, name string, change func(*api.Node) bool) error {
	_, err := updateNodeChanged(ctx, c, name, change)
	return err
}

func updateNodeChanged(ctx context.Context, c apiClient, name string, change func(*api.Node) bool) (bool, error) {
	return updateCAS(ctx, c, api.KindNode, name, change)
}

// maxCASAttempts bounds updateCAS's tries when other writers (the node
// controller, the deployment's status) write in between.
const maxCASAttempts = 5

// updateCAS reads kind/name, lets change edit it and writes it back,
// compare-and-swap on the version read, again from the read on a
// conflict. It reports whether it wrote (change returns false for no).
func updateCAS[T api.Object](ctx context.Context, c apiClient, kind api.Kind, name string, change func(T) bool) (bool, error) {
	for attempt := 1; ; attempt++ {
		raw, err := c.Get(ctx, kind, name)
		if err != nil {
			return false, err
		}
		o, err := api.FromRaw(raw)
		if err != nil {
			return false, err
		}
		t, ok := o.(T)
		if !ok {
			return false, fmt.Errorf("%s: stored object is a %T", ref(kind, name), o)
		}
		if !change(t) {
			return false, nil
		}
		_, err = c.Update(ctx, t)
		if err == nil {
			return true, nil
		}
		if !api.IsCode(err, "conflict") || attempt == maxCASAttempts {
			return false, err
		}
	}
}

func (a *app) rebalanceCmd() *cobra.Command {
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "rebalance [deployment NAME]",
		Short: "Spread deployments' pods evenly over the boards again",
		Long: `Move pods until every deployment (or the one named) is spread evenly over the
boards it may run on: Ready, not cordoned, matching its node selector. After a
board comes back from a power pull its pods stay where the failover put them;
rebalance moves the fewest pods needed, one at a time, each replaced before it
is deleted, without changing the revision. --dry-run prints the moves only.`,
		Example: `  herdctl rebalance --dry-run
  herdctl rebalance deployment web`,
		Args: argsBetween(0, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []string{"deployment"}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				return a.completeNames(cmd, api.KindDeployment, nil), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) > 0 {
				kind, n, err := getArgs(args)
				if err != nil {
					return err
				}
				if kind != api.KindDeployment || n == "" {
					return usagef("rebalance: want deployment NAME (or nothing for every deployment), got %q", strings.Join(args, " "))
				}
				name = n
			}
			return a.rebalance(cmd, name, dryRun, wait)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the moves a rebalance would make, change nothing")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until every rebalance is done")
	return cmd
}

func (a *app) rebalance(cmd *cobra.Command, name string, dryRun, wait bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.waitContext(cmd, wait && !dryRun)
	defer cancel()
	v, err := listFleet(ctx, c)
	if err != nil {
		return err
	}
	deps := v.deploymentNames(name)
	if name != "" && len(deps) == 0 {
		return fmt.Errorf("deployment/%s: not found", name)
	}
	if dryRun {
		for _, d := range deps {
			fmt.Fprintln(a.stdout, rebalancePlanText(v.deps[d], v.nodeList(), v.podList()))
		}
		return nil
	}
	ids := map[string]string{}
	for _, d := range deps {
		id, err := a.requestRebalance(ctx, c, d)
		if err != nil {
			return fmt.Errorf("deployment/%s: %w", d, err)
		}
		ids[d] = id
		fmt.Fprintf(a.stdout, "deployment/%s: rebalance requested\n", d)
	}
	if !wait {
		return nil
	}
	lines := map[string]string{}
	err = a.follow(ctx, c, func(v *fleetView) (bool, error) {
		done := true
		for _, d := range deps {
			dep := v.deps[d]
			if dep == nil {
				return false, fmt.Errorf("deployment/%s was deleted while rebalancing", d)
			}
			st := dep.Status.Rebalance
			if st == nil || st.ID != ids[d] {
				done = false
				continue
			}
			if line := fmt.Sprintf("deployment/%s: %s", d, st.Message); st.Message != "" && line != lines[d] {
				lines[d] = line
				fmt.Fprintln(a.stdout, line)
			}
			done = done && st.Done
		}
		return done, nil
	})
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %v waiting for the rebalance; it goes on (herdctl describe deployment NAME shows it)", a.effectiveTimeout(defaultWaitTimeout))
	}
	return err
}

// requestRebalance records a new rebalance request on deployment name with
// compare-and-swap and returns its id.
func (a *app) requestRebalance(ctx context.Context, c apiClient, name string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	_, err := updateCAS(ctx, c, api.KindDeployment, name, func(d *api.Deployment) bool {
		d.Spec.Rebalance = &api.RebalanceRequest{ID: id, Requested: a.clock.Now().UTC()}
		return true
	})
	return id, err
}

// rebalancePlanText is rebalance --dry-run's report for one deployment.
func rebalancePlanText(d *api.Deployment, nodes []*api.Node, pods []*api.Pod) string {
	boards, counts, moves := api.PlanRebalance(d, nodes, pods)
	head := "deployment/" + d.Metadata.Name + ": "
	if len(boards) == 0 {
		return head + "no board can take its pods"
	}
	spread := make([]string, len(boards))
	for i, b := range boards {
		spread[i] = fmt.Sprintf("%s=%d", b, counts[i])
	}
	if len(moves) == 0 {
		return head + "already spread (" + strings.Join(spread, " ") + ")"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s%d moves (now %s)", head, len(moves), strings.Join(spread, " "))
	for _, m := range moves {
		fmt.Fprintf(&sb, "\n  pod/%s: %s -> %s", m.Pod, m.From, m.To)
	}
	return sb.String()
}

// fleetView is herdctl's copy of the nodes, pods and deployments, kept
// current from a watch by follow.
type fleetView struct {
	nodes map[string]*api.Node
	pods  map[string]*api.Pod
	deps  map[string]*api.Deployment
	rv    uint64 // the oldest list's resource version
	// listed holds the kind/name of objects whose state came from the
	// list, not yet from the watch.
	listed map[string]bool
}

var followedKinds = []api.Kind{api.KindNode, api.KindPod, api.KindDeployment}

func listFleet(ctx context.Context, c apiClient) (*fleetView, error) {
	v := &fleetView{nodes: map[string]*api.Node{}, pods: map[string]*api.Pod{}, deps: map[string]*api.Deployment{}, listed: map[string]bool{}}
	for i, k := range followedKinds {
		raws, rv, err := c.List(ctx, k)
		if err != nil {
			return nil, err
		}
		if i == 0 || rv < v.rv {
			v.rv = rv
		}
		for _, r := range raws {
			r.Kind = k
			if err := v.set(r, false, true); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// set stores (or, with deleted, removes) one object of a followed kind,
// from a list or from the watch. The watch starts at the oldest list's
// version, so it replays changes the lists already hold: a watch event no
// newer than a listed state is skipped (one transaction may carry two
// events of an object at one version; the list holds the last). A
// deletion carries the deleted object's last version, so it applies to a
// listed state of that version.
func (v *fleetView) set(r api.RawObject, deleted, fromList bool) error {
	if !slices.Contains(followedKinds, r.Kind) {
		return nil
	}
	key := string(r.Kind) + "/" + r.Metadata.Name
	old := v.rvOf(r.Kind, r.Metadata.Name)
	if old > r.Metadata.ResourceVersion || (!deleted && !fromList && v.listed[key] && old == r.Metadata.ResourceVersion) {
		return nil
	}
	v.listed[key] = fromList
	o, err := api.FromRaw(r)
	if err != nil {
		return err
	}
	switch o := o.(type) {
	case *api.Node:
		setOrDelete(v.nodes, o.Metadata.Name, o, deleted)
	case *api.Pod:
		setOrDelete(v.pods, o.Metadata.Name, o, deleted)
	case *api.Deployment:
		setOrDelete(v.deps, o.Metadata.Name, o, deleted)
	}
	return nil
}

// rvOf returns the resource version of the stored object, 0 if none.
func (v *fleetView) rvOf(k api.Kind, name string) uint64 {
	switch k {
	case api.KindNode:
		return rvIn(v.nodes, name)
	case api.KindPod:
		return rvIn(v.pods, name)
	case api.KindDeployment:
		return rvIn(v.deps, name)
	}
	return 0
}

func rvIn[T api.Object](m map[string]T, name string) uint64 {
	if o, ok := m[name]; ok {
		return o.GetMeta().ResourceVersion
	}
	return 0
}

func setOrDelete[T any](m map[string]T, k string, v T, deleted bool) {
	if deleted {
		delete(m, k)
		return
	}
	m[k] = v
}

func (v *fleetView) podList() []*api.Pod { return mapValues(v.pods) }

func (v *fleetView) nodeList() []*api.Node { return mapValues(v.nodes) }

func mapValues[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, x := range m {
		out = append(out, x)
	}
	return out
}

// deploymentNames returns name if it is a deployment, or every deployment
// when name is "", sorted.
func (v *fleetView) deploymentNames(name string) []string {
	var out []string
	for n := range v.deps {
		if name == "" || n == name {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// follow lists the nodes, pods and deployments, then watches them, calling
// check after the list and after every change until it returns true or an
// error, or ctx ends. A broken stream is listed again after a pause.
func (a *app) follow(ctx context.Context, c apiClient, check func(*fleetView) (bool, error)) error {
	for {
		v, err := listFleet(ctx, c)
		if err != nil {
			return err
		}
		if done, err := check(v); done || err != nil {
			return err
		}
		end, err := watchEvents(ctx, c, "", v.rv, func(ev api.WatchEvent) (bool, error) {
			if err := v.set(ev.Object, ev.Type == api.EventDeleted, false); err != nil {
				return false, err
			}
			return check(v)
		})
		if err != nil || end == watchStopped {
			return err
		}
		if end == watchBroken {
			if err := sleepCtx(ctx, a.watchRetry); err != nil {
				return err
			}
		}
	}
}
