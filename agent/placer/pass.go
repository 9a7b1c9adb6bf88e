package placer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"time"

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
	// doubt: a ready pod failed its readiness check but stays ready
	// until it fails api.Probe.Failures in a row: the quick passes start
	// again, so the next check comes soon.
	doubt bool
	// probing: a bound pod has a readiness check, which needs passes at
	// Config.ObserveInterval even while the board reports its units.
	probing bool
	// err is the first failure; the pass is retried after a backoff.
	err error
}

// pass makes the board match the pods bound to it and reports what runs:
// list the units (as a witness, for a Ready board gossip calls dead), plan, execute the plan in order (stopping at the first
// error), list again if anything was done, then fold the listing (and
// readiness checks) into pod status and, for a board being fenced, into
// the node's status.
func (w *worker) pass(ctx context.Context) (res passResult) {
	p := w.p
	ctx, cancelTimeout := context.WithTimeout(ctx, p.cfg.PassTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		// Whatever step the board's silence cut short (a listing, a
		// write, the status write after a reported listing), the pass
		// failed for the silence: pace lets gossip's verdict wake the
		// worker for its witness instead of waiting out a backoff.
		if cause := context.Cause(ctx); res.err != nil && errors.Is(cause, errSilent) && !errors.Is(res.err, errSilent) {
			res.err = fmt.Errorf("%w: %w", cause, res.err)
		}
	}()

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
	if p.silencer != nil {
		w.log.Debug("pass starts", "witness", witness, "silence", p.silencer.Silence(w.node))
	}
	w.watchSilence(ctx, cancel)
	var (
		observed []units.UnitState
		reported bool // observed came from a report or the last view, not the board
	)
	if witness {
		observed, err = w.witness(ctx)
	} else {
		observed, reported, err = w.listed(ctx)
	}
	if err != nil {
		return passResult{witness: witness, err: fmt.Errorf("listing units: %w", err)}
	}
	acts := w.plan(desired, observed)
	if len(acts) > 0 && reported && !placesOnly(acts, observed) {
		// Act only on what the board says over SSH right now.
		if observed, err = w.listSSH(ctx); err != nil {
			return passResult{err: fmt.Errorf("listing units: %w", err)}
		}
		acts = w.plan(desired, observed)
	}

	res = passResult{witness: witness, probing: hasReadiness(desired)}
	if len(acts) > 0 {
		res.acted, res.err = w.execute(ctx, acts)
		if res.acted > 0 {
			listStart := time.Now()
			observed, err = w.listSSH(ctx)
			w.log.Debug("listed after acting", "took", time.Since(listStart), "err", err)
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
	obsStart := time.Now()
	writes, unsettled, doubt := w.observe(ctx, v, node, observed, res.err == nil)
	w.log.Debug("observed", "took", time.Since(obsStart), "writes", len(writes))
	res.unsettled, res.doubt = unsettled || doubt, doubt
	if len(writes) > 0 {
		if err := p.apply(ctx, writes); err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("writing status: %w", err))
		} else {
			w.notePlacements(v.ix.PodsOn(w.node), writes, p.clock.Now())
		}
	}
	return res
}

// placesOnly reports whether acts only bring up units observed does not
// show at all: a new pod's files, unit and `enable --now`. Such a plan is
// carried out on the board's report without listing the board over SSH
// first (a round trip off every placement): each write and `enable --now`
// is idempotent, stillWanted checks each unit's binding against the store
// before anything comes up, and the listing after acting shows what the
// board really runs. Any plan that stops, removes, restarts or reloads
// still waits for a fresh listing.
func placesOnly(acts []units.Action, observed []units.UnitState) bool {
	seen := make(map[string]bool, len(observed))
	for _, u := range observed {
		seen[u.Unit] = true
	}
	for _, a := range acts {
		switch a.Type {
		case units.ActionWriteEnv, units.ActionEnable, units.ActionEnableNow, units.ActionStart:
		case units.ActionWrite:
			if a.Prune {
				return false
			}
		default:
			return false
		}
		if seen[a.Unit] {
			return false
		}
	}
	return true
}

// hasReadiness reports whether one of pods has a readiness check.
func hasReadiness(pods []*api.Pod) bool {
	return slices.ContainsFunc(pods, func(p *api.Pod) bool { return p.Spec.Template.Readiness != nil })
}

// plan returns everything this pass does to the board: units.PlanBoard
// over the bound pods and the listing, with what the worker remembers (the
// pods whose files the board refused within Config.ObserveInterval, the
// restarts an earlier pass did not get to). A plan that came out empty is
// remembered by a digest of its inputs (every bound pod's name and
// resourceVersion, and the listing), so a steady board is not re-rendered
// every pass.
func (w *worker) plan(desired []*api.Pod, observed []units.UnitState) []units.Action {
	key := planKey(desired, observed)
	if w.noopPlan == key && len(w.pendingRestart) == 0 {
		return nil
	}
	w.forgetRestarts(desired, observed)
	refused := w.recentRefusals()
	acts, err := units.PlanBoard(units.Board{Desired: desired, Observed: observed, Refused: refused, Unrestarted: w.pendingRestart})
	w.noteRenderErrors(desired, err)
	w.noopPlan = 0
	if len(acts) == 0 && err == nil && len(refused) == 0 {
		w.noopPlan = key
	}
	return acts
}

// forgetRestarts forgets the unfinished restarts that no longer have to
// happen: the unit's pod is not bound here any more, or the board no longer
// has the file written or a process running it.
func (w *worker) forgetRestarts(desired []*api.Pod, observed []units.UnitState) {
	if len(w.pendingRestart) == 0 {
		return
	}
	bound := make(map[string]bool, len(desired))
	for _, p := range desired {
		bound[api.UnitName(p.Metadata.Name)] = true
	}
	for unit, hash := range w.pendingRestart {
		if !bound[unit] || !units.StillUnrestarted(observed, unit, hash) {
			delete(w.pendingRestart, unit)
		}
	}
}

// recentRefusals returns, by unit, the hash of the unit file whose pod
// files the board refused within the last ObserveInterval: the plan leaves
// such a unit alone while its unit file is unchanged, so a refusal never
// retries in a loop.
func (w *worker) recentRefusals() map[string]string {
	var out map[string]string
	now := w.p.clock.Now()
	for pod, r := range w.fileRefused {
		if now.Sub(r.at) < w.p.cfg.ObserveInterval {
			if out == nil {
				out = make(map[string]string)
			}
			out[api.UnitName(pod)] = r.content
		}
	}
	return out
}

// planSeed seeds planKey: keys are compared only within this process.
var planSeed = maphash.MakeSeed()

// planKey digests what Plan reads.
func planKey(desired []*api.Pod, observed []units.UnitState) uint64 {
	var h maphash.Hash
	h.SetSeed(planSeed)
	w := func(s string) { h.WriteString(s); h.WriteByte(0) }
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
		w(u.TimerActiveState)
		w(u.TimerFileHash)
		for _, in := range u.Instances {
			w(in.Unit)
			w(in.ActiveState)
			w(in.SubState)
			w(strconv.FormatInt(in.ExecMainStartMonotonic, 10))
		}
	}
	return h.Sum64()
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

// execute carries out acts, a units.PlanBoard plan, in order, stopping at
// the first error, and returns how many it completed. Consecutive systemctl
// actions of one verb go in one call. Before any action that brings a unit
// up (write-env, write, enable, start, restart) the current state is read
// again and the pass stops with errStale if the unit's pod is no longer
// bound to this node (or changed, for a write), or the node stopped getting
// passes. When the board refuses a pod's files, that unit's later actions
// are left out (see run.refuse) and the pass goes on.
func (w *worker) execute(ctx context.Context, acts []units.Action) (int, error) {
	r := &run{
		w: w, acts: acts,
		refused:    make(map[string]bool),
		envWritten: make(map[string]bool),
		restarts:   make(map[string]bool),
	}
	for _, a := range acts {
		if a.Type == units.ActionRestart {
			r.restarts[a.Unit] = true
		}
	}
	done := 0
	for i := 0; i < len(acts); {
		a := acts[i]
		j := i + 1
		if _, _, ok := verbOf(a.Type); ok {
			for j < len(acts) && acts[j].Type == a.Type {
				j++
			}
		}
		batch := r.live(acts[i:j])
		i = j
		if len(batch) == 0 {
			continue
		}
		ran, err := r.step(ctx, batch)
		if err != nil {
			if errors.Is(err, errStale) {
				w.log.Info("state changed during the pass; starting over", "err", err)
			}
			return done, fmt.Errorf("%s: %w", a, err)
		}
		if !ran {
			continue
		}
		for _, b := range batch {
			w.log.Info("unit action", "action", string(b.Type), "unit", b.Unit, "reason", b.Reason)
		}
		done += len(batch)
	}
	return done, nil
}

// run is one execute call's bookkeeping.
type run struct {
	w    *worker
	acts []units.Action
	// refused: units whose pod's files the board refused; none of their
	// later actions run this pass.
	refused map[string]bool
	// envWritten: units whose env file a write-env action of this plan
	// wrote (removed again if the unit's files are then refused).
	envWritten map[string]bool
	// restarts: units the plan restarts.
	restarts map[string]bool
}

// live returns the actions of batch whose unit was not refused.
func (r *run) live(batch []units.Action) []units.Action {
	if len(r.refused) == 0 {
		return batch
	}
	var out []units.Action
	for _, a := range batch {
		if !r.refused[a.Unit] {
			out = append(out, a)
		}
	}
	return out
}

// step carries out one action, or one batch of a systemctl verb, and
// reports whether it ran (a refused write or a reload with no reason left
// did not).
func (r *run) step(ctx context.Context, batch []units.Action) (bool, error) {
	w, a := r.w, batch[0]
	switch a.Type {
	case units.ActionWriteEnv:
		// The unit's environment file (0600, root-only directory),
		// before its unit file.
		err := w.stillWanted(ctx, batch)
		if err == nil {
			err = w.writeEnv(ctx, a)
		}
		if errors.Is(err, ErrFileRefused) {
			r.refuse(ctx, a, err)
			return false, nil
		}
		r.envWritten[a.Unit] = err == nil
		return true, err
	case units.ActionWrite:
		err := w.stillWanted(ctx, batch)
		if err == nil {
			err = w.writeUnit(ctx, a)
		}
		if errors.Is(err, ErrFileRefused) {
			r.refuse(ctx, a, err)
			return false, nil
		}
		if err == nil {
			if pod, ok := api.PodFromUnitName(a.Unit); ok {
				delete(w.fileRefused, pod)
			}
			if r.restarts[a.Unit] {
				w.pendingRestart[a.Unit] = units.Hash(a.Content)
			}
		}
		return true, err
	case units.ActionRemove:
		return true, w.removeUnit(ctx, a.Unit, a.Keep)
	case units.ActionDaemonReload:
		if len(r.refused) > 0 && !slices.ContainsFunc(a.For, func(u string) bool { return !r.refused[u] }) {
			return false, nil // every unit it was for was refused
		}
		return true, w.p.exec.Systemctl(ctx, w.node, VerbDaemonReload)
	}
	verb, up, ok := verbOf(a.Type)
	if !ok {
		return false, fmt.Errorf("placer: unknown unit action %q", a.Type)
	}
	if up {
		if err := w.stillWanted(ctx, batch); err != nil {
			return false, err
		}
	}
	names := make([]string, len(batch))
	for i, b := range batch {
		names[i] = b.Unit
	}
	if err := w.p.exec.Systemctl(ctx, w.node, verb, names...); err != nil {
		return false, err
	}
	if a.Type == units.ActionRestart {
		for _, n := range names {
			delete(w.pendingRestart, n)
		}
	}
	return true, nil
}

// refuse handles the board refusing the files of a's unit: the pod gets
// its FilesWritten condition (and its write is not tried again at once),
// the unit's later actions are left out, and an environment file this pass
// wrote for a unit that has no unit file on the board is removed again, so
// no secrets stay behind (a later removal only ever finds units with a
// file).
func (r *run) refuse(ctx context.Context, a units.Action, err error) {
	w := r.w
	w.refuse(a.Unit, unitContent(r.acts, a.Unit), err)
	if a.Type == units.ActionWrite && r.envWritten[a.Unit] && !a.Prune {
		if rerr := w.p.exec.Remove(ctx, w.node, units.EnvFilePath(a.Unit)); rerr != nil {
			w.log.Warn("removing the environment file of a refused unit", "unit", a.Unit, "err", rerr)
		}
		for _, c := range a.Credentials {
			if rerr := w.p.exec.Remove(ctx, w.node, units.CredentialPath(a.Unit, c.ID())); rerr != nil {
				w.log.Warn("removing a credential of a refused unit", "unit", a.Unit, "credential", c.ID(), "err", rerr)
			}
		}
	}
	r.refused[a.Unit] = true
	if pod, ok := api.PodFromUnitName(a.Unit); ok {
		r.refused[api.TimerName(pod)] = true // a scheduled job's timer waits for its service
	}
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
	case units.ActionEnableNow:
		return VerbEnableNow, true, true
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
		if pod.Spec.Scheduled() {
			want[api.TimerName(pod.Metadata.Name)] = pod
		}
	}
	for _, a := range batch {
		pod := want[a.Unit]
		if pod == nil {
			return fmt.Errorf("%w: %s is no longer bound to %s", errStale, a.Unit, w.node)
		}
		if a.Type == units.ActionWrite {
			render := units.Render
			if a.Unit == api.TimerName(pod.Metadata.Name) {
				render = units.RenderTimer
			}
			content, err := render(pod)
			if err != nil || !bytes.Equal(content, a.Content) {
				return fmt.Errorf("%w: pod %s changed", errStale, pod.Metadata.Name)
			}
		}
	}
	return nil
}

// unitPath is where a unit's file lives on a board.
func (w *worker) unitPath(unit string) string { return path.Join(w.p.cfg.UnitDir, unit) }

// writeUnit carries out a write action: the pod's files, then its unit
// file (the plan's write-env action has written its environment file just
// before). With a.Prune, the files the old unit file listed (X-Herd-Files)
// that are neither in a.Keep (every file a pod bound here uses) nor among
// a.Files are removed afterwards.
func (w *worker) writeUnit(ctx context.Context, a units.Action) error {
	ex := w.p.exec
	pod, _ := api.PodFromUnitName(a.Unit)
	if err := w.writeCredentials(ctx, a); err != nil {
		return fmt.Errorf("pod %s: %w", pod, err)
	}
	for _, f := range a.Files {
		// The board refuses setuid/setgid bits without allow_setid
		// (ErrFileRefused), as admission did.
		opt := FileOptions{Mode: f.Mode, AllowSetID: f.AllowSetID}
		if err := ex.PutFile(ctx, w.node, f.Path, f.Content, opt); err != nil {
			return fmt.Errorf("pod %s: writing %s: %w", pod, f.Path, err)
		}
	}
	var obsolete []string
	if a.Prune {
		files, creds, err := w.unitFiles(ctx, a.Unit)
		if err != nil {
			return err
		}
		for _, f := range files {
			if !slices.Contains(a.Keep, f) && !slices.ContainsFunc(a.Files, func(pf units.PodFile) bool { return pf.Path == f }) {
				obsolete = append(obsolete, f)
			}
		}
		for _, f := range creds {
			if !slices.ContainsFunc(a.Credentials, func(c units.Credential) bool { return units.CredentialPath(a.Unit, c.ID()) == f }) {
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

// writeCredentials writes the values of the credentials a write action's
// unit loads (a.Credentials) to their files: root-owned 0600 in
// units.CredentialDir, which is made root-only (0700). The values come
// from Config.Credentials and go nowhere else: not into the action, a log
// or an error.
func (w *worker) writeCredentials(ctx context.Context, a units.Action) error {
	if len(a.Credentials) == 0 {
		return nil
	}
	if w.p.cfg.Credentials == nil {
		return errors.New("cannot write its credentials: this placer has no server key ring")
	}
	vals, err := w.p.cfg.Credentials(ctx, a.Credentials)
	if err != nil {
		return fmt.Errorf("reading its secrets: %w", err)
	}
	for _, c := range a.Credentials {
		v, ok := vals[c.ID()]
		if !ok {
			return fmt.Errorf("secret %s has no key %q any more (the pod is replaced once its owner sees the change)", c.Secret, c.Key)
		}
		p := units.CredentialPath(a.Unit, c.ID())
		if err := w.p.exec.PutFile(ctx, w.node, p, v, FileOptions{Mode: units.CredentialFileMode, ParentMode: units.SecretDirMode}); err != nil {
			return fmt.Errorf("writing credential %s: %w", c.ID(), err)
		}
	}
	return nil
}

// writeEnv carries out a write-env action: the unit's environment file
// (a.Mode, units.EnvFileMode: root's only) at a.Path, in a folder made
// root-only (units.SecretDirMode).
func (w *worker) writeEnv(ctx context.Context, a units.Action) error {
	if err := w.p.exec.PutFile(ctx, w.node, a.Path, a.Content, FileOptions{Mode: a.Mode, ParentMode: units.SecretDirMode}); err != nil {
		return fmt.Errorf("writing environment file: %w", err)
	}
	return nil
}

// refuse remembers that the board refused a pod's files (for the pod's
// condition, and so that the write is not retried at once).
func (w *worker) refuse(unit string, unitFile []byte, err error) {
	pod, _ := api.PodFromUnitName(unit)
	w.log.Warn("board refused a pod file; not writing or starting its unit", "pod", pod, "err", err)
	w.fileRefused[pod] = fileRefusal{content: units.Hash(unitFile), at: w.p.clock.Now(), msg: err.Error()}
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

// removeUnit carries out a remove action: the files the unit lists in
// X-Herd-Files except keep (those a pod bound here still uses), then its
// environment file, then the unit file. The unit file goes last: if the
// pass stops midway, it still names what is left, and the next pass
// removes the rest.
func (w *worker) removeUnit(ctx context.Context, unit string, keep []string) error {
	ex := w.p.exec
	files, creds, err := w.unitFiles(ctx, unit)
	if err != nil {
		return err
	}
	for _, f := range files {
		if slices.Contains(keep, f) {
			continue
		}
		if err := w.removePodFile(ctx, unit, f); err != nil {
			return fmt.Errorf("removing %s, listed by %s: %w", f, unit, err)
		}
	}
	for _, f := range creds {
		if err := ex.Remove(ctx, w.node, f); err != nil {
			return fmt.Errorf("removing credential %s of %s: %w", f, unit, err)
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

// unitFiles returns the pod files a unit file on the board lists and the
// credential files it loads: none if the file is missing or was not
// written by herd (logged), only absolute, clean paths, and only
// credential files of that unit (units.IsCredentialPath).
func (w *worker) unitFiles(ctx context.Context, unit string) (files, creds []string, err error) {
	b, err := w.p.exec.ReadFile(ctx, w.node, w.unitPath(unit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading unit file: %w", err)
	}
	meta, err := units.ReadMeta(bytes.NewReader(b))
	if err != nil {
		w.log.Warn("unit file has no readable herd metadata; its pod files stay", "unit", unit, "err", err)
		return nil, nil, nil
	}
	for _, f := range meta.Files {
		if f == "/" || !path.IsAbs(f) || path.Clean(f) != f {
			w.log.Warn("unit file lists a bad pod file path; leaving it", "unit", unit, "path", f)
			continue
		}
		files = append(files, f)
	}
	for _, f := range meta.Credentials {
		if !units.IsCredentialPath(unit, f) {
			w.log.Warn("unit file loads a credential from a path herd does not write; leaving it", "unit", unit, "path", f)
			continue
		}
		creds = append(creds, f)
	}
	return files, creds, nil
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
