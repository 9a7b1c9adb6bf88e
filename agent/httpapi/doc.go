// Package httpapi owns the agent's HTTP API: JSON over HTTP under /v1,
// served on loopback TCP and on a unix socket (or, with a bearer token, on
// any address). It turns requests into raftstore transactions: create,
// update, status writes, delete, scale and the all-or-nothing apply with
// strict decoding, defaulting and validation at admission; it streams watch
// events as NDJSON, streams a pod's journal from its board as text/plain
// (through Config.Logs), and maps store errors to HTTP status codes.
//
// It holds no state of its own: every read and write goes to the Store it
// is given. The client side of the API lives in package client.
package httpapi
