// Package testutil holds the small helpers herd's tests share: a logger that
// writes to t.Log, a poll-until-deadline wait, loopback addresses of a test's own and fresh SSH keys. It is imported by tests
// only.
package testutil
