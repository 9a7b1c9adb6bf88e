package scheduler

import (
	"sort"
	"strconv"
	"strings"
)

// Unschedulable is the error Place returns when no node fits a pod. Its
// message is a kubectl-like summary, "0/3 boards: 2 port 8080 in use, 1 not
// ready", suitable for a pod's Scheduled condition.
type Unschedulable struct {
	// Pod is the pod's name.
	Pod string
	// Boards is how many nodes were considered (1 for a pinned pod).
	Boards int
	// Reasons counts the nodes per reason they were rejected for (each node
	// counts once, for the first filter it failed), most frequent first,
	// then by reason.
	Reasons []ReasonCount
}

// ReasonCount is how many nodes were rejected for one reason.
type ReasonCount struct {
	Reason string
	Boards int
}

func newUnschedulable(pod string, boards int, reasons map[string]int) *Unschedulable {
	u := &Unschedulable{Pod: pod, Boards: boards}
	for r, n := range reasons {
		u.Reasons = append(u.Reasons, ReasonCount{Reason: r, Boards: n})
	}
	sort.Slice(u.Reasons, func(i, j int) bool {
		a, b := u.Reasons[i], u.Reasons[j]
		if a.Boards != b.Boards {
			return a.Boards > b.Boards
		}
		return a.Reason < b.Reason
	})
	return u
}

// Error returns the summary, e.g. "0/3 boards: 2 port 8080 in use, 1 not
// ready", or "0/0 boards: no boards" for an empty cluster.
func (e *Unschedulable) Error() string {
	var b strings.Builder
	b.WriteString("0/")
	b.WriteString(strconv.Itoa(e.Boards))
	b.WriteString(" boards: ")
	if len(e.Reasons) == 0 {
		b.WriteString("no boards")
		return b.String()
	}
	for i, r := range e.Reasons {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r.Boards))
		b.WriteByte(' ')
		b.WriteString(r.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnschedulable) true for an *Unschedulable.
func (e *Unschedulable) Is(target error) bool { return target == ErrUnschedulable }
