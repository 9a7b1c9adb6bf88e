// Package testutil holds the small helpers herd's tests share: a logger that
// writes to t.Log, poll-until-deadline waits (Eventually, Until), loopback
// addresses of a test's own (FreeAddr, also an address nothing listens on),
// fresh SSH keys, an in-memory ssh-agent (SSHAgent) and a sample's value read
// from a Prometheus text exposition. It is imported by tests only.
package testutil
