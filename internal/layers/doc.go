// Package layers holds no code: its test keeps herd's packages layered.
// Every package sits in one layer of the table in layers_test.go, and
// may import only herd packages of layers below its own, so no call goes
// back up (the store never reaches into the agent, the API server never
// into the Go client, the placer never into the composition root). A new
// package gets its layer in that table; the test names any package that
// has none, and every import that goes up or sideways.
package layers
