// Package layers holds no code: its tests keep herd's packages layered,
// and keep generic sorts of struct values out of the binaries.
// Every package sits in one layer of the table in layers_test.go, and
// may import only herd packages of layers below its own, so no call goes
// back up (the store never reaches into the agent, the API server never
// into the Go client, the placer never into the composition root). A new
// package gets its layer in that table; the test names any package that
// has none, and every import that goes up or sideways.
//
// The code linked into herd and herdctl sorts slices of anything but
// pointers and basic types with sort.Slice or sort.SliceStable: each
// slices.SortFunc over a struct type is another copy of the sort in every
// agent's memory (docs/arm.md). sorts_test.go reads the source and names
// each call that breaks the rule.
package layers
