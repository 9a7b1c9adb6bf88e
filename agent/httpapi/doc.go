// Package httpapi owns the agent's HTTP API: JSON over HTTP under /v1,
// served on loopback TCP, on a unix socket, or on any address. Every
// listener requires a bearer token (Config.Token or a TokenFile re-read as
// it changes, for rotation); on a unix socket, peers whose uid is in
// Config.SocketUIDs (root) need none. Before the token it refuses
// browser-shaped requests: a Host that is a DNS name other than localhost
// or a configured one (421, DNS rebinding) and a foreign Origin (403);
// write bodies must be application/json (415). Each listener holds at most
// Config.MaxConns connections and a body must arrive within
// Config.ReadTimeout.
//
// It turns requests into raftstore transactions: create, update, delete,
// scale and the all-or-nothing apply with strict decoding, defaulting and
// validation at admission. Secrets have their own write path (secrets.go):
// plain values in, sealed with Config.Secrets (the server key ring) before
// the transaction, so no plain value reaches the store; apply refuses them,
// and a delete of one that a template or live pod names is refused (409). It writes spec only: status is written by
// herd's agents through raftstore, and PUT .../status is refused (403). It
// streams watch events as NDJSON, streams a pod's journal from its board
// as text/plain (through Config.Logs), and maps store errors to HTTP
// status codes.
//
// Gets and lists are linearizable: they run after the Store's ReadBarrier
// (503 without a leader) unless the request says ?stale, which reads the
// local copy as it is. Update, scale and apply read after a ReadBarrier
// too, so their compare-and-swap works on the leader's state. A write's
// optional Herd-Request-Id header goes with its transaction to the store,
// which applies a write with one id at most once: a resend after a broken
// connection or 503 outcome_unknown gets the stored objects back instead
// of being applied again (routes.go).
//
// Under /ui/ it serves the dashboard, behind the same guard: one page with
// its script and style sheet embedded in the binary (ui/, Go embed), a
// strict Content-Security-Policy (no inline script, own origin only), and
// GET /ui/warnings, each board's api.NodeStatus.Warnings. The page reads
// the fleet through the /v1 list and watch routes (ui.go).
//
// With Config.Pprof it also serves Go's runtime profiles under
// /debug/pprof/ (runtime/pprof, at net/http/pprof's paths and in its
// formats, on its own mux), behind the same guard and for API tokens
// only; off (the default) those paths are 404 (pprof.go).
//
// It holds no state of its own: every read and write goes to the Store it
// is given. The client side of the API lives in package client.
package httpapi
