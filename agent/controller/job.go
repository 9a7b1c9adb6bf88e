package controller

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/herd-dev/herd/api"
)

// ReconcileJob keeps a Job's one pod and its status. pods are the pods the
// job owns (spec.owner = jobs/<name>).
//
// In one pass it:
//   - records the last run of every pod (status.lastRun, which ObservePod
//     sets from the unit's ExecMain* properties) and the runs of the
//     instances of a pod with concurrency allow (its status.runs) in
//     status.runs, newest first, at most api.MaxJobRuns, each run once
//     (by pod, instance and start), and copies the live pod's
//     status.activeRuns;
//   - for a scheduled job: deletes terminal pods (a Lost pod's board is
//     gone: the job moves) and pods of an older template or schedule, and
//     creates a pod when no live current one is left, so the job's timer is
//     on exactly one board; the phase is Scheduled once the pod is Running
//     (its timer active), Pending before;
//   - for a job without schedule: a Succeeded pod makes the job Succeeded;
//     a Failed or Lost pod is a failed run (status.failures), and the next
//     pod comes after api.JobBackoff(failures) (phase BackingOff, status
//     nextAttempt; the Runner wakes the key then, see Index.WakeAfter),
//     unless failures exceed spec.retries: then the job is Failed.
//     Succeeded and Failed are final: nothing runs again, and a spec
//     change does not restart a run. A terminal pod's run is counted when
//     it is first recorded; the pod of the newest run is kept (it has no
//     unit, but its board keeps its journal for herdctl logs job/NAME),
//     older terminal pods are deleted.
//
// New pods are named like a deployment's (<job>-<5 chars>, counted in
// status.podsCreated); the pass's actions share one Txn, as a
// deployment's do, so a failure is counted exactly once: the failed pod's
// delete and the status write that counts it commit together.
func ReconcileJob(now time.Time, j *api.Job, pods []*api.Pod) []Action {
	return reconcileJob(now, j, pods, podNameSet(pods), nil)
}

// reconcileJob is ReconcileJob with the stored secrets, whose versions are
// part of the revision of a template that names them (api.PodRevision):
// a changed secret replaces a scheduled job's pod, as a changed template
// does, and a new run gets the secrets' current values.
func reconcileJob(now time.Time, j *api.Job, pods []*api.Pod, taken func(string) bool, secrets map[string]*api.Secret) []Action {
	if j == nil {
		return nil
	}
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, compareByName)
	jp := &jobPass{st: j.Status}
	jp.st.ObservedGeneration = j.Metadata.Generation
	jp.st.Runs = slices.Clone(jp.st.Runs)
	for _, p := range sorted {
		if !p.Status.Phase.Terminal() {
			jp.st.Runs = recordPodRuns(jp.st.Runs, p)
		}
	}
	rev, refs := api.PodRevision(j.Spec.Template, secrets)
	var create bool
	if j.Spec.Schedule != "" {
		create = jp.keepScheduled(j, sorted, rev)
	} else {
		create = jp.keepRunOnce(now, j, sorted)
	}
	if create && createsThatFit(&j.Spec.Template) > 0 {
		jp.createPod(j, taken, rev, refs)
	}
	return jp.actions(j)
}

// jobPass is what one reconcileJob pass builds: the job's new status, the
// actions in the order they apply, and the live pod, the one that holds
// the job's run or timer once the pass's actions are applied (nil: none).
type jobPass struct {
	st   api.JobStatus
	acts []Action
	live *api.Pod
}

// del deletes a pod of the job, for the reason why.
func (jp *jobPass) del(p *api.Pod, why string) {
	jp.acts = append(jp.acts, newAction(ActionDelete, p, "%s", why))
}

// keepScheduled decides which pods of a scheduled job stay: terminal pods
// (their runs recorded) and pods of an older template, schedule or
// concurrency are deleted, the first current one is the live pod and any
// other is deleted. The job is Scheduled once its live pod is Running,
// Pending before, and never waits for a next attempt. It reports whether
// a pod is to be created: when no live pod is left.
func (jp *jobPass) keepScheduled(j *api.Job, sorted []*api.Pod, rev string) bool {
	st := &jp.st
	for _, p := range sorted {
		switch {
		case p.Status.Phase.Terminal():
			st.Runs = recordPodRuns(st.Runs, p)
			jp.del(p, fmt.Sprintf("pod is %s: the job moves to another board", p.Status.Phase))
		case p.Spec.Revision != rev || p.Spec.Schedule != j.Spec.Schedule || p.Spec.Concurrency != j.Spec.Concurrency:
			jp.del(p, "the job's template, schedule or concurrency changed")
		case jp.live != nil:
			jp.del(p, "the job has a pod already")
		default:
			jp.live = p
		}
	}
	st.Phase, st.Message = api.JobPending, ""
	if jp.live != nil && jp.live.Status.Phase == api.PodRunning {
		st.Phase = api.JobScheduled
	}
	st.NextAttempt = time.Time{}
	return jp.live == nil
}

// keepRunOnce decides the pods and the phase of a job without schedule:
// it records the runs of the terminal pods (recordFinished), then sets the
// phase from them and spec.retries (runOncePhase); a final job waits for
// no next attempt. It reports whether a pod is to be created.
func (jp *jobPass) keepRunOnce(now time.Time, j *api.Job, sorted []*api.Pod) bool {
	retries := api.DefaultJobRetries
	if j.Spec.Retries != nil {
		retries = *j.Spec.Retries
	}
	failedNow := jp.recordFinished(sorted)
	create := jp.runOncePhase(now, retries, failedNow)
	if jp.st.Phase.Final() {
		jp.st.NextAttempt = time.Time{}
	}
	return create
}

// recordFinished goes through a run-once job's pods in name order. The
// first live pod is the job's, unless the job is final by then; other live
// pods are deleted. A terminal pod's run is recorded, once; unless the job
// is final already, a newly recorded success makes it Succeeded and a
// newly recorded failure or loss counts in status.failures. The terminal
// pod of the newest run is kept, the others are deleted. It reports
// whether a failure was counted.
func (jp *jobPass) recordFinished(sorted []*api.Pod) (failedNow bool) {
	st := &jp.st
	var kept []*api.Pod // terminal pods
	for _, p := range sorted {
		if !p.Status.Phase.Terminal() {
			if st.Phase.Final() || jp.live != nil {
				jp.del(p, fmt.Sprintf("the job is %s", st.Phase))
			} else {
				jp.live = p
			}
			continue
		}
		// A terminal pod's run is counted when it is recorded, once.
		// The newest run's pod is kept (it has no unit; its journal
		// stays on its board for herdctl logs job/NAME), older ones
		// go.
		run := syntheticRun(p)
		if p.Status.LastRun != nil {
			run = *p.Status.LastRun
		}
		var added bool
		st.Runs, added = api.RecordRun(st.Runs, run)
		switch {
		case !added || st.Phase.Final():
		case p.Status.Phase == api.PodSucceeded:
			st.Phase, st.Message = api.JobSucceeded, ""
		default:
			st.Failures++
			failedNow = true
		}
		kept = append(kept, p)
	}
	for _, p := range kept {
		if len(st.Runs) == 0 || st.Runs[0].Pod != p.Metadata.Name {
			jp.del(p, fmt.Sprintf("pod is %s; its run is recorded", p.Status.Phase))
		}
	}
	return failedNow
}

// runOncePhase sets a run-once job's phase once its runs are recorded: a
// final job keeps no live pod; more failures than retries make it Failed
// (its live pod is deleted); a live pod makes it Running once the pod
// starts, Pending before; a failure counted in this pass, or a next
// attempt still ahead, makes it BackingOff. Otherwise the job is Pending
// and runOncePhase reports that a pod is to be created.
func (jp *jobPass) runOncePhase(now time.Time, retries int, failedNow bool) (create bool) {
	st := &jp.st
	switch {
	case st.Phase.Final():
		jp.live = nil
	case st.Failures > retries:
		st.Phase = api.JobFailed
		st.Message = fmt.Sprintf("failed %d times (retries %d)", st.Failures, retries)
		if jp.live != nil {
			jp.del(jp.live, "the job failed")
			jp.live = nil
		}
	case jp.live != nil:
		st.Phase, st.Message = api.JobPending, ""
		if jp.live.Status.Phase == api.PodRunning || jp.live.Status.Phase == api.PodStarting {
			st.Phase = api.JobRunning
		}
	case failedNow:
		st.Phase = api.JobBackingOff
		st.NextAttempt = now.Add(api.JobBackoff(st.Failures))
		st.Message = fmt.Sprintf("run %d of %d failed; next attempt at %s", st.Failures, retries+1, st.NextAttempt.UTC().Format(time.RFC3339))
	case !st.NextAttempt.IsZero() && now.Before(st.NextAttempt):
		st.Phase = api.JobBackingOff
		st.Message = fmt.Sprintf("run %d of %d failed; next attempt at %s", st.Failures, retries+1, st.NextAttempt.UTC().Format(time.RFC3339))
	default:
		create = true
		st.Phase, st.Message = api.JobPending, ""
		st.NextAttempt = time.Time{}
	}
	return create
}

// createPod creates the job's next pod, named like a deployment's pods and
// counted in status.podsCreated, and makes it the live pod; a scheduled
// job's pod carries its schedule and concurrency. When the namer has no
// name left, nothing is created.
func (jp *jobPass) createPod(j *api.Job, taken func(string) bool, rev string, refs []api.PodSecret) {
	names := newNamer(nameKey(api.KindJob, j.Metadata.Name, j.Metadata.Created), j.Status.PodsCreated, taken)
	if name := names.name(deploymentPodPrefix(j.Metadata.Name)); name != "" {
		owner := api.OwnerRef{Kind: api.KindJob, Name: j.Metadata.Name}
		p := newPod(name, owner, j.Spec.Template, rev, refs)
		p.Spec.Schedule = j.Spec.Schedule
		why := "the job's run"
		if j.Spec.Schedule != "" {
			p.Spec.Concurrency = j.Spec.Concurrency
			why = "the pod that holds the job's timer"
		}
		jp.live = p
		jp.acts = append(jp.acts, newAction(ActionCreate, p, "%s", why))
	}
	jp.st.PodsCreated = names.next
}

// actions ends the pass: the status names the live pod, its board and its
// active runs (none: all empty), an empty run list is nil, and the status
// is written, after the pass's other actions, only if it changed. The
// actions share one Txn, keyed by the job.
func (jp *jobPass) actions(j *api.Job) []Action {
	st := jp.st
	st.Pod, st.Node, st.ActiveRuns = "", "", 0
	if jp.live != nil {
		st.Pod, st.Node, st.ActiveRuns = jp.live.Metadata.Name, jp.live.Spec.Node, jp.live.Status.ActiveRuns
	}
	if len(st.Runs) == 0 {
		st.Runs = nil
	}
	acts := jp.acts
	if !reflect.DeepEqual(st, j.Status) {
		nj := *j
		nj.Status = st
		acts = append(acts, newAction(ActionUpdateStatus, &nj, "job %s, %d runs recorded", st.Phase, len(st.Runs)))
	}
	return inTxn(acts, KeyOf(api.KindJob, j.Metadata.Name))
}

// recordPodRuns records the runs a job's pod reports: its last run
// (status.lastRun) and, for a pod with concurrency allow, the runs of its
// instances (status.runs, newest start first), recorded oldest first so
// that the newest ends up in front. Each run is recorded once
// (api.RecordRun).
func recordPodRuns(runs []api.JobRun, p *api.Pod) []api.JobRun {
	for i := len(p.Status.Runs) - 1; i >= 0; i-- {
		runs, _ = api.RecordRun(runs, p.Status.Runs[i])
	}
	if r := p.Status.LastRun; r != nil {
		runs, _ = api.RecordRun(runs, *r)
	}
	return runs
}

// syntheticRun is the run record of a terminal pod whose unit reported no
// finished run: a pod Lost with its board, or failed before its process
// ran.
func syntheticRun(p *api.Pod) api.JobRun {
	r := api.JobRun{Pod: p.Metadata.Name, Node: p.Spec.Node, Start: p.Status.StartedAt, Result: "lost"}
	switch p.Status.Phase {
	case api.PodFailed:
		r.Result, r.ExitStatus = "failed", -1
	case api.PodSucceeded:
		r.Result = "success"
	}
	return r
}

// jobWakeAfter is how long until a backing-off job's next attempt is due,
// 0 when nothing waits.
func jobWakeAfter(now time.Time, j *api.Job) time.Duration {
	if j == nil || j.Spec.Schedule != "" || j.Status.Phase != api.JobBackingOff || j.Status.NextAttempt.IsZero() {
		return 0
	}
	return max(0, j.Status.NextAttempt.Sub(now)) + time.Millisecond
}

// systemdTimeLayout is how `systemctl show` prints a timestamp (the
// listing sets TZ=UTC, so the zone is UTC).
const systemdTimeLayout = "Mon 2006-01-02 15:04:05 MST"

// parseSystemdTime reads a timestamp as `systemctl show` prints it.
func parseSystemdTime(s string) (time.Time, bool) {
	if s == "" || s == "n/a" {
		return time.Time{}, false
	}
	t, err := time.Parse(systemdTimeLayout, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// finishedRun returns the run a job pod's unit last finished, if the
// observation shows one: not running, with a start and an exit time.
func finishedRun(pod *api.Pod, obs UnitObservation) *api.JobRun {
	switch {
	case obs.ActiveState == "inactive", obs.ActiveState == "failed":
	case obs.ActiveState == "active" && obs.SubState == "exited": // RemainAfterExit=yes
	default:
		return nil
	}
	start, ok1 := parseSystemdTime(obs.ExecMainStartTimestamp)
	end, ok2 := parseSystemdTime(obs.ExecMainExitTimestamp)
	if !ok1 || !ok2 || end.Before(start) {
		return nil
	}
	if d := obs.ExecMainExitMonotonic - obs.ExecMainStartMonotonic; obs.ExecMainStartMonotonic > 0 && d >= 0 && d < int64(time.Hour*24*366/time.Microsecond) {
		// The wall-clock forms have whole seconds; the monotonic ones
		// give the duration to the microsecond.
		end = start.Add(time.Duration(d) * time.Microsecond)
	}
	return &api.JobRun{Pod: pod.Metadata.Name, Node: pod.Spec.Node, Start: start, End: end,
		ExitStatus: obs.ExecMainStatus, Result: obs.Result}
}

// instanceRuns returns the finished runs of an overlapping job pod's
// instances, newest start first (the board's monotonic clock, then the
// unit name: the order in which units.Plan keeps them on the board), at
// most api.MaxJobRuns, and how many instances are in progress (active
// but not exited, activating, reloading or deactivating). Units that are
// not instances of pod's template are ignored.
func instanceRuns(pod *api.Pod, instances []UnitObservation) ([]api.JobRun, int) {
	type done struct {
		mono int64
		unit string
		run  api.JobRun
	}
	var runs []done
	active := 0
	for _, in := range instances {
		of, id, ok := api.PodFromInstanceName(in.Unit)
		if !ok || of != pod.Metadata.Name {
			continue
		}
		if r := finishedRun(pod, in); r != nil {
			r.Instance = id
			runs = append(runs, done{in.ExecMainStartMonotonic, in.Unit, *r})
			continue
		}
		if in.ActiveState != "" && in.ActiveState != "inactive" && in.ActiveState != "failed" {
			active++
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		a, b := &runs[i], &runs[j]
		if a.mono != b.mono {
			return a.mono > b.mono
		}
		return a.unit < b.unit
	})
	var out []api.JobRun
	for _, d := range runs[:min(len(runs), api.MaxJobRuns)] {
		out = append(out, d.run)
	}
	return out, active
}

// observeJobPod is ObservePod for a job's pod (api.PodSpec.RunsToCompletion):
// the last finished run goes to status.lastRun; for a pod with concurrency
// allow, the finished runs of its instances go to status.runs
// (instanceRuns) and the number of runs in progress to
// status.activeRuns. A scheduled job's pod is Running (and ready) while its timer is active, whatever its service
// does between and during runs, and Scheduled otherwise (the placer
// starts the timer); a job without schedule is Succeeded once its unit is
// active (exited) (RemainAfterExit=yes, after exit 0), stays Scheduled while
// its unit has not started yet, and is otherwise observed like any pod.
func observeJobPod(now time.Time, pod *api.Pod, obs UnitObservation) (api.PodStatus, bool) {
	old := pod.Status
	st := old
	if r := finishedRun(pod, obs); r != nil && !reflect.DeepEqual(r, old.LastRun) {
		st.LastRun = r
	}
	if !pod.Spec.Scheduled() {
		switch {
		case obs.Found && obs.ActiveState == "active" && obs.SubState == "exited":
			// Its unit has RemainAfterExit=yes: the process is done.
			st.Phase, st.Ready = api.PodSucceeded, false
			st.Message = fmt.Sprintf("exited with status %d", obs.ExecMainStatus)
			if obs.ExecMainStatus != 0 {
				st.Phase = api.PodFailed
			}
			return st, true
		case obs.Found && obs.ActiveState == "inactive" && obs.ExecMainStartTimestamp == "" && !obs.StoppedOnDisconnect:
			st.Phase, st.Ready, st.Message = api.PodScheduled, false, "not started yet"
			return st, true
		}
		return st, false
	}
	st.Ready = false
	if pod.Spec.OverlapsRuns() {
		runs, active := instanceRuns(pod, obs.Instances)
		if !reflect.DeepEqual(runs, old.Runs) {
			st.Runs = runs
		}
		st.ActiveRuns = active
	}
	switch {
	case obs.TimerActiveState == "active":
		st.Phase, st.Ready = api.PodRunning, true
		st.Message = ""
		switch {
		case st.ActiveRuns == 1:
			st.Message = "a run is in progress"
		case st.ActiveRuns > 1:
			st.Message = fmt.Sprintf("%d runs are in progress", st.ActiveRuns)
		case obs.ActiveState == "active" || obs.ActiveState == "activating":
			st.Message = "a run is in progress"
		}
		if old.Phase != api.PodRunning {
			st.StartedAt = now
		}
	case !obs.Found:
		st.Phase = api.PodScheduled
		st.Message = fmt.Sprintf("unit %s is not on the board", obs.Unit)
	default:
		st.Phase = api.PodScheduled
		st.Message = "timer " + api.TimerName(pod.Metadata.Name) + " is not active"
	}
	return st, true
}
