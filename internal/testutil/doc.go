// Package testutil holds the small helpers herd's tests share: a logger that
// writes to t.Log, a poll-until-deadline wait, and loopback addresses of a test's own. It is imported by tests
// only.
package testutil
