package raftstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPlanMembership(t *testing.T) {
	voter := func(id, addr string) Server { return Server{ID: id, Address: addr, Voter: true} }
	alive := func(id, addr string) Candidate { return Candidate{ID: id, Address: addr, Alive: true} }
	tests := []struct {
		name      string
		conf      []Server
		cands     []Candidate
		maxVoters int
		want      []Change
	}{
		{"in line", []Server{voter("a", "1:1")}, []Candidate{alive("a", "1:1")}, 3, nil},
		{"voters up to the count, then non-voters",
			[]Server{voter("a", "1:1")},
			[]Candidate{alive("a", "1:1"), alive("b", "2:1"), alive("c", "3:1"), alive("d", "4:1")}, 3,
			[]Change{{Type: AddVoter, ID: "b", Address: "2:1"}, {Type: AddVoter, ID: "c", Address: "3:1"}, {Type: AddNonvoter, ID: "d", Address: "4:1"}}},
		{"no expect keeps the voter count", []Server{voter("a", "1:1")}, []Candidate{alive("b", "2:1")}, 0,
			[]Change{{Type: AddNonvoter, ID: "b", Address: "2:1"}}},
		{"moved", []Server{voter("a", "1:1")}, []Candidate{alive("a", "9:1")}, 3,
			[]Change{{Type: RemoveServer, ID: "a", Address: "1:1"}}},
		{"left", []Server{voter("a", "1:1"), voter("b", "2:1")}, []Candidate{{ID: "b", Address: "2:1", Left: true}}, 3,
			[]Change{{Type: RemoveServer, ID: "b", Address: "2:1"}}},
		{"self left stays", []Server{voter("self", "1:1")}, []Candidate{{ID: "self", Address: "1:1", Left: true}}, 3, nil},
		{"dead keeps its seat", []Server{voter("a", "1:1")}, []Candidate{{ID: "a", Address: "1:1"}}, 3, nil},
		{"dead outsider is not added", nil, []Candidate{{ID: "x", Address: "1:1"}}, 3, nil},
		{"no address is skipped", nil, []Candidate{alive("x", "")}, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanMembership(tt.conf, tt.cands, tt.maxVoters, "self")
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Change{}, "Reason")); diff != "" {
				t.Errorf("PlanMembership (-want +got):\n%s", diff)
			}
		})
	}
}
