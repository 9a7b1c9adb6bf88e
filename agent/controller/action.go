package controller

import (
	"cmp"
	"fmt"

	"github.com/herd-dev/herd/api"
)

// ActionType is what an Action does to the stored object. The set mirrors
// the raftstore operations so a Writer maps each type to one operation
// (Bind to two); actions with the same Txn share one transaction.
type ActionType string

// Action types.
const (
	// ActionCreate stores a new object, spec and status (raftstore
	// OpCreate). Used for pods (deployments, daemons) and nodes (gossip).
	ActionCreate ActionType = "create"
	// ActionUpdate replaces labels and spec, keeping status (OpUpdate,
	// compare-and-swap on Object's resourceVersion). Used for node labels
	// from gossip facts.
	ActionUpdate ActionType = "update"
	// ActionUpdateStatus replaces status only (OpUpdateStatus, CAS). Used
	// for every kind.
	ActionUpdateStatus ActionType = "updateStatus"
	// ActionBind places a pending pod: spec.node and spec.hostPorts, and
	// status phase Scheduled. Apply it as OpUpdate (CAS) followed by
	// OpUpdateStatus in one transaction.
	ActionBind ActionType = "bind"
	// ActionDelete removes the object (OpDelete, CAS).
	ActionDelete ActionType = "delete"
)

// Action is one write a reconciler wants, with the reason for it. Actions
// are returned in the order they must be applied: a delete and a create of
// the same name (a daemon pod being replaced) come in that order.
type Action struct {
	Type ActionType
	Kind api.Kind
	Name string
	// Object is the full object to write: for create, update, status and
	// bind the new object; for delete the stored one. It carries the
	// stored resourceVersion (zero for a create) for compare-and-swap. It
	// may share unchanged maps and slices with the reconciler's inputs:
	// treat both as read-only.
	Object api.Object
	// Reason says why, for logs and `herdctl diff`.
	Reason string
	// Txn, when not empty, makes this action one step of a transaction:
	// actions next to each other with the same Txn are applied together or
	// not at all (a Writer sends them as one raftstore transaction). The
	// deployment and daemon reconcilers set it to their key on every
	// action of a pass, so a pod create never lands without the status
	// write that advances the owner's pod counter. Empty: the action is a
	// transaction of its own.
	Txn string
}

// String renders the action as "bind pods/web-x2b4z: 1 of its owner's ...".
func (a Action) String() string {
	return fmt.Sprintf("%s %s/%s: %s", a.Type, a.Kind, a.Name, a.Reason)
}

func newAction(t ActionType, o api.Object, format string, args ...any) Action {
	return Action{Type: t, Kind: o.GetKind(), Name: o.GetMeta().Name, Object: o, Reason: fmt.Sprintf(format, args...)}
}

// inTxn sets Txn on every action and returns acts.
func inTxn(acts []Action, txn string) []Action {
	for i := range acts {
		acts[i].Txn = txn
	}
	return acts
}

// Transactions splits actions into the transactions a Writer applies, in
// order: a run of actions with the same non-empty Txn is one, every other
// action one of its own. The slices share acts' backing array.
func Transactions(acts []Action) [][]Action {
	var out [][]Action
	for i := 0; i < len(acts); {
		j := i + 1
		if acts[i].Txn != "" {
			for j < len(acts) && acts[j].Txn == acts[i].Txn {
				j++
			}
		}
		out = append(out, acts[i:j:j])
		i = j
	}
	return out
}

// compareByName orders objects by name, for deterministic output.
func compareByName[T api.Object](a, b T) int {
	return cmp.Compare(a.GetMeta().Name, b.GetMeta().Name)
}
