package placer

import (
	"context"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// Observer is told what the placer does, for metrics. Its methods are
// called from the workers, concurrently; they must be cheap and must not
// block.
type Observer interface {
	// Placed is called once per pod, when the placer has recorded its unit
	// running for the first time: latency is the time from the pod's
	// binding (its Scheduled condition turning True) to that write.
	Placed(node string, latency time.Duration)
	// BoardCall is called after each Executor call to node: op is one of
	// BoardOps, took its duration, err its failure (nil on success).
	BoardCall(node, op string, took time.Duration, err error)
}

// Executor operations, as BoardCall names them.
const (
	OpShowUnits = "show_units"
	OpPutFile   = "put_file"
	OpRemove    = "remove"
	OpReadFile  = "read_file"
	OpSystemctl = "systemctl"
	OpProbe     = "probe"
)

// BoardOps are the values of BoardCall's op.
var BoardOps = []string{OpShowUnits, OpPutFile, OpRemove, OpReadFile, OpSystemctl, OpProbe}

// observedExecutor tells an Observer of every call it passes on to exec.
type observedExecutor struct {
	exec Executor
	obs  Observer
}

var _ Executor = (*observedExecutor)(nil)

func (o *observedExecutor) done(node, op string, start time.Time, err error) {
	o.obs.BoardCall(node, op, time.Since(start), err)
}

func (o *observedExecutor) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	start := time.Now()
	us, err := o.exec.ShowUnits(ctx, node)
	o.done(node, OpShowUnits, start, err)
	return us, err
}

var _ MarkedLister = (*observedExecutor)(nil)

// ShowUnitsMarked passes on to exec's ShowUnitsMarked, or to ShowUnits
// with a zero mark when exec is no MarkedLister.
func (o *observedExecutor) ShowUnitsMarked(ctx context.Context, node string) ([]units.UnitState, unitreport.Mark, error) {
	start := time.Now()
	var (
		us   []units.UnitState
		mark unitreport.Mark
		err  error
	)
	if ml, ok := o.exec.(MarkedLister); ok {
		us, mark, err = ml.ShowUnitsMarked(ctx, node)
	} else {
		us, err = o.exec.ShowUnits(ctx, node)
	}
	o.done(node, OpShowUnits, start, err)
	return us, mark, err
}

func (o *observedExecutor) PutFile(ctx context.Context, node, path string, content []byte, opt FileOptions) error {
	start := time.Now()
	err := o.exec.PutFile(ctx, node, path, content, opt)
	o.done(node, OpPutFile, start, err)
	return err
}

func (o *observedExecutor) Remove(ctx context.Context, node, path string) error {
	start := time.Now()
	err := o.exec.Remove(ctx, node, path)
	o.done(node, OpRemove, start, err)
	return err
}

func (o *observedExecutor) ReadFile(ctx context.Context, node, path string) ([]byte, error) {
	start := time.Now()
	b, err := o.exec.ReadFile(ctx, node, path)
	o.done(node, OpReadFile, start, err)
	return b, err
}

func (o *observedExecutor) Systemctl(ctx context.Context, node, verb string, names ...string) error {
	start := time.Now()
	err := o.exec.Systemctl(ctx, node, verb, names...)
	o.done(node, OpSystemctl, start, err)
	return err
}

func (o *observedExecutor) Probe(ctx context.Context, node string, c ProbeCommand) (int, error) {
	start := time.Now()
	st, err := o.exec.Probe(ctx, node, c)
	o.done(node, OpProbe, start, err)
	return st, err
}

// notePlacements tells the Observer of every pod in writes (status writes
// just applied) whose unit runs for the first time: its stored copy in
// before had never run (no StartedAt), the write makes it Running. The
// latency is measured from its Scheduled condition's transition to now.
func (w *worker) notePlacements(before []*api.Pod, writes []controller.Action, now time.Time) {
	if w.p.obs == nil {
		return
	}
	old := make(map[string]*api.Pod, len(before))
	for _, p := range before {
		old[p.Metadata.Name] = p
	}
	for _, a := range writes {
		np, ok := a.Object.(*api.Pod)
		if !ok || np.Status.Phase != api.PodRunning {
			continue
		}
		op := old[np.Metadata.Name]
		if op == nil || op.Status.Phase == api.PodRunning || !op.Status.StartedAt.IsZero() {
			continue
		}
		for _, c := range op.Status.Conditions {
			if c.Type == api.ConditionScheduled && c.Status == api.ConditionTrue && !c.LastTransitionTime.IsZero() {
				w.p.obs.Placed(w.node, max(0, now.Sub(c.LastTransitionTime)))
			}
		}
	}
}
