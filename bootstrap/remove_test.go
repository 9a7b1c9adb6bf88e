package bootstrap

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func TestBoardPaths(t *testing.T) {
	want := []string{
		"/etc/herd",
		"/etc/herd/agent.toml",
		"/etc/herd/api.token",
		"/etc/herd/cluster.key",
		"/etc/herd/cluster_ssh_key",
		"/etc/herd/cluster_ssh_key.pub",
		"/etc/herd/env",
		"/etc/herd/gossip.key",
		"/etc/herd/server.key",
		"/etc/sudoers.d/herd",
		"/etc/systemd/resolved.conf.d/herd.conf",
		"/etc/systemd/system/herd.service",
		"/run/herd",
		"/usr/local/bin/herd",
		"/usr/local/bin/herd.new",
		"/var/lib/herd",
		"/var/lib/herd-exec",
	}
	if diff := cmp.Diff(want, BoardPaths()); diff != "" {
		t.Errorf("BoardPaths (-want +got):\n%s", diff)
	}
	// Everything bootstrap writes on a board is in the list.
	files, err := BoardFiles(BoardPlan{Role: Role{Server: true}}, Secrets{}, File{Path: BinaryPath})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, ResolvedDropIn()) {
		if !strings.HasPrefix(f.Path, "/") || !contains(BoardPaths(), f.Path) {
			t.Errorf("%s is written by bootstrap but not removed", f.Path)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCheckRemoval(t *testing.T) {
	voters := func(ids ...string) []api.RaftServer {
		var out []api.RaftServer
		for _, id := range ids {
			out = append(out, api.RaftServer{ID: id, Suffrage: "voter"})
		}
		return out
	}
	alive := func(ids ...string) []api.GossipMember {
		var out []api.GossipMember
		for _, id := range ids {
			out = append(out, api.GossipMember{Name: id, State: "alive"})
		}
		return out
	}
	three := api.ClusterStatus{Leader: "s1", Servers: voters("s1", "s2", "s3"), Members: alive("s1", "s2", "s3", "w1")}
	tests := []struct {
		name  string
		st    api.ClusterStatus
		board string
		force bool
		err   string
	}{
		{"worker", three, "w1", false, ""},
		{"one of three servers", three, "s2", false, ""},
		{"the leader", three, "s1", false, ""},
		{"last server", api.ClusterStatus{Servers: voters("s1"), Members: alive("s1")}, "s1", false, "last Raft server"},
		{"last server forced", api.ClusterStatus{Servers: voters("s1"), Members: alive("s1")}, "s1", true, ""},
		{"quorum lost", api.ClusterStatus{Servers: voters("s1", "s2", "s3"), Members: alive("s1", "s2")}, "s2", false, "leaves 2 voters of which 1 are alive, fewer than the 2"},
		{"quorum lost forced", api.ClusterStatus{Servers: voters("s1", "s2", "s3"), Members: alive("s1", "s2")}, "s2", true, ""},
		{"nonvoter", api.ClusterStatus{Servers: append(voters("s1"), api.RaftServer{ID: "s4", Suffrage: "nonvoter"}), Members: alive("s1")}, "s4", false, ""},
		{"a dead voter can go", api.ClusterStatus{Servers: voters("s1", "s2", "s3"), Members: alive("s1", "s2")}, "s3", false, ""},
	}
	for _, tt := range tests {
		err := CheckRemoval(tt.st, tt.board, tt.force)
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrRemove) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err %v, want ErrRemove containing %q", tt.name, err, tt.err)
		}
	}
}

func TestGone(t *testing.T) {
	tests := []struct {
		st   api.ClusterStatus
		ok   bool
		why  string
		name string
	}{
		{api.ClusterStatus{Leader: "s1", Members: []api.GossipMember{{Name: "w1", State: "left"}}}, true, "", "left"},
		{api.ClusterStatus{Leader: "s1"}, true, "", "absent"},
		{api.ClusterStatus{Leader: "s1", Members: []api.GossipMember{{Name: "w1", State: "alive"}}}, false, "still an alive gossip member", "alive"},
		{api.ClusterStatus{Leader: "s1", Servers: []api.RaftServer{{ID: "w1"}}}, false, "still a Raft server", "raft"},
		{api.ClusterStatus{}, false, "no leader", "no leader"},
	}
	for _, tt := range tests {
		if ok, why := Gone(tt.st, "w1"); ok != tt.ok || why != tt.why {
			t.Errorf("%s: Gone = %v, %q; want %v, %q", tt.name, ok, why, tt.ok, tt.why)
		}
	}
}

func TestHerdUnits(t *testing.T) {
	out := "herd-web-x2b4z.service loaded active running web\nherd-web-q7k9m.service not-found inactive dead x\nherd.service loaded active running herd agent\n" +
		"herd-web-x2b4z.service\nherd-x y.service\nherd-[a].service\nherd-.service\nsshd.service\n\n"
	want := []string{"herd-web-q7k9m.service", "herd-web-x2b4z.service"}
	if diff := cmp.Diff(want, HerdUnits([]byte(out))); diff != "" {
		t.Errorf("HerdUnits (-want +got):\n%s", diff)
	}
}
