//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// checkTimeline checks, after victim lost its power at pulled, that
// `herdctl events` tells the failover in order: the board dead, its pods
// lost, replacements bound elsewhere, started and ready, the service's
// endpoints updated; and logs the timeline with offsets from the pull.
func checkTimeline(t *testing.T, ctx context.Context, victim string, lost []api.Pod, pulled time.Time) {
	t.Helper()
	lostNames := map[string]bool{}
	for _, p := range lost {
		lostNames[p.Metadata.Name] = true
	}
	var evs []api.Event
	var missing string
	err := Poll(ctx, pollFast, "the failover in herdctl events", func(ctx context.Context) (bool, string) {
		all, err := fleet.Events(ctx, viaExcept(victim))
		if err != nil {
			return false, err.Error()
		}
		evs = slices.DeleteFunc(all, func(e api.Event) bool { return e.Spec.Time.Before(pulled.Add(-time.Second)) })
		missing = timelineGap(evs, victim, lostNames)
		return missing == "", missing
	})
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  +%5.2fs %-16s %-22s %s", e.Spec.Time.Sub(pulled).Seconds(), e.Spec.Reason, e.Spec.Object, e.Spec.Message)
	}
	t.Logf("timeline after the power pull on %s:%s", victim, b.String())
	if err != nil {
		t.Errorf("herdctl events: %v", err)
	}
}

// timelineGap names the first step of the failover that evs, oldest
// first, lack or show out of order ("" when the story is whole).
func timelineGap(evs []api.Event, victim string, lost map[string]bool) string {
	at := func(pred func(e api.Event) bool, after time.Time) (time.Time, bool) {
		for _, e := range evs {
			if !e.Spec.Time.Before(after) && pred(e) {
				return e.Spec.Time, true
			}
		}
		return time.Time{}, false
	}
	dead, ok := at(func(e api.Event) bool {
		return e.Spec.Object == api.OwnerRef{Kind: api.KindNode, Name: victim} && e.Spec.Reason == api.ReasonNodeDead
	}, time.Time{})
	if !ok {
		return "node/" + victim + " Dead"
	}
	lostAt, ok := at(func(e api.Event) bool { return e.Spec.Reason == api.ReasonLost && lost[e.Spec.Object.Name] }, dead)
	if !ok {
		return "a Lost pod of " + victim + " after it was Dead"
	}
	var replacement string
	bound, ok := at(func(e api.Event) bool {
		if e.Spec.Reason == api.ReasonBound && e.Spec.Object.Kind == api.KindPod && !lost[e.Spec.Object.Name] && e.Spec.Node != victim {
			replacement = e.Spec.Object.Name
			return true
		}
		return false
	}, lostAt.Add(-time.Second))
	if !ok {
		return "a replacement Bound to another board"
	}
	of := func(reason string) func(e api.Event) bool {
		return func(e api.Event) bool { return e.Spec.Reason == reason && e.Spec.Object.Name == replacement }
	}
	started, ok := at(of(api.ReasonStarted), bound)
	if !ok {
		return "pod/" + replacement + " Started"
	}
	ready, ok := at(of(api.ReasonReady), started)
	if !ok {
		return "pod/" + replacement + " Ready"
	}
	if _, ok := at(func(e api.Event) bool {
		return e.Spec.Reason == api.ReasonEndpointsUpdated && e.Spec.Object.Kind == api.KindService && strings.Contains(e.Spec.Message, replacement+"@")
	}, ready.Add(-time.Second)); !ok {
		return "service EndpointsUpdated with pod/" + replacement
	}
	return ""
}
