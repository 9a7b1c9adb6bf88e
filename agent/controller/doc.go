// Package controller owns herd's level-triggered reconcilers: node,
// replication (Deployment), daemon, service, the scheduling step, and the
// folding of executor observations into pod and node status.
//
// Every reconciler is a pure function: it takes the current objects (and
// the time as an argument) and returns Actions as data, each with a reason,
// in the order they must be applied. Reconcilers never modify their inputs,
// never read a clock and never depend on map iteration order. Applying a
// reconciler's actions and calling it again with the result returns no
// actions (no flapping): status is written only when it changes, and
// computed on the state the actions leave behind.
//
// The package also holds a thin Runner that drives the reconcilers from a
// work queue over a State (read side) and a Writer (write side); the agent
// wires those to the raftstore and gossip. A failed write is retried with
// the queue's capped backoff, except a Terminal one (the store refused it
// as invalid), which waits for the next change or resync. What runs on the
// boards (systemd units over SSH) is not decided here: the controllers only
// write desired and observed state.
package controller
