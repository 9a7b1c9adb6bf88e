package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The sequential specification TestLinearizable checks histories against:
// one register, the spec.replicas of one deployment, read with a
// linearizable GET, set with scale, and compare-and-swapped with an update
// carrying the resourceVersion a GET returned.

// linKind is what an operation of the history does.
type linKind int

const (
	linRead  linKind = iota // GET the deployment: Out.Value is its spec.replicas
	linScale                // PUT .../scale: set spec.replicas to In.Value
	linCAS                  // PUT with a resourceVersion: In.Expect → In.Value
)

// linIn is an operation's input.
type linIn struct {
	Kind linKind
	// Value is what a scale or CAS writes.
	Value int
	// Expect is the spec.replicas of the GET whose resourceVersion a CAS
	// carried. The server refuses a resourceVersion that is not current,
	// and controllers' status writes move it without changing spec, so a
	// CAS that succeeded was based on the current value, while one that
	// was refused says nothing about the value.
	Expect int
}

// linRes is how an operation ended.
type linRes int

const (
	// linOK: acknowledged; a read's value is Out.Value.
	linOK linRes = iota
	// linMaybe: a write that returned an answer within its interval that
	// does not say whether it was applied: a conflict after the client
	// sent it again (an earlier attempt may have been applied, and the
	// retry then conflicts with it). It took effect once or not at all,
	// within its interval.
	linMaybe
	// linUnknown: a write whose outcome is unknown (timeout, 503
	// outcome_unknown, a broken connection): recorded the porcupine way,
	// returning at the end of the history, so it may have taken effect
	// at any point after its call, or never.
	linUnknown
	// linNotFound: a 404 for the deployment, which exists from before the
	// history to its end: never legal.
	linNotFound
)

// linOut is an operation's output.
type linOut struct {
	Res   linRes
	Value int
}

// linMeta is what the visualization and the failure report say about an
// operation beyond its input and output.
type linMeta struct {
	Agent  string // the agent the request went to first
	Client string // "retrying" (the client's own retries) or "strict" (Retries: -1)
	RV     uint64 // a read's resourceVersion, a CAS's expected one
	Sent   int32  // how many times a write was sent (the client's retries)
	Err    string // the error of a maybe or unknown write
}

// linModel is the register's specification. Its states are replicas
// counts; a write of unknown or maybe outcome branches into "applied" and
// "not applied".
func linModel(initial int) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{initial} },
		Step: func(state, input, output any) []any {
			cur, in, out := state.(int), input.(linIn), output.(linOut)
			if out.Res == linNotFound {
				return nil
			}
			switch in.Kind {
			case linRead:
				if out.Value == cur {
					return []any{cur}
				}
				return nil
			case linScale:
				if out.Res == linOK {
					return []any{in.Value}
				}
				return []any{cur, in.Value}
			case linCAS:
				if cur != in.Expect {
					if out.Res == linOK {
						return nil
					}
					return []any{cur}
				}
				if out.Res == linOK {
					return []any{in.Value}
				}
				return []any{cur, in.Value}
			}
			return nil
		},
		Hash:              func(state any) uint64 { return uint64(state.(int)) },
		DescribeOperation: func(input, output any) string { return describeLinOp(input.(linIn), output.(linOut)) },
		DescribeState:     func(state any) string { return fmt.Sprintf("replicas=%d", state.(int)) },
		DescribeOperationMetadata: func(info any) string {
			m, ok := info.(linMeta)
			if !ok {
				return ""
			}
			s := fmt.Sprintf("agent %s, %s client", m.Agent, m.Client)
			if m.RV != 0 {
				s += fmt.Sprintf(", rv %d", m.RV)
			}
			if m.Sent > 1 {
				s += fmt.Sprintf(", sent %d times", m.Sent)
			}
			if m.Err != "" {
				s += ", " + m.Err
			}
			return s
		},
	}
	return nm.ToModel()
}

func describeLinOp(in linIn, out linOut) string {
	res := map[linRes]string{linOK: "ok", linMaybe: "maybe", linUnknown: "unknown", linNotFound: "404"}[out.Res]
	switch in.Kind {
	case linRead:
		if out.Res == linNotFound {
			return "read -> 404"
		}
		return fmt.Sprintf("read -> %d", out.Value)
	case linScale:
		return fmt.Sprintf("scale(%d) %s", in.Value, res)
	case linCAS:
		return fmt.Sprintf("cas(%d→%d) %s", in.Expect, in.Value, res)
	}
	return "?"
}

// TestLinearizableModel: the model accepts what a linearizable register
// may answer, including writes of unknown outcome, and rejects a stale
// read, a CAS based on an overwritten value, and a 404.
func TestLinearizableModel(t *testing.T) {
	const end = 1000
	read := func(c int, call, ret int64, v int) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linIn{Kind: linRead}, Call: call, Output: linOut{Res: linOK, Value: v}, Return: ret}
	}
	scale := func(c int, call, ret int64, v int, res linRes) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linIn{Kind: linScale, Value: v}, Call: call, Output: linOut{Res: res}, Return: ret}
	}
	cas := func(c int, call, ret int64, from, to int, res linRes) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linIn{Kind: linCAS, Expect: from, Value: to}, Call: call, Output: linOut{Res: res}, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"reads follow acknowledged writes", []porcupine.Operation{
			read(0, 0, 10, 1), scale(1, 20, 30, 2, linOK), read(0, 40, 50, 2), cas(2, 60, 70, 2, 3, linOK), read(1, 80, 90, 3),
		}, porcupine.Ok},
		{"stale read after an acknowledged scale", []porcupine.Operation{
			scale(1, 20, 30, 2, linOK), read(0, 40, 50, 1),
		}, porcupine.Illegal},
		{"new value then old value", []porcupine.Operation{
			scale(1, 0, 100, 2, linOK), read(0, 10, 20, 2), read(2, 30, 40, 1),
		}, porcupine.Illegal},
		{"CAS acknowledged on an overwritten value", []porcupine.Operation{
			read(0, 0, 10, 1), scale(1, 20, 30, 4, linOK), cas(0, 40, 50, 1, 2, linOK),
		}, porcupine.Illegal},
		{"404 for the deployment", []porcupine.Operation{
			{ClientId: 0, Input: linIn{Kind: linRead}, Call: 0, Output: linOut{Res: linNotFound}, Return: 10},
		}, porcupine.Illegal},
		{"unknown scale applied late", []porcupine.Operation{
			scale(0, 0, end, 5, linUnknown), scale(1, 10, 20, 3, linOK), read(2, 30, 40, 3), read(2, 50, 60, 5),
		}, porcupine.Ok},
		{"unknown scale never applied", []porcupine.Operation{
			scale(0, 0, end, 5, linUnknown), read(2, 30, 40, 1),
		}, porcupine.Ok},
		{"unknown write is not applied twice", []porcupine.Operation{
			scale(0, 0, end, 5, linUnknown), read(2, 10, 20, 5), scale(1, 30, 40, 3, linOK), read(2, 50, 60, 5),
		}, porcupine.Illegal},
		{"conflict after a retry applied", []porcupine.Operation{
			cas(0, 0, 30, 1, 2, linMaybe), read(1, 40, 50, 2),
		}, porcupine.Ok},
		{"a maybe write is over when it returns", []porcupine.Operation{
			cas(0, 0, 30, 1, 2, linMaybe), read(1, 40, 50, 1), read(1, 60, 70, 2),
		}, porcupine.Illegal},
		{"unknown CAS applies only on its expected value", []porcupine.Operation{
			scale(1, 0, 10, 3, linOK), cas(0, 20, end, 1, 2, linUnknown), read(1, 40, 50, 2),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(linModel(1), tc.ops, 10*time.Second); got != tc.want {
				t.Errorf("check = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRVRegressions: a read that began after another returned must not
// see an older resourceVersion; overlapping reads may.
func TestRVRegressions(t *testing.T) {
	read := func(call, ret int64, rv uint64) porcupine.Operation {
		return porcupine.Operation{Input: linIn{Kind: linRead}, Call: call, Output: linOut{Res: linOK, Value: 1}, Return: ret, Metadata: linMeta{RV: rv}}
	}
	if got := rvRegressions([]porcupine.Operation{read(0, 10, 5), read(5, 20, 4), read(15, 30, 6), read(12, 40, 5)}); len(got) != 0 {
		t.Errorf("overlapping or newer reads: %q, want none", got)
	}
	if got := rvRegressions([]porcupine.Operation{read(0, 10, 5), read(20, 30, 7), read(31, 40, 6)}); len(got) != 1 {
		t.Errorf("a read of 6 after one of 7 had returned: %q, want one regression", got)
	}
}
