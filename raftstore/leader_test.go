package raftstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// drain returns what ch holds right now.
func drain(ch <-chan bool) []bool {
	var out []bool
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return append(out, false) // mark: closed
			}
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestLeadershipFanout(t *testing.T) {
	l := newLeadership()
	a, cancelA := l.subscribe()
	if d := cmp.Diff([]bool{false}, drain(a)); d != "" {
		t.Errorf("initial value (-want +got):\n%s", d)
	}
	l.set(false) // a repeated false is dropped
	if got := drain(a); len(got) != 0 {
		t.Errorf("repeated false delivered: %v", got)
	}
	l.set(true)
	b, cancelB := l.subscribe()
	defer cancelB()
	if d := cmp.Diff([]bool{true}, drain(b)); d != "" {
		t.Errorf("late subscriber's first value (-want +got):\n%s", d)
	}
	// A slow reader keeps only the latest value.
	l.set(false)
	l.set(true)
	if d := cmp.Diff([]bool{true}, drain(a)); d != "" {
		t.Errorf("slow reader (-want +got):\n%s", d)
	}
	// true after true is delivered: leadership was lost and regained.
	l.set(true)
	if d := cmp.Diff([]bool{true}, drain(a)); d != "" {
		t.Errorf("true after true (-want +got):\n%s", d)
	}
	cancelA()
	cancelA()
	if _, ok := <-a; ok {
		t.Error("channel open after cancel")
	}
	l.close()
	drain(b)
	if _, ok := <-b; ok {
		t.Error("channel open after close")
	}
	c, _ := l.subscribe()
	if _, ok := <-c; ok {
		t.Error("subscription after close is open")
	}
}
