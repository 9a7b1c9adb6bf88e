// Package testutil holds the small helpers herd's tests share: a logger that
// writes to t.Log and a poll-until-deadline wait. It is imported by tests
// only.
package testutil
