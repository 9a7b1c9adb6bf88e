// Package client is the Go client of the herd agent's HTTP API, used by
// herdctl and by tests. It talks to one of several agent addresses and moves
// on to the next when one cannot be reached, sending the bearer token on
// every request. Every request is retried across an election (a broken
// connection, 503 no_leader or outcome_unknown): reads change nothing, and
// each write call (create, update, delete, scale, apply) sends one random
// Herd-Request-Id on all its attempts, which the store uses to apply it at
// most once (Client). Reads are linearizable
// unless their context says WithStale (?stale: the agent's own copy). The wire types it sends and
// receives (bodies, error codes, the token file format) are package api's
// (api/wire.go, api/token.go, with api.DevTokenPath, where `herd agent
// -dev` leaves its token). ForwardGet passes a GET of /v1/ or /ui/
// through as it is, for herdctl dashboard's proxy.
package client
