package gossip

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/herd-dev/herd/api"
)

var (
	// ErrBootstrapMismatch is returned (wrapped) by BootstrapPeers when
	// visible servers disagree on BootstrapExpect.
	ErrBootstrapMismatch = errors.New("gossip: servers disagree on bootstrap-expect")
	// ErrBootstrapConfig is returned (wrapped) by BootstrapPeers for a call
	// that can never succeed: expect < 1, or self is not a bootstrapping
	// server.
	ErrBootstrapConfig = errors.New("gossip: bad bootstrap request")
)

// BootstrapPeers decides whether the server named self should bootstrap Raft
// now, and with which voters. It is a pure function of what gossip shows, so
// every server that sees the same members computes the same voter set.
//
// Candidates are the alive members with Server set, readable metadata and a
// non-zero BootstrapExpect (a server with 0 joins an existing cluster and is
// ignored). Any candidate whose BootstrapExpect differs from expect is a
// misconfiguration: the result is an error wrapping ErrBootstrapMismatch
// naming each disagreeing server. Once at least expect candidates are
// visible, the first expect of them by name are the voters; ok is true when
// self is one of them. ok is false while fewer are visible (keep waiting)
// and when self is not among the chosen ones (wait for the leader to add
// self instead of bootstrapping). peers is sorted by name.
//
// self must be an alive candidate itself (its own member, with its own
// BootstrapExpect equal to expect), otherwise the error wraps
// ErrBootstrapConfig. A server whose own RaftAddr is empty is a candidate
// without an address and is reported as a mismatch too.
//
// Caveat, as with any bootstrap-expect scheme: when more than expect
// servers are configured with the same value and they come up at different
// times, two servers can see different first-expect sets. Configure exactly
// expect bootstrapping servers.
func BootstrapPeers(self string, expect int, members []Member) (peers []Member, ok bool, err error) {
	if expect < 1 {
		return nil, false, fmt.Errorf("%w: expect %d, want at least 1", ErrBootstrapConfig, expect)
	}
	var cands []Member
	var bad []string
	seen := make(map[string]bool)
	for _, m := range members {
		if m.State != api.MemberAlive || m.MetaErr != "" || !m.Meta.Server || m.Meta.BootstrapExpect == 0 {
			continue
		}
		if seen[m.Name] {
			continue
		}
		seen[m.Name] = true
		switch {
		case m.Meta.BootstrapExpect != expect:
			bad = append(bad, fmt.Sprintf("%s expects %d", m.Name, m.Meta.BootstrapExpect))
		case m.Meta.RaftAddr == "":
			bad = append(bad, fmt.Sprintf("%s has no raft address", m.Name))
		default:
			cands = append(cands, m.clone())
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return nil, false, fmt.Errorf("%w: want %d: %s", ErrBootstrapMismatch, expect, strings.Join(bad, ", "))
	}
	if !seen[self] {
		return nil, false, fmt.Errorf("%w: %q is not an alive server with bootstrap-expect %d among the members", ErrBootstrapConfig, self, expect)
	}
	if len(cands) < expect {
		return nil, false, nil
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Name < cands[j].Name })
	peers = cands[:expect:expect]
	ok = slices.ContainsFunc(peers, func(m Member) bool { return m.Name == self })
	return peers, ok, nil
}
