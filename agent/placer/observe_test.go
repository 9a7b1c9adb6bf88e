package placer

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// TestObservationInstances: the instances of an overlapping job's
// template reach the controllers with their unit's observation, and a
// plan key that sees them change.
func TestObservationInstances(t *testing.T) {
	in := units.UnitState{Unit: api.InstanceUnitName("tick-aaaaa", "1"), LoadState: "loaded", ActiveState: "active", SubState: "exited",
		Result: "success", ExecMainStartTimestamp: "Sun 2026-12-06 03:00:00 UTC", ExecMainExitTimestamp: "Sun 2026-12-06 03:00:12 UTC",
		ExecMainStartMonotonic: 1e6, ExecMainExitMonotonic: 13e6}
	u := units.UnitState{Unit: api.UnitName("tick-aaaaa"), LoadState: "loaded", ActiveState: "inactive", TimerActiveState: "active",
		Instances: []units.UnitState{in}}
	want := []controller.UnitObservation{{Unit: in.Unit, Found: true, ActiveState: "active", SubState: "exited", Result: "success",
		ExecMainStartTimestamp: in.ExecMainStartTimestamp, ExecMainExitTimestamp: in.ExecMainExitTimestamp,
		ExecMainStartMonotonic: 1e6, ExecMainExitMonotonic: 13e6}}
	if diff := cmp.Diff(want, observation(u).Instances); diff != "" {
		t.Errorf("observation's instances (-want +got):\n%s", diff)
	}
	before := planKey(nil, []units.UnitState{u})
	u.Instances = append(u.Instances, units.UnitState{Unit: api.InstanceUnitName("tick-aaaaa", "2"), ActiveState: "active", SubState: "running"})
	if planKey(nil, []units.UnitState{u}) == before {
		t.Errorf("a new instance does not change the plan key")
	}
}
