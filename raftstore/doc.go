// Package raftstore owns herd's desired state: a small object store kept
// consistent across the voting boards by Raft (hashicorp/raft), persisted in
// an append-only log (raft-wal; raft-boltdb with Config.LogStore "bolt",
// and a data dir holding the other one is migrated at open: logstore.go)
// with periodic snapshots, and watched by the controllers and by `herdctl
// get -w`. raft-wal writes 5-8x fewer bytes per apply than raft-boltdb
// (BENCHMARKS.md "Raft log store"): SD cards wear by what is written.
//
// The package has three layers:
//
//   - the FSM (fsm.go): a deterministic object store keyed by (kind, name)
//     holding api.RawObjects. Each Raft log entry is one transaction of Ops
//     that applies completely or not at all; every written object's
//     resourceVersion is the log index of the write. No clock, no map-order
//     dependence: two FSMs fed the same log are equal.
//   - the watch hub (watch.go): a history of events that watchers replay
//     from a resourceVersion and then follow live, without ever blocking
//     the FSM; bounded by a number of events (Config.WatchHistory) and by
//     the bytes they hold on to (Config.WatchHistoryBytes).
//   - the Store (store.go): Raft wiring, leadership notifications, cluster
//     membership (PlanMembership, membership.go, decides which servers
//     gossip sees join or leave the configuration; the agent applies the
//     plan), writes that followers forward to the leader over the
//     authenticated transport (transport.go, forward.go), and the read
//     barrier that makes a local read linearizable (read.go): the leader
//     answers only after its election barrier and a quorum's confirmation
//     (VerifyLeader), and every server, the leader too, waits until its
//     copy has applied the read index: the last command the leader has
//     committed (a follower may apply an entry before the leader does).
//     The Store also watches the leader's silence itself (suspect.go) and
//     gives raft short timeouts only once it passes Config.HeartbeatTimeout
//     and the leader does not answer a second opinion
//     (Config.LeaderAnswers): raft would otherwise have the leader
//     heartbeat ten times per timeout, the largest part of an idle
//     leader's CPU. After each burst of writes the leader appends a commit
//     notice (notice.go), so followers apply the burst one round trip
//     later without the leader resending every CommitTimeout.
//
// Board-to-board traffic needs the server key, which only servers hold
// (workers have only the gossip key): the transport is TLS 1.3 in which
// both sides prove they hold an ed25519 key derived from it, so nobody
// else can send a Raft RPC or a forwarded write. During a rotation a
// server presents its primary key and accepts those derived from
// Config.AcceptServerKeys too. Before that proof a connection is
// "pending": pending connections are capped in all, per source address
// and for sources not yet known as servers, and each is closed unless it
// completes the handshake and sends its protocol byte within
// Config.HandshakeTimeout, so keyless hosts cannot starve the servers
// (transport.go).
//
// A forwarded write follows the leader: the dial and handshake are bounded
// by Config.HandshakeTimeout, the call by the caller's context, and an
// attempt ends as soon as raft names another leader, so a write whose
// leader vanished goes to the new one (or, if the old one already held it,
// fails with ErrOutcomeUnknown) within about an election (forward.go).
//
// A write may carry a request id (WithRequestID, request.go): the id goes
// into the log entry (forwarded with the write from a follower), and the
// FSM remembers the ids of the last RequestIDHistory successful
// transactions, in its state and its snapshots, evicting oldest first by
// log index. An entry whose id was applied before is not applied again: it
// succeeds with the objects stored now and emits no events. So a write
// resent after ErrOutcomeUnknown or a broken connection applies at most
// once; a failed transaction records nothing. Entries without an id apply
// as always. All servers must run a version that knows ids before clients
// send them: an older leader rejects a forwarded write with an id as
// invalid, and an older FSM would apply a resend again.
//
// StateFormat (fsm.go) versions the replicated state's encoding (the
// snapshot and the log's commands); snapshots carry it and Restore refuses
// a newer format with an error naming it. Agents report it (herd version
// -o json, GET /v1/status) so that herdctl upgrade can refuse a downgrade
// across a format change.
//
// The transaction rules live once, in the FSM (fsm.go): MemStore (mem.go)
// runs that same FSM and watch hub in memory without Raft, for tests of
// the API and its clients, and Preview computes what a transaction would
// store without writing it, for dry runs; neither restates a rule.
//
// NewTestCluster (testcluster.go) builds an in-process cluster on loopback for
// tests in this and other packages; its Isolate and Heal cut a server off
// the network without closing it, as a power pull or a frozen process
// would (testnet.go).
package raftstore
