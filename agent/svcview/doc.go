// Package svcview holds the service view: what a board's agent needs to
// answer DNS for the herd. zone (package herddns) and to forward service
// ports (package svcproxy): every service's ports and ready endpoints and
// every board's name, phase and address, trimmed from the stored objects
// (View, Build) and encoded deterministically.
//
// Where a board gets it from depends on what it holds:
//   - A server follows its own copy of the store (FollowStore): a
//     follower may be a few milliseconds behind the leader, as for its
//     stale reads.
//   - A worker holds no state and no credential for the API, by design
//     (docs/security.md). The leader writes the view to it over the SSH
//     connection it already holds to place pods (Publisher, through the
//     board helper's no-follow file write), at Path, and the worker's agent
//     follows that file with inotify (FollowFile). No new listener, key or
//     trust relation is added: the leader is already root on every board,
//     and gossip (which any gossip-key holder, a compromised worker too,
//     can write) is not trusted with where traffic goes. Path is on /run
//     (tmpfs), so a rebooted board starts with no view rather than a stale
//     one, and the Publisher forgets what it wrote to a board that stopped
//     being Ready, so the board gets the view again when it returns.
//
// A Feed holds the latest view and tells subscribers when it changed
// (only when its encoding did: node heartbeats that change nothing the
// view shows wake no one).
//
// The Publisher runs on the leader only. It writes to each Ready worker
// when the view's encoding differs from what it last wrote there, one
// write in flight per board, failures retried with backoff (1 s doubling
// to 30 s). A new leader writes to every worker once.
package svcview
