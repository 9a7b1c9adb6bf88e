package disconnect

import (
	"slices"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/units"
)

// Quorum reports whether members (a board's gossip.Members) show a
// majority of the cluster's servers alive: more than half of the server
// members it knows, leaving out those that left the cluster. With no
// server known (a board that started while cut off) there is no quorum.
func Quorum(members []gossip.Member) bool {
	known, alive := 0, 0
	for _, m := range members {
		if !m.Meta.Server || m.State == api.MemberLeft {
			continue
		}
		known++
		if m.State == api.MemberAlive {
			alive++
		}
	}
	return known > 0 && 2*alive > known
}

// Tracker keeps since when a board has been cut off. The zero Tracker has
// not seen the board cut off yet.
type Tracker struct {
	cut   bool
	since time.Time
}

// Observe folds in whether the board was connected at now: the cut begins
// at the first observation without a connection and ends at the first
// with one.
func (t *Tracker) Observe(now time.Time, connected bool) {
	switch {
	case connected:
		t.cut, t.since = false, time.Time{}
	case !t.cut:
		t.cut, t.since = true, now
	}
}

// Cut returns whether the board is cut off and since when.
func (t *Tracker) Cut() (bool, time.Time) { return t.cut, t.since }

// Unit is one of the board's herd units as its unit file and marks say.
type Unit struct {
	// Name is the unit name, herd-<pod>.service.
	Name string
	// StopAfter is the template's on_disconnect stop_after; 0 is "keep".
	StopAfter time.Duration
	// Marked is true when the unit has a mark in units.DisconnectDir: it
	// was stopped on disconnect already.
	Marked bool
}

// Due returns, sorted, the names of the units to stop at now for a board
// cut off since since (when cut): those with a StopAfter that has passed
// since then and no mark yet. It also returns how long until the next
// unit becomes due (0 when none is waiting), so a caller can say so.
func Due(now time.Time, cut bool, since time.Time, us []Unit) (names []string, next time.Duration) {
	if !cut {
		return nil, 0
	}
	for _, u := range us {
		if u.StopAfter <= 0 || u.Marked {
			continue
		}
		left := since.Add(u.StopAfter).Sub(now)
		if left <= 0 {
			names = append(names, u.Name)
		} else if next == 0 || left < next {
			next = left
		}
	}
	slices.Sort(names)
	return names, next
}

// running reports whether an ActiveState has a process that a stop ends.
func running(activeState string) bool {
	switch activeState {
	case "active", "activating", "reloading":
		return true
	}
	return false
}

// ToStop keeps, sorted, the due units that run in the listing: whose
// process runs (or is starting or restarting), or, for a scheduled job's
// pod, whose timer is active or one of whose runs (concurrency allow) is
// going. A unit already down, crashed or failed is left as it is,
// unmarked, so the leader sees it for what it is.
func ToStop(due []string, listing []units.UnitState) []string {
	var out []string
	for _, u := range listing {
		if slices.Contains(due, u.Unit) && (running(u.ActiveState) || u.TimerActiveState == "active" || len(runningInstances(u)) > 0) {
			out = append(out, u.Unit)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// StopNames returns what `systemctl stop` gets for the units ToStop
// picked: for each, first its timer when active (so no new run starts),
// then the unit, then its running instances (the runs of a job with
// concurrency allow). Without the timer a scheduled job's board would go
// on starting runs while cut off, beside the board the job moved to.
func StopNames(stop []string, listing []units.UnitState) []string {
	var out []string
	for _, name := range stop {
		i := slices.IndexFunc(listing, func(u units.UnitState) bool { return u.Unit == name })
		if i < 0 {
			out = append(out, name)
			continue
		}
		u := listing[i]
		if pod, ok := api.PodFromUnitName(name); ok && u.TimerActiveState == "active" {
			out = append(out, api.TimerName(pod))
		}
		out = append(out, name)
		out = append(out, runningInstances(u)...)
	}
	return out
}

// runningInstances returns the names of u's instances whose process runs.
func runningInstances(u units.UnitState) []string {
	var out []string
	for _, in := range u.Instances {
		if running(in.ActiveState) {
			out = append(out, in.Unit)
		}
	}
	return out
}

// ClearMarks returns, sorted, the marks to drop on a connected board: a
// marked unit that runs again (the leader started it) or that has no unit
// file (fencing removed it), and a mark of a unit the listing does not
// show at all.
func ClearMarks(marks []string, listing []units.UnitState) []string {
	byUnit := make(map[string]units.UnitState, len(listing))
	for _, u := range listing {
		byUnit[u.Unit] = u
	}
	var out []string
	for _, m := range marks {
		u, ok := byUnit[m]
		if !ok || u.FileHash == "" || running(u.ActiveState) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}
