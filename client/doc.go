// Package client is the Go client of the herd agent's HTTP API, used by
// herdctl and by tests. It talks to one of several agent addresses and moves
// on to the next when one cannot be reached.
package client
