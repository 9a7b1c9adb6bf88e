package gossip

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

func server(name string, expect int) Member {
	return Member{
		Name:  name,
		Addr:  "10.0.0.1",
		Port:  7946,
		State: api.MemberAlive,
		Meta:  Meta{Server: true, RaftAddr: name + ":7000", BootstrapExpect: expect},
	}
}

func worker(name string) Member {
	return Member{Name: name, State: api.MemberAlive, Meta: Meta{SSHAddr: name + ":22"}}
}

func with(m Member, edit func(*Member)) Member {
	edit(&m)
	return m
}

func TestBootstrapPeers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		self    string
		expect  int
		members []Member
		want    []string // names of peers
		ok      bool
		err     error
		errHas  string
	}{
		{
			name: "waiting for more", self: "a", expect: 3,
			members: []Member{server("a", 3), server("b", 3), worker("w")},
		},
		{
			name: "exactly expect", self: "b", expect: 3,
			members: []Member{server("c", 3), server("a", 3), worker("w"), server("b", 3)},
			want:    []string{"a", "b", "c"}, ok: true,
		},
		{
			name: "single server", self: "a", expect: 1,
			members: []Member{server("a", 1), worker("w")},
			want:    []string{"a"}, ok: true,
		},
		{
			name: "more than expect, self chosen", self: "b", expect: 3,
			members: []Member{server("d", 3), server("c", 3), server("b", 3), server("a", 3)},
			want:    []string{"a", "b", "c"}, ok: true,
		},
		{
			name: "more than expect, self not chosen", self: "d", expect: 3,
			members: []Member{server("d", 3), server("c", 3), server("b", 3), server("a", 3)},
			want:    []string{"a", "b", "c"}, ok: false,
		},
		{
			name: "dead and left servers do not count", self: "a", expect: 3,
			members: []Member{
				server("a", 3), server("b", 3),
				with(server("c", 3), func(m *Member) { m.State = api.MemberDead }),
				with(server("d", 3), func(m *Member) { m.State = api.MemberLeft }),
			},
		},
		{
			name: "unreadable meta does not count", self: "a", expect: 2,
			members: []Member{server("a", 2), with(server("b", 2), func(m *Member) { m.MetaErr = "bad" })},
		},
		{
			name: "servers with expect 0 are ignored", self: "a", expect: 2,
			members: []Member{server("a", 2), server("late", 0), server("b", 2)},
			want:    []string{"a", "b"}, ok: true,
		},
		{
			name: "mismatch", self: "a", expect: 3,
			members: []Member{server("a", 3), server("b", 5), server("c", 3), server("d", 1)},
			err:     ErrBootstrapMismatch, errHas: "want 3: b expects 5, d expects 1",
		},
		{
			name: "server without raft address", self: "a", expect: 2,
			members: []Member{server("a", 2), with(server("b", 2), func(m *Member) { m.Meta.RaftAddr = "" })},
			err:     ErrBootstrapMismatch, errHas: "b has no raft address",
		},
		{
			name: "self not a server", self: "w", expect: 1,
			members: []Member{server("a", 1), worker("w")},
			err:     ErrBootstrapConfig, errHas: `"w" is not an alive server`,
		},
		{
			name: "self missing", self: "x", expect: 1,
			members: []Member{server("a", 1)},
			err:     ErrBootstrapConfig,
		},
		{
			name: "expect zero", self: "a", expect: 0,
			members: []Member{server("a", 0)},
			err:     ErrBootstrapConfig, errHas: "at least 1",
		},
		{
			name: "duplicates counted once", self: "a", expect: 2,
			members: []Member{server("a", 2), server("a", 2)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peers, ok, err := BootstrapPeers(tc.self, tc.expect, tc.members)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.err, tc.errHas)
				}
				if ok || peers != nil {
					t.Errorf("on error got peers %v, ok %v", peers, ok)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			var names []string
			for _, p := range peers {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" || ok != tc.ok {
				t.Errorf("ok = %v, want %v; peers (-want +got):\n%s", ok, tc.ok, diff)
			}
		})
	}
}

// Every chosen server computes the same voter set, whatever order it sees
// the members in.
func TestBootstrapPeersDeterministic(t *testing.T) {
	members := []Member{server("e", 3), worker("w1"), server("b", 3), server("d", 3), server("a", 3), worker("w2"), server("c", 3)}
	var first []Member
	for i := range members {
		rot := append(append([]Member(nil), members[i:]...), members[:i]...)
		for _, self := range []string{"a", "b", "c"} {
			peers, ok, err := BootstrapPeers(self, 3, rot)
			if err != nil || !ok {
				t.Fatalf("rotation %d self %s: ok %v err %v", i, self, ok, err)
			}
			if first == nil {
				first = peers
			}
			if diff := cmp.Diff(first, peers); diff != "" {
				t.Fatalf("rotation %d self %s differs (-first +got):\n%s", i, self, diff)
			}
		}
	}
}
