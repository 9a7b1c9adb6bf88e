// Package testutil holds the small helpers herd's tests share: a logger that
// writes to t.Log, a poll-until-deadline wait, loopback addresses of a test's own, fresh SSH keys and a
// sample's value read from a Prometheus text exposition. It is imported by tests
// only.
package testutil
