package api

import (
	"strings"
	"time"

	"github.com/herd-dev/herd/internal/backoff"
)

// KindJob is the kind of Job objects.
const KindJob Kind = "jobs"

// Job runs a pod to completion, once (no Schedule) or at every time its
// Schedule names (a systemd timer on the one board that holds the job).
//
// Without a schedule the job's pod is a unit systemd does not restart
// (restart policy never): the job is Succeeded when it exits 0, and after
// any other end (a non-zero exit, a signal, its board lost) herd creates a
// new pod after a backoff (JobBackoff), at most Spec.Retries times; then
// the job is Failed. A Succeeded or Failed job is never run again.
//
// With a schedule the job's one pod holds, on its board, the service
// (never started when it is placed) and a timer herd-<pod>.timer with
// OnCalendar=<schedule>, enabled and started. If the board is lost the
// pod is replaced on another board like any pod, timer included; runs
// missed meanwhile are not caught up (Persistent= is not set: see
// docs/manifests.md). Every run's end reaches the leader through the
// board's unit reports and is kept in Status.Runs.
//
// With concurrency allow the pod's runs may overlap: its board holds,
// beside the service, a template of it (herd-<pod>@.service, TemplatePath)
// and the timer starts a kick unit that starts a new instance of the
// template for every run (InstanceUnitName), so a run due while another
// still runs starts beside it. Each instance is one run, recorded once.
type Job struct {
	Kind     Kind       `json:"kind"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     JobSpec    `json:"spec"`
	Status   JobStatus  `json:"status,omitzero"`
}

// JobSpec is the desired state of a Job.
type JobSpec struct {
	// Schedule is a systemd calendar event (OnCalendar= syntax, see
	// ValidateCalendar), or empty for a job that runs once.
	Schedule string `json:"schedule,omitempty"`
	// Concurrency is what a run due while the previous one is still
	// running does: ConcurrencyForbid (systemd's own: a timer does not
	// start a service that is still active; the due run is skipped) or
	// ConcurrencyReplace (the running one is stopped and the due run
	// starts: the timer starts a small constant unit, KickUnitName, that
	// restarts the service), or ConcurrencyAllow (the due run starts
	// beside the running one: the timer's kick unit starts a new
	// instance of the service's template, InstanceUnitName, for every
	// run). Replace and allow need a schedule.
	Concurrency string `json:"concurrency,omitempty"`
	// Retries is how many times a job without a schedule is run again
	// after a failed run before it is Failed (Kubernetes' backoffLimit).
	// nil means DefaultJobRetries. A scheduled job ignores it: a failed
	// run is recorded and the next one comes at its time.
	Retries *int `json:"retries,omitempty"`
	// Template is the pod the job runs. Its restart policy is "never"
	// (the default for a job; herd, not systemd, retries) and it has no
	// readiness check.
	Template PodTemplate `json:"template"`
}

// Concurrency policies.
const (
	ConcurrencyForbid  = "forbid"
	ConcurrencyReplace = "replace"
	ConcurrencyAllow   = "allow"
)

// Job defaults and limits.
const (
	// DefaultJobRetries is Spec.Retries when left out.
	DefaultJobRetries = 3
	// MaxJobRetries bounds Spec.Retries.
	MaxJobRetries = 100
	// MaxJobRuns is how many runs Status.Runs keeps, newest first. It is
	// also how many finished instances of an allow job's pod its board
	// keeps (newest start first) before herd clears the older ones.
	MaxJobRuns = 10
	// MaxJobInstances bounds the instances of one allow job's pod a
	// board's listing carries (finished ones first, then running ones by
	// name); the others are seen once these are gone.
	MaxJobInstances = 64
	// JobBackoffBase and JobBackoffMax bound the wait before a retry:
	// JobBackoffBase doubled for each failure before, at most
	// JobBackoffMax.
	JobBackoffBase = 10 * time.Second
	JobBackoffMax  = 5 * time.Minute
)

// JobBackoff is how long a job waits before its next attempt after
// failures failed runs (1 for the first retry): 10 s, 20 s, 40 s, ... at
// most 5 minutes, like Kubernetes' Job.
func JobBackoff(failures int) time.Duration {
	return backoff.Double(failures, JobBackoffBase, JobBackoffMax)
}

// JobPhase is where a job is in its life.
type JobPhase string

// Job phases.
const (
	// JobPending: the job's pod is not on a board yet.
	JobPending JobPhase = "Pending"
	// JobRunning: a job without schedule runs on its board.
	JobRunning JobPhase = "Running"
	// JobBackingOff: a failed run waits out JobBackoff before the next.
	JobBackingOff JobPhase = "BackingOff"
	// JobScheduled: a scheduled job's timer is active on its board.
	JobScheduled JobPhase = "Scheduled"
	// JobSucceeded: a job without schedule exited 0. Final.
	JobSucceeded JobPhase = "Succeeded"
	// JobFailed: a job without schedule failed Retries+1 times. Final.
	JobFailed JobPhase = "Failed"
)

// Final reports whether a job in this phase is done for good.
func (ph JobPhase) Final() bool { return ph == JobSucceeded || ph == JobFailed }

// JobStatus is the observed state of a Job.
type JobStatus struct {
	ObservedGeneration int64    `json:"observedGeneration,omitempty"`
	Phase              JobPhase `json:"phase,omitempty"`
	// Pod is the job's current pod ("" when none); Node its board.
	Pod  string `json:"pod,omitempty"`
	Node string `json:"node,omitempty"`
	// Failures counts the failed runs of a job without schedule.
	Failures int `json:"failures,omitempty"`
	// NextAttempt is when a job backing off makes its next pod.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
	// PodsCreated counts the pods herd has created for this job (pod
	// names come from it, like DeploymentStatus.PodsCreated).
	PodsCreated int64 `json:"podsCreated,omitempty"`
	// ActiveRuns is how many runs of the job are in progress on its
	// board, as its pod last saw them (PodStatus.ActiveRuns).
	ActiveRuns int `json:"activeRuns,omitempty"`
	// Runs are the last runs, newest first, at most MaxJobRuns.
	Runs       []JobRun    `json:"runs,omitempty"`
	Message    string      `json:"message,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// JobRun is one finished run of a job's unit.
type JobRun struct {
	// Pod and Node say where it ran; its unit is UnitName(Pod), or
	// InstanceUnitName(Pod, Instance) when Instance is set.
	Pod  string `json:"pod"`
	Node string `json:"node,omitempty"`
	// Instance is the instance of the pod's service template that ran,
	// for a job with concurrency allow; "" otherwise.
	Instance string `json:"instance,omitempty"`
	// Start and End are the main process's start and exit (systemd's
	// ExecMainStartTimestamp, whole seconds, board clock; End is Start
	// plus the run's duration on the board's monotonic clock, to the
	// microsecond, where the board reports it, else
	// ExecMainExitTimestamp).
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// ExitStatus is the exit status, or the signal number when Result
	// is "signal" or "core-dump".
	ExitStatus int `json:"exitStatus"`
	// Result is systemd's Result of the service: success, exit-code,
	// signal, core-dump, timeout, ... or "lost" when the board was lost
	// during the run.
	Result string `json:"result,omitempty"`
}

// Succeeded reports whether the run ended well.
func (r JobRun) Succeeded() bool { return r.Result == "success" || r.Result == "" && r.ExitStatus == 0 }

// Duration is End - Start, 0 when either is unknown.
func (r JobRun) Duration() time.Duration {
	if r.Start.IsZero() || r.End.IsZero() || r.End.Before(r.Start) {
		return 0
	}
	return r.End.Sub(r.Start)
}

// RecordRun returns runs with r added in front (newest first), unless a
// run of the same pod, instance and start is already there, at most
// MaxJobRuns.
func RecordRun(runs []JobRun, r JobRun) ([]JobRun, bool) {
	for _, o := range runs {
		if o.Pod == r.Pod && o.Instance == r.Instance && o.Start.Equal(r.Start) {
			return runs, false
		}
	}
	out := make([]JobRun, 0, min(len(runs)+1, MaxJobRuns))
	out = append(out, r)
	for _, o := range runs {
		if len(out) == MaxJobRuns {
			break
		}
		out = append(out, o)
	}
	return out, true
}

// GetKind implements Object.
func (*Job) GetKind() Kind { return KindJob }

// GetMeta implements Object.
func (j *Job) GetMeta() *ObjectMeta { return &j.Metadata }

// TimerSuffix ends a job pod's timer unit name.
const TimerSuffix = ".timer"

// TimerName returns the timer unit of a scheduled job's pod:
// herd-<pod>.timer, beside its service UnitName(pod).
func TimerName(pod string) string { return UnitPrefix + pod + TimerSuffix }

// PodFromTimerName is PodFromUnitName for timer names.
func PodFromTimerName(unit string) (string, bool) {
	s, ok := strings.CutSuffix(unit, TimerSuffix)
	if !ok {
		return "", false
	}
	return PodFromUnitName(s + UnitSuffix)
}

// RunsToCompletion reports whether the pod's unit is a run of a job: a
// pod of a Job. Its unit is not enabled (a board's reboot does not run it
// again) and, when Scheduled, not started at placement.
func (s *PodSpec) RunsToCompletion() bool { return s.Owner.Kind == KindJob }

// Scheduled reports whether the pod is a scheduled job's: its service is
// started by its timer only.
func (s *PodSpec) Scheduled() bool { return s.Owner.Kind == KindJob && s.Schedule != "" }

// defaultJob applies a Job's defaults (see SetDefaults).
func defaultJob(j *Job) {
	defaultTemplateLabels(&j.Spec.Template, j.Metadata.Name)
	if j.Spec.Template.RestartPolicy == "" {
		j.Spec.Template.RestartPolicy = RestartNever
	}
	defaultTemplate(&j.Spec.Template)
	if j.Spec.Concurrency == "" {
		j.Spec.Concurrency = ConcurrencyForbid
	}
	if j.Spec.Retries == nil {
		j.Spec.Retries = intPtr(DefaultJobRetries)
	}
}

// job checks a Job's spec: the schedule is a calendar event
// (ValidateCalendar), concurrency is forbid or, with a schedule, replace
// or allow, retries 0..MaxJobRetries, and the template is
// a pod template whose restart policy is never (herd retries, not
// systemd) and which has no readiness check (a run is not a server).
func (v *validator) job(p fieldPath, s *JobSpec) {
	if s.Schedule != "" {
		if err := ValidateCalendar(s.Schedule); err != nil {
			v.addf(p.field("schedule", "schedule"), "%q is not a systemd calendar event (OnCalendar=): %v", s.Schedule, err)
		}
	}
	cp := p.field("concurrency", "concurrency")
	switch s.Concurrency {
	case ConcurrencyForbid:
	case ConcurrencyReplace:
		if s.Schedule == "" {
			v.addf(cp, "%q needs a schedule: a job that runs once has no run to replace", s.Concurrency)
		}
	case ConcurrencyAllow:
		if s.Schedule == "" {
			v.addf(cp, "%q needs a schedule: a job that runs once has no other run to overlap", s.Concurrency)
		}
	default:
		v.addf(cp, "%q: must be %q, %q or %q", s.Concurrency, ConcurrencyForbid, ConcurrencyReplace, ConcurrencyAllow)
	}
	if s.Retries != nil && (*s.Retries < 0 || *s.Retries > MaxJobRetries) {
		v.addf(p.field("retries", "retries"), "must be between 0 and %d, got %d", MaxJobRetries, *s.Retries)
	}
	tp := p.field("template", "template")
	if s.Template.RestartPolicy != RestartNever {
		v.addf(tp.field("restartPolicy", "restart"), "%q: a job's pod runs to completion; its restart policy must be %q (herd retries a failed run, see retries)", s.Template.RestartPolicy, RestartNever)
	}
	if s.Template.Readiness != nil {
		v.addf(tp.field("readiness", "readiness"), "a job's pod runs to completion and has no readiness check")
	}
	v.template(tp, &s.Template)
}

// podSchedule checks a pod's schedule: only a job's pod has one, and it
// is a calendar event.
func (v *validator) podSchedule(p fieldPath, s *PodSpec) {
	if s.Schedule == "" {
		return
	}
	sp := p.field("schedule", "-")
	if s.Owner.Kind != KindJob {
		v.addf(sp, "only a job's pod has a schedule")
	} else if err := ValidateCalendar(s.Schedule); err != nil {
		v.addf(sp, "%q is not a systemd calendar event: %v", s.Schedule, err)
	}
	switch c := s.Concurrency; c {
	case "", ConcurrencyForbid, ConcurrencyReplace, ConcurrencyAllow:
	default:
		v.addf(p.field("concurrency", "-"), "%q: must be %q, %q or %q", c, ConcurrencyForbid, ConcurrencyReplace, ConcurrencyAllow)
	}
}

// KickUnitName is the unit the timer of a job pod with concurrency
// replace or allow starts: herd-<pod>_kick.service, a oneshot whose only
// command is `systemctl restart --no-block -- herd-<pod>.service`
// (replace) or `systemctl start --no-block --
// herd-<pod>@${INVOCATION_ID}.service` (allow: a new instance named after
// the kick's own invocation, see InstanceUnitName). The '_' keeps it from
// ever being taken for a pod's unit (pod names have none).
func KickUnitName(pod string) string { return UnitPrefix + pod + "_kick" + UnitSuffix }

// ReplacesRuns reports whether a scheduled job pod's new run replaces a
// running one (concurrency replace).
func (s *PodSpec) ReplacesRuns() bool { return s.Scheduled() && s.Concurrency == ConcurrencyReplace }

// OverlapsRuns reports whether a scheduled job pod's runs may overlap
// (concurrency allow): each run is an instance of its service's template.
func (s *PodSpec) OverlapsRuns() bool { return s.Scheduled() && s.Concurrency == ConcurrencyAllow }

// InstanceSep separates a pod's name from its instance in an instance
// unit name.
const InstanceSep = "@"

// maxInstanceID bounds an instance id: systemd's invocation ids, which
// name the instances herd starts, have 32 hex digits.
const maxInstanceID = 64

// TemplateUnitName returns the service template of a job pod with
// concurrency allow: herd-<pod>@.service, the same unit file as
// UnitName(pod), of which every run is an instance.
func TemplateUnitName(pod string) string { return UnitPrefix + pod + InstanceSep + UnitSuffix }

// InstanceUnitName returns the unit of one run of a job pod with
// concurrency allow: herd-<pod>@<id>.service. The kick unit names each
// run after its own invocation id (systemd's $INVOCATION_ID, 32
// lower-case hex digits), fresh for every start.
func InstanceUnitName(pod, id string) string {
	return UnitPrefix + pod + InstanceSep + id + UnitSuffix
}

// InstanceGlob matches the units of every run of a job pod with
// concurrency allow, for journalctl --unit: herd-<pod>@*.service.
func InstanceGlob(pod string) string { return UnitPrefix + pod + InstanceSep + "*" + UnitSuffix }

// InstanceSlice returns the slice systemd puts every instance of a job
// pod's template in: system-<escaped template prefix>.slice, with each
// '-' of herd-<pod> written \x2d as systemd escapes it (pod names have
// no other character to escape). A journal match on _SYSTEMD_SLICE= with
// it follows runs that start later, which a --unit glob (expanded once,
// when journalctl starts) does not.
func InstanceSlice(pod string) string {
	return "system-" + strings.ReplaceAll(UnitPrefix+pod, "-", `\x2d`) + ".slice"
}

// PodFromInstanceName returns the pod and instance id of a unit named by
// InstanceUnitName, and false for any other name: a pod part that is not
// a valid name, or an id that is empty, longer than 64 characters or not
// lower-case letters and digits. A pod's own unit (UnitName) is not an
// instance.
func PodFromInstanceName(unit string) (pod, id string, ok bool) {
	rest, ok := strings.CutPrefix(unit, UnitPrefix)
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, UnitSuffix)
	if !ok {
		return "", "", false
	}
	pod, id, ok = strings.Cut(rest, InstanceSep)
	if !ok || ValidateName(pod) != nil || !validInstanceID(id) {
		return "", "", false
	}
	return pod, id, true
}

// validInstanceID: 1 to maxInstanceID lower-case letters and digits.
func validInstanceID(id string) bool {
	if id == "" || len(id) > maxInstanceID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
