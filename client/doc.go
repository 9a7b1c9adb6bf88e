// Package client is the Go client of the herd agent's HTTP API, used by
// herdctl and by tests. It talks to one of several agent addresses and moves
// on to the next when one cannot be reached, sending the bearer token on
// every request. Requests safe to send twice (reads, compare-and-swap
// updates, scale, apply) are retried across an election; other writes only
// when they certainly were not applied (Client). Reads are linearizable
// unless their context says WithStale (?stale: the agent's own copy). The wire types it sends and
// receives (bodies, error codes, the token file format) are package api's
// (api/wire.go, api/token.go); the client owns where `herd agent -dev`
// leaves its token (DevTokenPath).
package client
