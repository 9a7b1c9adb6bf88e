package raftstore

// Candidate is a server seen by gossip, as PlanMembership weighs it.
type Candidate struct {
	// ID is the server's NodeID (its gossip name).
	ID string
	// Address is the raft address it advertises.
	Address string
	// Alive is gossip's alive state; Left is a graceful leave. A member
	// that is neither (suspect, dead) is left alone: a crashed voter keeps
	// its seat so that it can come back.
	Alive, Left bool
}

// ChangeType is what a membership Change does.
type ChangeType string

// Membership changes.
const (
	AddVoter    ChangeType = "add-voter"
	AddNonvoter ChangeType = "add-nonvoter"
	// RemoveServer takes a server out of the configuration: it left, or
	// it moved to another address (it is added again where it is now by a
	// later plan, once the removal committed).
	RemoveServer ChangeType = "remove"
)

// Change is one step of a membership plan.
type Change struct {
	Type    ChangeType
	ID      string
	Address string
	// Reason says why, for the log.
	Reason string
}

// PlanMembership returns the changes that bring the Raft configuration
// conf in line with the servers gossip sees: an alive server not in conf
// joins as a voter while there are fewer than maxVoters (0: keep the
// current number, at least 1), else as a non-voter; an alive server whose
// address changed is removed (to be re-added at the new address); a server
// that left gracefully is removed, except self. Candidates are considered
// in the order given, so every leader plans alike for the same input. The
// caller applies the changes in order and stops at the first failure (the
// next plan starts from what was applied).
func PlanMembership(conf []Server, candidates []Candidate, maxVoters int, self string) []Change {
	inConf := make(map[string]Server, len(conf))
	voters := 0
	for _, s := range conf {
		inConf[s.ID] = s
		if s.Voter {
			voters++
		}
	}
	if maxVoters == 0 {
		maxVoters = max(voters, 1)
	}
	var out []Change
	for _, c := range candidates {
		if c.ID == "" || c.Address == "" {
			continue
		}
		s, known := inConf[c.ID]
		switch {
		case c.Alive && !known:
			if voters < maxVoters {
				voters++
				out = append(out, Change{Type: AddVoter, ID: c.ID, Address: c.Address, Reason: "alive server not in the configuration"})
			} else {
				out = append(out, Change{Type: AddNonvoter, ID: c.ID, Address: c.Address, Reason: "alive server beyond the voter count"})
			}
			inConf[c.ID] = Server{ID: c.ID, Address: c.Address}
		case c.Alive && known && s.Address != c.Address:
			out = append(out, Change{Type: RemoveServer, ID: c.ID, Address: s.Address, Reason: "server moved to " + c.Address})
		case c.Left && known && c.ID != self:
			out = append(out, Change{Type: RemoveServer, ID: c.ID, Address: s.Address, Reason: "server left the cluster"})
		}
	}
	return out
}
