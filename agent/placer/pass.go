package placer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// passResult is what one pass did.
type passResult struct {
	// skip: the node gets no passes (down, or gone from the state).
	skip bool
	// witness: the pass was a witness (a Ready board gossip calls dead):
	// the next one follows after Config.WitnessInterval, failed or not.
	witness bool
	// sweep: the pass was a sweep of a down board (nodeSweep), paced like
	// a witness; its failures are expected (the board is down).
	sweep bool
	// acted counts the board operations executed.
	acted int
	// unsettled: a bound pod's unit is not yet running and ready.
	unsettled bool
	// err is the first failure; the pass is retried after a backoff.
	err error
}

// pass makes the board match the pods bound to it and reports what runs:
// list the units (as a witness, for a Ready board gossip calls dead), plan, execute the plan in order (stopping at the first
// error), list again if anything was done, then fold the listing (and
// readiness checks) into pod status and, for a board being fenced, into
// the node's status.
func (w *worker) pass(ctx context.Context) passResult {
	p := w.p
	ctx, cancelTimeout := context.WithTimeout(ctx, p.cfg.PassTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	v, err := p.view(ctx)
	if err != nil {
		return passResult{err: fmt.Errorf("reading state: %w", err)}
	}
	switch v.eligible(w.node) {
	case nodeActive:
	case nodeSweep:
		return w.sweep(ctx, cancel, v)
	default:
		return passResult{skip: true}
	}
	desired := v.desired(w.node)
	witness := v.witnessing(w.node)
	w.watchSilence(ctx, cancel)
	var observed []units.UnitState
	if witness {
		observed, err = w.witness(ctx)
	} else {
		observed, err = p.exec.ShowUnits(ctx, w.node)
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errSilent) && !witness {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return passResult{witness: witness, err: fmt.Errorf("listing units: %w", err)}
	}
	acts := w.plan(desired, observed)

	res := passResult{witness: witness}
	if len(acts) > 0 {
		res.acted, res.err = w.execute(ctx, acts, desired, observed)
		if res.acted > 0 {
			observed, err = p.exec.ShowUnits(ctx, w.node)
			if err != nil {
				res.err = errors.Join(res.err, fmt.Errorf("listing units after acting: %w", err))
				return res
			}
		}
	}

	// Status is computed against fresh state: the pass took time and
	// the writes compare-and-swap on resourceVersions.
	v, err = p.view(ctx)
	if err != nil {
		res.err = errors.Join(res.err, fmt.Errorf("reading state: %w", err))
		return res
	}
	node := v.ix.Node(w.node)
	if node == nil {
		res.skip = res.err == nil
		return res
	}
	writes, unsettled := w.observe(ctx, v, node, observed, res.err == nil)
	res.unsettled = unsettled
	if len(writes) > 0 {
		if err := p.apply(ctx, writes); err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("writing status: %w", err))
		}
	}
	return res
}

// plan returns the actions that make the board match desired: units.Plan
// plus finishRestarts. A plan that came out empty is remembered by a digest
// of its inputs (every bound pod's name and resourceVersion, and the
// listing), so a steady board is not re-rendered every pass.
func (w *worker) plan(desired []*api.Pod, observed []units.UnitState) []units.Action {
	key := planKey(desired, observed)
	if w.noopPlan == key && len(w.pendingRestart) == 0 {
		return nil
	}
	acts, err := units.Plan(desired, observed)
	w.noteRenderErrors(desired, err)
	acts = append(acts, w.finishRestarts(desired, observed, acts)...)
	w.noopPlan = [16]byte{}
	if len(acts) == 0 && err == nil {
		w.noopPlan = key
	}
	return acts
}

// finishRestarts completes the restarts of changed units that an earlier
// pass wrote but did not get to restart (it stopped at an error between
// the write and the restart). Plan cannot see them: the file on the board
// is already current, and once systemd reloaded it nothing marks the
// running process as stale. It returns a daemon-reload (unless planned)
// and a restart for every such unit that is still bound here, still has
// the content written and still runs; others are forgotten.
func (w *worker) finishRestarts(desired []*api.Pod, observed []units.UnitState, planned []units.Action) []units.Action {
	if len(w.pendingRestart) == 0 {
		return nil
	}
	bound := make(map[string]bool, len(desired))
	for _, p := range desired {
		bound[api.UnitName(p.Metadata.Name)] = true
	}
	seen := make(map[string]units.UnitState, len(observed))
	for _, u := range observed {
		seen[u.Unit] = u
	}
	touched := make(map[string]bool)
	reload := false
	for _, a := range planned {
		touched[a.Unit] = a.Type == units.ActionWrite || a.Type == units.ActionRestart || touched[a.Unit]
		reload = reload || a.Type == units.ActionDaemonReload
	}
	var restart []units.Action
	for _, unit := range slices.Sorted(maps.Keys(w.pendingRestart)) {
		u, ok := seen[unit]
		switch {
		case touched[unit]:
			continue // this plan rewrites or restarts it anyway
		case !bound[unit] || !ok || u.FileHash != w.pendingRestart[unit] ||
			!(u.ActiveState == "active" || u.ActiveState == "activating" || u.ActiveState == "reloading"):
			delete(w.pendingRestart, unit)
			continue
		}
		restart = append(restart, units.Action{Type: units.ActionRestart, Unit: unit, Reason: "pod spec changed; the restart did not happen"})
	}
	if len(restart) > 0 && !reload {
		restart = append([]units.Action{{Type: units.ActionDaemonReload, Reason: "unit files changed: finishing a restart"}}, restart...)
	}
	return restart
}

// planKey digests what Plan reads.
func planKey(desired []*api.Pod, observed []units.UnitState) [16]byte {
	h := fnv.New128a()
	w := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	for _, p := range desired {
		w(p.Metadata.Name)
		w(strconv.FormatUint(p.Metadata.ResourceVersion, 10))
	}
	w("--")
	for _, u := range observed {
		w(u.Unit)
		w(u.LoadState)
		w(u.ActiveState)
		w(u.UnitFileState)
		w(strconv.FormatBool(u.NeedDaemonReload))
		w(strconv.Itoa(u.ExecMainStatus))
		w(u.ExecMainStartTimestamp)
		w(u.FileHash)
	}
	var k [16]byte
	h.Sum(k[:0])
	return k
}

// noteRenderErrors logs, once per pod and error, the pods Plan could not
// render (they get no actions), and remembers them for their Renderable
// condition until they render or are no longer bound here.
func (w *worker) noteRenderErrors(desired []*api.Pod, err error) {
	var errs []error
	if err != nil {
		errs = []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
	}
	failed := make(map[string]error, len(errs))
	for _, e := range errs {
		var re *units.RenderError
		pod := ""
		if errors.As(e, &re) {
			pod = re.Pod
		}
		failed[pod] = e
	}
	for pod := range w.renderNoted {
		if _, ok := failed[pod]; !ok {
			delete(w.renderNoted, pod)
		}
	}
	for pod, e := range failed {
		if w.renderNoted[pod] == e.Error() {
			continue
		}
		w.renderNoted[pod] = e.Error()
		w.log.Warn("pod cannot be rendered as a unit; leaving it alone", "pod", pod, "err", e)
	}
}

// execute carries out acts in order, stopping at the first error, and
// returns how many it completed. Consecutive systemctl actions of one verb
// go in one call. Before any action that brings a unit up (write, enable,
// start, restart) the current state is read again and the pass stops with
// errStale if the unit's pod is no longer bound to this node (or changed,
// for a write), or the node stopped getting passes.
func (w *worker) execute(ctx context.Context, acts []units.Action, desired []*api.Pod, observed []units.UnitState) (int, error) {
	p := w.p
	pods := make(map[string]*api.Pod, len(desired))
	protected := make(map[string]bool)
	for _, pod := range desired {
		pods[api.UnitName(pod.Metadata.Name)] = pod
		for _, f := range pod.Spec.Template.Files {
			protected[f.Path] = true
		}
	}
	seen := make(map[string]units.UnitState, len(observed))
	for _, u := range observed {
		seen[u.Unit] = u
	}
	restarts := make(map[string]bool)
	for _, a := range acts {
		if a.Type == units.ActionRestart {
			restarts[a.Unit] = true
		}
	}

	// refused: units whose pod's files the board refused; none of their
	// later actions run this pass.
	refused := make(map[string]bool)
	// envWritten: units whose env file a write-env action of this plan
	// wrote (removed again if the unit's files are then refused).
	envWritten := make(map[string]bool)
	done := 0
	for i := 0; i < len(acts); {
		a := acts[i]
		j := i + 1
		var err error
		switch a.Type {
		case units.ActionWriteEnv:
			// The unit's environment file (0600, root-only directory),
			// before its unit file.
			pod := pods[a.Unit]
			if pod != nil && w.refusedRecently(pod, unitContent(acts, a.Unit)) {
				refused[a.Unit] = true
				i = j
				continue
			}
			if err = w.stillWanted(ctx, acts[i:j]); err == nil {
				err = w.writeEnv(ctx, a.Unit, a.Content)
			}
			if errors.Is(err, ErrFileRefused) && pod != nil {
				w.refuse(pod, unitContent(acts, a.Unit), err)
				refused[a.Unit] = true
				err = nil
				i = j
				continue
			}
			if err == nil {
				envWritten[a.Unit] = true
			}
		case units.ActionWrite:
			pod := pods[a.Unit]
			if refused[a.Unit] || pod != nil && w.refusedRecently(pod, a.Content) {
				refused[a.Unit] = true
				i = j
				continue
			}
			if err = w.stillWanted(ctx, acts[i:j]); err == nil {
				err = w.writeUnit(ctx, a, pod, seen[a.Unit], protected)
			}
			if errors.Is(err, ErrFileRefused) && pod != nil {
				w.refuse(pod, a.Content, err)
				// Leave no secrets behind for a unit that has no file (a
				// later removal only ever finds units with a file).
				if envWritten[a.Unit] && seen[a.Unit].FileHash == "" {
					if rerr := p.exec.Remove(ctx, w.node, units.EnvFilePath(a.Unit)); rerr != nil {
						w.log.Warn("removing the environment file of a refused unit", "unit", a.Unit, "err", rerr)
					}
				}
				refused[a.Unit] = true
				i = j
				continue
			}
			if err == nil && pod != nil {
				delete(w.fileRefused, pod.Metadata.Name)
			}
			if err == nil && restarts[a.Unit] {
				w.pendingRestart[a.Unit] = units.Hash(a.Content)
			}
		case units.ActionRemove:
			err = w.removeUnit(ctx, a.Unit, protected)
		case units.ActionDaemonReload:
			if !reloadNeeded(acts, refused, observed) {
				i = j
				continue
			}
			err = p.exec.Systemctl(ctx, w.node, VerbDaemonReload)
		default:
			verb, up, ok := verbOf(a.Type)
			if !ok {
				return done, fmt.Errorf("placer: unknown unit action %q", a.Type)
			}
			for j < len(acts) && acts[j].Type == a.Type {
				j++
			}
			names := make([]string, 0, j-i)
			batch := make([]units.Action, 0, j-i)
			for _, b := range acts[i:j] {
				if refused[b.Unit] {
					continue
				}
				names = append(names, b.Unit)
				batch = append(batch, b)
			}
			if len(names) == 0 {
				i = j
				continue
			}
			if up {
				err = w.stillWanted(ctx, batch)
			}
			if err == nil {
				err = p.exec.Systemctl(ctx, w.node, verb, names...)
			}
			if err == nil && a.Type == units.ActionRestart {
				for _, n := range names {
					delete(w.pendingRestart, n)
				}
			}
		}
		if err != nil {
			if errors.Is(err, errStale) {
				w.log.Info("state changed during the pass; starting over", "err", err)
			}
			return done, fmt.Errorf("%s: %w", a, err)
		}
		n := 0
		for _, b := range acts[i:j] {
			if refused[b.Unit] {
				continue
			}
			w.log.Info("unit action", "action", string(b.Type), "unit", b.Unit, "reason", b.Reason)
			n++
		}
		done += n
		i = j
	}
	return done, nil
}

// verbOf maps a unit action to its systemctl verb and says whether it
// brings the unit up.
func verbOf(t units.ActionType) (verb string, up, ok bool) {
	switch t {
	case units.ActionStop:
		return VerbStop, false, true
	case units.ActionDisable:
		return VerbDisable, false, true
	case units.ActionResetFailed:
		return VerbResetFailed, false, true
	case units.ActionEnable:
		return VerbEnable, true, true
	case units.ActionStart:
		return VerbStart, true, true
	case units.ActionRestart:
		return VerbRestart, true, true
	}
	return "", false, false
}

// stillWanted checks, against the current state, that every unit of batch
// belongs to a pod still bound to this node and not terminal, that the
// node still gets passes, and for a write that the pod still renders to
// the content about to be written. This is what keeps "exactly N": a unit
// is only brought up for a pod bound here in the current snapshot.
func (w *worker) stillWanted(ctx context.Context, batch []units.Action) error {
	v, err := w.p.view(ctx)
	if err != nil {
		return fmt.Errorf("reading state: %w", err)
	}
	if v.eligible(w.node) != nodeActive {
		return fmt.Errorf("%w: node %s no longer gets passes", errStale, w.node)
	}
	want := make(map[string]*api.Pod)
	for _, pod := range v.desired(w.node) {
		want[api.UnitName(pod.Metadata.Name)] = pod
	}
	for _, a := range batch {
		pod := want[a.Unit]
		if pod == nil {
			return fmt.Errorf("%w: %s is no longer bound to %s", errStale, a.Unit, w.node)
		}
		if a.Type == units.ActionWrite {
			content, err := units.Render(pod)
			if err != nil || !bytes.Equal(content, a.Content) {
				return fmt.Errorf("%w: pod %s changed", errStale, pod.Metadata.Name)
			}
		}
	}
	return nil
}

// unitPath is where a unit's file lives on a board.
func (w *worker) unitPath(unit string) string { return path.Join(w.p.cfg.UnitDir, unit) }

// writeUnit writes a pod's files, then its unit file (Plan's write-env
// action has written its environment file just before). For a unit that
// already had a file, the files the old unit listed (X-Herd-Files) that
// neither this pod nor another pod bound here uses any more are removed
// afterwards.
func (w *worker) writeUnit(ctx context.Context, a units.Action, pod *api.Pod, old units.UnitState, protected map[string]bool) error {
	ex := w.p.exec
	if pod == nil {
		return fmt.Errorf("placer: no bound pod for %s", a.Unit)
	}
	keep := make(map[string]bool, len(pod.Spec.Template.Files))
	for i, f := range pod.Spec.Template.Files {
		mode, err := f.Perm()
		if err != nil {
			return fmt.Errorf("pod %s: spec.template.files[%d]: %w", pod.Metadata.Name, i, err)
		}
		opt := FileOptions{Mode: mode, AllowSetID: f.AllowSetID}
		if mode&(os.ModeSetuid|os.ModeSetgid) != 0 && !opt.AllowSetID {
			return fmt.Errorf("pod %s: spec.template.files[%d]: %w: mode %s of %s has setuid/setgid bits and allow_setid is not set",
				pod.Metadata.Name, i, ErrFileRefused, f.Mode, f.Path)
		}
		if err := ex.PutFile(ctx, w.node, f.Path, []byte(f.Content), opt); err != nil {
			return fmt.Errorf("pod %s: writing %s: %w", pod.Metadata.Name, f.Path, err)
		}
		keep[f.Path] = true
	}
	var obsolete []string
	if old.FileHash != "" {
		files, err := w.unitFiles(ctx, a.Unit)
		if err != nil {
			return err
		}
		for _, f := range files {
			if !keep[f] && !protected[f] {
				obsolete = append(obsolete, f)
			}
		}
	}
	if err := ex.PutFile(ctx, w.node, w.unitPath(a.Unit), a.Content, FileOptions{Mode: 0o644}); err != nil {
		return fmt.Errorf("writing unit file: %w", err)
	}
	for _, f := range obsolete {
		if err := w.removePodFile(ctx, a.Unit, f); err != nil {
			return fmt.Errorf("removing %s, no longer listed by %s: %w", f, a.Unit, err)
		}
	}
	return nil
}

// writeEnv writes a unit's environment file: mode 0600, owned by root, in
// the env directory, which is made root-only (0700) so no pod user can read
// another pod's environment or swap anything into the path.
func (w *worker) writeEnv(ctx context.Context, unit string, content []byte) error {
	if err := w.p.exec.PutFile(ctx, w.node, units.EnvFilePath(unit), content, FileOptions{Mode: 0o600, ParentMode: 0o700}); err != nil {
		return fmt.Errorf("writing environment file: %w", err)
	}
	return nil
}

// refuse remembers that the board refused a pod's files (for the pod's
// condition, and so that the write is not retried at once).
func (w *worker) refuse(pod *api.Pod, unitFile []byte, err error) {
	w.log.Warn("board refused a pod file; not writing or starting its unit", "pod", pod.Metadata.Name, "err", err)
	w.fileRefused[pod.Metadata.Name] = fileRefusal{content: units.Hash(unitFile), at: w.p.clock.Now(), msg: err.Error()}
}

// unitContent returns the unit file acts write for unit, nil if none.
func unitContent(acts []units.Action, unit string) []byte {
	for _, a := range acts {
		if a.Type == units.ActionWrite && a.Unit == unit {
			return a.Content
		}
	}
	return nil
}

// removePodFile removes a file a unit listed. A removal the board refuses
// (a symbolic link in a directory of the path, planted by the pod's user)
// leaves the file and is only logged: retrying cannot help, and it must not
// keep the unit, or a fenced board, from being cleaned up.
func (w *worker) removePodFile(ctx context.Context, unit, f string) error {
	err := w.p.exec.Remove(ctx, w.node, f)
	if errors.Is(err, ErrFileRefused) {
		w.log.Warn("board refused to remove a pod file; leaving it", "unit", unit, "path", f, "err", err)
		return nil
	}
	return err
}

// removeUnit removes the files a unit lists in X-Herd-Files (except those
// a pod bound here still uses), then its environment file, then the unit
// file. The unit file goes last: if the pass stops midway, it still names
// what is left, and the next pass removes the rest.
func (w *worker) removeUnit(ctx context.Context, unit string, protected map[string]bool) error {
	ex := w.p.exec
	files, err := w.unitFiles(ctx, unit)
	if err != nil {
		return err
	}
	for _, f := range files {
		if protected[f] {
			continue
		}
		if err := w.removePodFile(ctx, unit, f); err != nil {
			return fmt.Errorf("removing %s, listed by %s: %w", f, unit, err)
		}
	}
	if err := ex.Remove(ctx, w.node, units.EnvFilePath(unit)); err != nil {
		return fmt.Errorf("removing environment file: %w", err)
	}
	if err := ex.Remove(ctx, w.node, w.unitPath(unit)); err != nil {
		return fmt.Errorf("removing unit file: %w", err)
	}
	return nil
}

// unitFiles returns the pod files a unit file on the board lists: none if
// the file is missing or was not written by herd (logged), and only
// absolute, clean paths.
func (w *worker) unitFiles(ctx context.Context, unit string) ([]string, error) {
	b, err := w.p.exec.ReadFile(ctx, w.node, w.unitPath(unit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading unit file: %w", err)
	}
	meta, err := units.ReadMeta(bytes.NewReader(b))
	if err != nil {
		w.log.Warn("unit file has no readable herd metadata; its pod files stay", "unit", unit, "err", err)
		return nil, nil
	}
	var out []string
	for _, f := range meta.Files {
		if f == "/" || !path.IsAbs(f) || path.Clean(f) != f {
			w.log.Warn("unit file lists a bad pod file path; leaving it", "unit", unit, "path", f)
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// refusedRecently reports whether the board refused this pod's files
// within the last ObserveInterval and the pod's unit (content) has not
// changed since: its write is not tried again yet, so a refusal never
// retries in a loop.
func (w *worker) refusedRecently(pod *api.Pod, content []byte) bool {
	r, ok := w.fileRefused[pod.Metadata.Name]
	return ok && r.content == units.Hash(content) && w.p.clock.Now().Sub(r.at) < w.p.cfg.ObserveInterval
}

// reloadNeeded reports whether a planned daemon-reload still has a reason
// once the writes of refused units are left out: a unit file written or
// removed in this pass, or a listed unit systemd has a stale or no view
// of (other than the refused ones).
func reloadNeeded(acts []units.Action, refused map[string]bool, observed []units.UnitState) bool {
	if len(refused) == 0 {
		return true
	}
	for _, a := range acts {
		if (a.Type == units.ActionWrite || a.Type == units.ActionRemove) && !refused[a.Unit] {
			return true
		}
	}
	for _, u := range observed {
		if !refused[u.Unit] && (u.NeedDaemonReload || u.FileHash != "" && (u.LoadState == "" || u.LoadState == "not-found")) {
			return true
		}
	}
	return false
}

// apply writes status actions; one caller at a time.
func (p *Placer) apply(ctx context.Context, acts []controller.Action) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	for _, a := range acts {
		p.log.Info("status", "kind", string(a.Kind), "name", a.Name, "reason", a.Reason)
	}
	return p.writer.Apply(ctx, acts)
}
