// Package controller owns herd's level-triggered reconcilers: node,
// replication (Deployment), daemon, service, job, the scheduling step, and
// the folding of executor observations into pod and node status.
//
// A Job (job.go) keeps one pod: a run-once job's, replaced after a failure
// with a backoff until its retries are spent, or a scheduled job's, which
// holds its timer on one board and is replaced like any pod when the board
// is lost. ObservePod records a job pod's last finished run from the
// unit's ExecMain* properties (for a job with concurrency allow: the
// finished runs of the instances of its template, and how many are in
// progress); ReconcileJob keeps the last runs in the job's status, each
// once. A backing-off job asks the Runner to wake it at its next
// attempt (Index.WakeAfter), the one timed wake-up besides the resync.
//
// Every reconciler is a pure function: it takes the current objects (and
// the time as an argument) and returns Actions as data, each with a reason,
// in the order they must be applied. Reconcilers never modify their inputs,
// never read a clock and never depend on map iteration order. Applying a
// reconciler's actions and calling it again with the result returns no
// actions (no flapping): status is written only when it changes, and
// computed on the state the actions leave behind. (A deployment or daemon
// creates only as many pods per pass as fit in one transaction; then the
// next pass creates more.)
//
// Deployments and daemons record their templates in status.history with
// api.RecordRevision (the pass's time as the time applied), so the history
// changes, and status is written, only when the template does. A daemon
// rolls a new template out board by board, at most
// spec.strategy.maxUnavailable (default 1) boards without an available pod
// at once (rollingReplacements).
//
// A template that names secrets gets a revision that also hashes their
// versions (api.PodRevision over Cluster.Secrets): a changed secret is a
// new revision and rolls the pods like a template change, and each new pod
// records the secrets' versions and keys (api.PodSpec.Secrets). A change
// to a secret wakes the deployments and daemons that name it. A pod made
// while one of its secrets did not exist is not scheduled: it gets
// Scheduled=False, reason SecretMissing, and is replaced once the secret
// exists (its revision changes).
//
// An owner never gives two of its pods one name (names.go): deployments
// and daemons count the pods they have ever created in status.podsCreated;
// pod k of a deployment is <deployment>-<5 chars>, of a daemon
// <daemon>-<node>-<5 chars>, the suffix a keyed one-to-one scramble of k
// (names repeat only after 26^5 creations, and a name in use is skipped
// even then). A pass's actions share one Action.Txn: its deletes, creates
// and the status write advancing the counter commit as one transaction,
// compare-and-swap on the owner, so a retry or a new leader asks for the
// same names and never hands one out twice. A replacement therefore has
// its own unit (herd-<pod>.service), journal, events and fencing; a
// daemon's pod on a node is found by owner and spec.node, not by name.
//
// DeriveEvents (events.go) says what a committed change means for people:
// a node dead or back, a pod bound, started, ready or lost, a scheduling
// failure, endpoints updated. The agent's recorder feeds it every change
// while this agent leads and stores the events (api.Event).
//
// The package also holds a thin Runner that drives the reconcilers from a
// work queue (Queue: de-duplicating and rate-limited, in the spirit of
// client-go's, with an injectable clock; a key is never handed to two
// workers at once, and failures back off per key, 5 ms doubling up to
// 30 s, under an overall token bucket) over a State (read side) and a
// Writer (write side); the agent
// wires those to the raftstore and gossip. A failed write is retried with
// the queue's capped backoff, except a Terminal one (the store refused it
// as invalid), which waits for the next change or resync. What runs on the
// boards (systemd units over SSH) is not decided here: the controllers only
// write desired and observed state.
package controller
