package controller

import (
	"fmt"
	"reflect"
	"time"

	"github.com/herd-dev/herd/api"
)

// MessageStoppedOnDisconnect is the message of a pod whose unit its board
// stopped while cut off from the servers (api.OnDisconnect).
const MessageStoppedOnDisconnect = "stopped by its board while cut off from the servers; starting it again"

// ConditionArtifactsFetched is False while a pod's unit cannot start
// because the board could not fetch one of its artifacts (reasons
// ArtifactMismatch, ArtifactUnreachable, ArtifactTooLarge, ArtifactRefused,
// ArtifactFailed; see package units/artifact).
const ConditionArtifactsFetched = "ArtifactsFetched"

// artifactCondition returns st's conditions with ArtifactsFetched set from
// obs, or removed when the unit is active or no failure is on record.
func artifactCondition(now time.Time, st api.PodStatus, obs UnitObservation) []api.Condition {
	if obs.ArtifactReason == "" || !obs.Found || st.Phase == api.PodRunning {
		conds, _ := api.RemoveCondition(st.Conditions, ConditionArtifactsFetched)
		return conds
	}
	conds, _ := api.SetCondition(st.Conditions, api.Condition{Type: ConditionArtifactsFetched, Status: api.ConditionFalse,
		Reason: obs.ArtifactReason, Message: obs.ArtifactMessage}, now)
	return conds
}

// ObservePod folds what the executor saw of a pod's unit into the pod's
// status. Only pods bound to a board and not terminal (Scheduled, Starting,
// Running) are updated: Pending pods have no unit yet, and Lost, Failed and
// Succeeded pods are their owner's to replace.
//
//   - unit not found: Scheduled (the executor has yet to write it, or must
//     write it again), not ready;
//   - active (or reloading): Running, ready when the readiness check passes
//     or there is none; StartedAt is set when it becomes Running;
//   - activating or deactivating (starting, restarting after a crash,
//     stopping): Starting, not ready;
//   - stopped by the board's own agent while cut off from the servers
//     (obs.StoppedOnDisconnect, inactive or failed): Scheduled with
//     MessageStoppedOnDisconnect, whatever the exit status and restart
//     policy; the executor starts it again;
//   - failed: Failed. systemd only leaves a unit failed when it will not
//     restart it: restart policy never, a clean-exit policy, or its start
//     limit was hit;
//   - inactive: Succeeded after exit 0 with restart policy never or
//     on-failure, Failed after a non-zero exit, otherwise Scheduled (stopped;
//     the executor starts it again).
//
// A job's pod (api.PodSpec.RunsToCompletion) also gets its unit's last
// finished run in status.lastRun; a scheduled job's pod follows its
// timer instead (observeJobPod).
//
// Restarts is systemd's NRestarts. A unit that is not active and has an
// artifact fetch failure on record gets the condition ArtifactsFetched=False
// (the failure's reason and message) and the message "artifact: ..."; the
// condition goes once the unit is active or the failure is gone. Status is
// written only when it changes.
func ObservePod(now time.Time, pod *api.Pod, obs UnitObservation) []Action {
	if pod == nil {
		return nil
	}
	if !pod.Status.Phase.Occupies() {
		return nil
	}
	old := pod.Status
	st := old
	if pod.Spec.RunsToCompletion() {
		js, done := observeJobPod(now, pod, obs)
		if done {
			if reflect.DeepEqual(js, old) {
				return nil
			}
			np := *pod
			np.Status = js
			return []Action{newAction(ActionUpdateStatus, &np, "job unit %s/%s, timer %q: %s", obs.ActiveState, obs.SubState, obs.TimerActiveState, js.Phase)}
		}
		st = js
	}
	st.Ready = false
	if obs.Found {
		st.Restarts = obs.NRestarts
	}
	policy := pod.Spec.Template.RestartPolicy
	if policy == "" {
		policy = api.RestartAlways
	}
	switch {
	case !obs.Found:
		st.Phase = api.PodScheduled
		if old.Phase != api.PodScheduled {
			st.Message = fmt.Sprintf("unit %s is gone from the board", obs.Unit)
		}
	case obs.ActiveState == "active" || obs.ActiveState == "reloading":
		st.Phase = api.PodRunning
		st.Ready = obs.Ready == nil || *obs.Ready
		st.Message = ""
		if !st.Ready {
			st.Message = "readiness check failing"
		}
		if old.Phase != api.PodRunning {
			st.StartedAt = now
		}
	case obs.ActiveState == "activating" || obs.ActiveState == "deactivating":
		st.Phase = api.PodStarting
		st.Message = ""
		if obs.SubState == "auto-restart" {
			st.Message = fmt.Sprintf("restarting after exit status %d", obs.ExecMainStatus)
		}
	case obs.StoppedOnDisconnect:
		// Whatever its exit status and restart policy: the board stopped
		// it on purpose, and the pod is still wanted there.
		st.Phase = api.PodScheduled
		st.Message = MessageStoppedOnDisconnect
	case obs.ActiveState == "failed":
		st.Phase = api.PodFailed
		st.Message = fmt.Sprintf("unit failed (%s) with exit status %d after %d restarts", obs.SubState, obs.ExecMainStatus, obs.NRestarts)
	case obs.ActiveState == "inactive" && obs.ExecMainStatus == 0 && policy != api.RestartAlways:
		st.Phase = api.PodSucceeded
		st.Message = "exited with status 0"
	case obs.ActiveState == "inactive" && obs.ExecMainStatus != 0:
		st.Phase = api.PodFailed
		st.Message = fmt.Sprintf("exited with status %d", obs.ExecMainStatus)
	case obs.ActiveState == "inactive":
		st.Phase = api.PodScheduled
		st.Message = "unit is stopped"
	default:
		return nil // a state herd does not know: leave the pod alone
	}
	st.Conditions = artifactCondition(now, st, obs)
	if c := api.FindCondition(st.Conditions, ConditionArtifactsFetched); c != nil && (st.Phase == api.PodStarting || st.Phase == api.PodFailed) {
		st.Message = "artifact: " + c.Message
	}
	if reflect.DeepEqual(st, old) {
		return nil
	}
	np := *pod
	np.Status = st
	reason := fmt.Sprintf("unit %s/%s", obs.ActiveState, obs.SubState)
	if !obs.Found {
		reason = "unit not found"
	}
	return []Action{newAction(ActionUpdateStatus, &np, "%s: %s", reason, st.Phase)}
}
