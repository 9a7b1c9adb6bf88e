// Package unitreport is the wire form of a unit report: what a board's own
// agent says about its herd units (package agent/unitwatch makes them), for
// the leader's placer to fold into pod status without listing the board
// over SSH.
//
// A report carries the board's name, a Mark and the units as
// units.UnitState, signed with the board's SSH host key (the key the
// leader already verifies when it connects to the board, announced in
// gossip). Gossip messages can be sent by any holder of the gossip key, so
// a report proves itself: Open refuses one whose signature does not verify
// against the named board's key, which limits what a compromised board
// can claim to its own units. The signature covers a fixed context string
// before the payload, so a report signature is never valid as anything
// else the host key signs.
//
// Marks order one board's reports: the epoch rises at every agent start
// (never below the last one the board used, and never below the board's
// clock in seconds, so it survives both a lost data dir and a board
// without a real-time clock), the sequence number within it. Before it
// collects a report the agent writes the mark to SeqFile; the leader's SSH
// listing reads that file in the same round trip, so a report that a
// listing already covers is dropped and a replayed old report changes
// nothing once the board has been listed.
package unitreport
