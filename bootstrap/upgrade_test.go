package bootstrap

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/sshexec"
)

func names(bs []StateBoard) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

func TestUpgradeOrder(t *testing.T) {
	boards := []StateBoard{{Name: "s1", Server: true}, {Name: "s2", Server: true}, {Name: "s3", Server: true}, {Name: "w1"}, {Name: "w2"}}
	tests := []struct {
		leader string
		want   []string
	}{
		{"s1", []string{"w1", "w2", "s2", "s3", "s1"}},
		{"s2", []string{"w1", "w2", "s1", "s3", "s2"}},
		{"s3", []string{"w1", "w2", "s1", "s2", "s3"}},
		// A leader that is not recorded (or a worker name) changes nothing.
		{"w1", []string{"w1", "w2", "s1", "s2", "s3"}},
		{"", []string{"w1", "w2", "s1", "s2", "s3"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, names(UpgradeOrder(boards, tt.leader))); diff != "" {
			t.Errorf("leader %q (-want +got):\n%s", tt.leader, diff)
		}
	}
	if got := UpgradeOrder(nil, "s1"); len(got) != 0 {
		t.Errorf("no boards: %v", got)
	}
}

func TestGate(t *testing.T) {
	server := StateBoard{Name: "s2", Server: true}
	worker := StateBoard{Name: "w1"}
	cluster := api.ClusterStatus{Leader: "s1", Members: []api.GossipMember{{Name: "s1", State: "alive"}, {Name: "s2", State: "alive"}, {Name: "w1", State: "alive"}}}
	self := api.ClusterStatus{Node: "s2", Version: "v2", Leader: "s1", AppliedIndex: 100}
	tests := []struct {
		name string
		in   GateInput
		ok   bool
		why  string
	}{
		{"server ready", GateInput{Board: server, Want: "v2", Self: self, Cluster: cluster, CommitAtRestart: 100}, true, ""},
		{"server behind", GateInput{Board: server, Want: "v2", Self: self, Cluster: cluster, CommitAtRestart: 101}, false, "raft applied index 100 of 101"},
		{"old version", GateInput{Board: server, Want: "v3", Self: self, Cluster: cluster}, false, "agent runs v2, want v3"},
		{"not answering", GateInput{Board: server, Want: "v2", SelfErr: errors.New("connection refused"), Cluster: cluster}, false, "agent not answering (connection refused)"},
		{"server sees no leader", GateInput{Board: server, Want: "v2", Self: api.ClusterStatus{Version: "v2", AppliedIndex: 100}, Cluster: cluster}, false, "the board sees no leader"},
		{"no leader", GateInput{Board: server, Want: "v2", Self: self, Cluster: api.ClusterStatus{Members: cluster.Members}}, false, "no leader"},
		{"not in gossip", GateInput{Board: worker, Want: "v2", Self: api.ClusterStatus{Version: "v2"}, Cluster: api.ClusterStatus{Leader: "s1", Members: []api.GossipMember{{Name: "w1", State: "suspect"}}}}, false, "not alive in gossip"},
		{"cluster unreachable", GateInput{Board: worker, Want: "v2", Self: api.ClusterStatus{Version: "v2"}, ClusterErr: errors.New("eof")}, false, "cluster status: eof"},
		// A worker has no Raft index to wait for.
		{"worker ready", GateInput{Board: worker, Want: "v2", Self: api.ClusterStatus{Version: "v2"}, Cluster: cluster, CommitAtRestart: 100}, true, ""},
		{"two things", GateInput{Board: worker, Want: "v2", Self: api.ClusterStatus{Version: "v1"}, Cluster: api.ClusterStatus{}}, false, "agent runs v1, want v2; no leader; not alive in gossip"},
	}
	for _, tt := range tests {
		ok, why := Gate(tt.in)
		if ok != tt.ok || why != tt.why {
			t.Errorf("%s: Gate = %v, %q; want %v, %q", tt.name, ok, why, tt.ok, tt.why)
		}
	}
}

func TestDecide(t *testing.T) {
	next := func(v string, f int) api.VersionInfo { return api.VersionInfo{Version: v, StateFormat: f} }
	tests := []struct {
		name   string
		in     UpgradeCheck
		action UpgradeAction
		why    string
		err    string
	}{
		{"upgrade", UpgradeCheck{Running: "v1.0.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v1.1.0", 1)}, UpgradeInstall, "v1.0.0 → v1.1.0", ""},
		{"same version", UpgradeCheck{Running: "v1.1.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v1.1.0", 1)}, UpgradeSkip, "already on v1.1.0", ""},
		{"same version, unit changed", UpgradeCheck{Running: "v1.1.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v1.1.0", 1), Installed: true, UnitChanged: true}, UpgradeRestart, "already on v1.1.0, but herd.service changed: restarting", ""},
		{"unit changed too", UpgradeCheck{Running: "v1.0.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v1.1.0", 1), UnitChanged: true}, UpgradeInstall, "v1.0.0 → v1.1.0", ""},
		{"downgrade across formats, unit changed", UpgradeCheck{Running: "v2.0.0", RunningFormat: 2, ClusterFormat: 2, Next: next("v1.1.0", 1), UnitChanged: true}, "", "", "herd v1.1.0 reads state format 1, the cluster runs format 2"},
		{"binary in place", UpgradeCheck{Running: "v1.0.0", ClusterFormat: 1, Next: next("v1.1.0", 1), Installed: true}, UpgradeRestart, "v1.0.0 → v1.1.0: binary in place, restarting", ""},
		{"downgrade same format", UpgradeCheck{Running: "v1.1.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v1.0.0", 1)}, UpgradeInstall, "v1.1.0 → v1.0.0 (a downgrade, same state format 1)", ""},
		{"format up", UpgradeCheck{Running: "v1.1.0", RunningFormat: 1, ClusterFormat: 1, Next: next("v2.0.0", 2)}, UpgradeInstall, "v1.1.0 → v2.0.0 (state format 1 → 2)", ""},
		{"downgrade across formats", UpgradeCheck{Running: "v2.0.0", RunningFormat: 2, ClusterFormat: 2, Next: next("v1.1.0", 1)}, "", "", "herd v1.1.0 reads state format 1, the cluster runs format 2"},
		// The cluster's format counts even when this board is older.
		{"cluster newer than the board", UpgradeCheck{Running: "v1.1.0", RunningFormat: 1, ClusterFormat: 2, Next: next("v1.2.0", 1)}, "", "", "reads state format 1, the cluster runs format 2"},
		// Agents that do not report a format run the first one.
		{"old agents", UpgradeCheck{Running: "v0.9.0", Next: next("v1.0.0", 1)}, UpgradeInstall, "v0.9.0 → v1.0.0", ""},
		{"agent down", UpgradeCheck{ClusterFormat: 1, Next: next("v1.0.0", 1)}, UpgradeInstall, "(agent not answering) → v1.0.0", ""},
		{"dev builds", UpgradeCheck{Running: "dev", ClusterFormat: 1, Next: next("abc123", 1)}, UpgradeInstall, "dev → abc123", ""},
	}
	for _, tt := range tests {
		action, why, err := Decide(tt.in)
		if tt.err != "" {
			if !errors.Is(err, ErrDowngrade) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want ErrDowngrade containing %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || action != tt.action || why != tt.why {
			t.Errorf("%s: Decide = %q, %q, %v; want %q, %q", tt.name, action, why, err, tt.action, tt.why)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		c    int
		ok   bool
	}{
		{"v1.2.3", "v1.2.3", 0, true},
		{"v1.2.3", "v1.10.0", -1, true},
		{"1.2.3", "v1.2.2", 1, true},
		{"v1.2.3-4-gabc", "v1.2.3", 1, true},
		{"v1.2.3-4-gabc", "v1.2.3-10-gdef", -1, true},
		{"dev", "v1.0.0", 0, false},
		{"v1.2", "v1.2.0", 0, false},
		{"v1.x.0", "v1.2.0", 0, false},
	}
	for _, tt := range tests {
		if c, ok := CompareVersions(tt.a, tt.b); c != tt.c || ok != tt.ok {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d, %v", tt.a, tt.b, c, ok, tt.c, tt.ok)
		}
	}
}

func TestParseVersionOutput(t *testing.T) {
	tests := []struct {
		out  string
		want api.VersionInfo
		err  bool
	}{
		{`{"version":"v1.2.0","stateFormat":1,"goVersion":"go1.26","arch":"arm64"}` + "\n", api.VersionInfo{Version: "v1.2.0", StateFormat: 1, GoVersion: "go1.26", Arch: "arm64"}, false},
		{`{"version":"v1.2.0"}`, api.VersionInfo{Version: "v1.2.0", StateFormat: 1}, false},
		{"herd v0.9.0\n", api.VersionInfo{Version: "v0.9.0", StateFormat: 1}, false},
		{"", api.VersionInfo{}, true},
		{`{"stateFormat":1}`, api.VersionInfo{}, true},
		{"Error: unknown shorthand flag: 'o' in -o", api.VersionInfo{}, true},
	}
	for _, tt := range tests {
		got, err := ParseVersionOutput([]byte(tt.out))
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseVersionOutput(%q) = %+v, %v; want %+v, error %v", tt.out, got, err, tt.want, tt.err)
		}
	}
}

// fakeAgentRemote plays systemd with one herd.service: MainPID changes
// when the agent is sent a signal it obeys.
type fakeAgentRemote struct {
	pid    int
	obeys  map[string]bool // signal → the agent exits on it
	calls  [][]string
	failOn string
}

func (f *fakeAgentRemote) Run(_ context.Context, _ string, argv []string) (sshexec.Result, error) {
	f.calls = append(f.calls, argv)
	switch {
	case slices.Equal(argv, []string{"systemctl", "show", "-p", "MainPID", "--value", UnitName}):
		return sshexec.Result{Stdout: []byte(strconv.Itoa(f.pid) + "\n")}, nil
	case len(argv) == 6 && argv[1] == "kill" && argv[2] == "--kill-whom=main" && argv[3] == "-s" && argv[5] == UnitName:
		if f.obeys[argv[4]] {
			f.pid++
		}
		return sshexec.Result{}, nil
	case slices.Equal(argv, []string{"systemctl", "restart", UnitName}):
		f.pid = 100
		return sshexec.Result{}, nil
	}
	return sshexec.Result{ExitStatus: 1, Stderr: []byte("unexpected")}, nil
}

func (f *fakeAgentRemote) PutFile(context.Context, string, string, []byte, os.FileMode, ...sshexec.PutFileOptions) error {
	return errors.New("unexpected PutFile")
}

func (f *fakeAgentRemote) ReadFile(context.Context, string, string) ([]byte, error) {
	return nil, errors.New("unexpected ReadFile")
}

func TestRestartAgent(t *testing.T) {
	kills := func(f *fakeAgentRemote) []string {
		var out []string
		for _, c := range f.calls {
			if len(c) > 4 && c[1] == "kill" {
				out = append(out, c[4])
			}
			if len(c) > 1 && c[1] == "restart" {
				out = append(out, "restart")
			}
		}
		return out
	}
	ctx := context.Background()
	say := func(msg string) { t.Log(msg) }
	tests := []struct {
		name string
		f    *fakeAgentRemote
		want []string
		err  bool
	}{
		{"new agent", &fakeAgentRemote{pid: 7, obeys: map[string]bool{RestartSignal: true, "SIGKILL": true}}, []string{RestartSignal}, false},
		{"old agent ignores SIGUSR1", &fakeAgentRemote{pid: 7, obeys: map[string]bool{"SIGKILL": true}}, []string{RestartSignal, "SIGKILL"}, false},
		{"not running", &fakeAgentRemote{pid: 0}, []string{"restart"}, false},
		{"stuck", &fakeAgentRemote{pid: 7, obeys: map[string]bool{}}, []string{RestartSignal, "SIGKILL"}, true},
	}
	for _, tt := range tests {
		err := restartAgent(ctx, tt.f, "b1", 300*time.Millisecond, say)
		if (err != nil) != tt.err {
			t.Errorf("%s: err %v, want error %v", tt.name, err, tt.err)
		}
		if diff := cmp.Diff(tt.want, kills(tt.f)); diff != "" {
			t.Errorf("%s: signals (-want +got):\n%s", tt.name, diff)
		}
	}
}
