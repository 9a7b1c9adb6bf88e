package bootstrap

import (
	"bytes"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent"
)

func sampleConfigs() map[string]AgentConfig {
	return map[string]AgentConfig{
		"agent-server.toml": {
			Name: "b1", DataDir: DataDir, Server: true, BootstrapExpect: 3,
			Join:          []string{"10.0.0.3:7946", "10.0.0.4:7946"},
			GossipKeyFile: GossipKeyPath, ServerKeyFile: ServerKeyPath, GossipBind: "0.0.0.0:7946", GossipAdvertise: "10.0.0.2:7946",
			RaftBind: "0.0.0.0:7947", RaftAdvertise: "10.0.0.2:7947",
			APIListen: []string{APIAddr, "unix://" + APISocket}, APITokenFile: APITokenPath,
			SSHAddress: "10.0.0.2:22", SSHHostKeyFile: HostKeyFiles[0], SSHUser: "root", SSHKeyFile: ClusterSSHKey,
			Labels: map[string]string{"room": "attic", "herd.dev/tier": "edge"},
		},
		"agent-worker.toml": {
			Name: "b4", DataDir: DataDir, Server: false,
			Join:          []string{"10.0.0.2:7946"},
			GossipKeyFile: GossipKeyPath, GossipBind: "0.0.0.0:7946", GossipAdvertise: "[fd00::5]:7946",
			RaftBind: "0.0.0.0:7947", RaftAdvertise: "[fd00::5]:7947",
			APIListen:  []string{APIAddr, "unix://" + APISocket},
			SSHAddress: "[fd00::5]:2222", SSHHostKeyFile: HostKeyFiles[1], SSHUser: "root",
		},
		"agent-single.toml": {
			Name: "solo", DataDir: DataDir, Server: true, BootstrapExpect: 1,
			GossipKeyFile: GossipKeyPath, ServerKeyFile: ServerKeyPath, GossipBind: "0.0.0.0:7946", GossipAdvertise: "192.168.1.9:7946",
			RaftBind: "0.0.0.0:7947", RaftAdvertise: "192.168.1.9:7947",
			APIListen: []string{APIAddr, "unix://" + APISocket}, APITokenFile: APITokenPath,
			SSHAddress: "192.168.1.9:22", SSHHostKeyFile: HostKeyFiles[0], SSHUser: "root", SSHKeyFile: ClusterSSHKey,
		},
	}
}

func TestRenderAgentConfig(t *testing.T) {
	for name, c := range sampleConfigs() {
		t.Run(name, func(t *testing.T) {
			got, err := RenderAgentConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, got)

			// The agent's own strict loader reads it back, and it validates.
			p := writeFile(t, t.TempDir(), "agent.toml", got, 0o644)
			ac := agent.DefaultConfig()
			if err := agent.LoadConfigFile(&ac, p); err != nil {
				t.Fatalf("agent.LoadConfigFile: %v", err)
			}
			if err := ac.Validate(); err != nil {
				t.Fatalf("agent config does not validate: %v", err)
			}
			back := AgentConfig{
				Name: ac.Name, DataDir: ac.DataDir, Server: ac.Server, BootstrapExpect: ac.BootstrapExpect,
				Join: ac.Join, GossipKeyFile: ac.GossipKeyFile, ServerKeyFile: ac.ServerKeyFile, GossipBind: ac.GossipBind,
				GossipAdvertise: ac.GossipAdvertise, RaftBind: ac.RaftBind, RaftAdvertise: ac.RaftAdvertise,
				APIListen: ac.APIListen, APITokenFile: ac.APITokenFile, SSHAddress: ac.SSHAddress, SSHHostKeyFile: ac.SSHHostKeyFile,
				SSHUser: ac.SSHUser, SSHKeyFile: ac.SSHKeyFile, Labels: ac.Labels,
			}
			if ac.ClusterKeyFile != "" {
				t.Errorf("cluster_key_file = %q, want none: no legacy fallback", ac.ClusterKeyFile)
			}
			if !ac.Server {
				// A worker's file names no server secrets; the agent's
				// defaults for them are never read (server = false).
				back.ServerKeyFile, back.SSHKeyFile = "", ""
			}
			if c.Join == nil {
				c.Join = []string{}
			}
			if diff := cmp.Diff(c, back); diff != "" {
				t.Errorf("agent read back (-rendered +read):\n%s", diff)
			}
		})
	}
}

func TestRenderAgentConfigValuesAreData(t *testing.T) {
	// A hostile label value must stay one TOML string, not new keys.
	c := sampleConfigs()["agent-single.toml"]
	c.Labels = map[string]string{"x": "a\"\nserver = false\n[evil]\nk = \"v"}
	got, err := RenderAgentConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, t.TempDir(), "agent.toml", got, 0o644)
	ac := agent.DefaultConfig()
	if err := agent.LoadConfigFile(&ac, p); err != nil {
		t.Fatalf("LoadConfigFile: %v\n%s", err, got)
	}
	if !ac.Server || ac.Labels["x"] != c.Labels["x"] {
		t.Errorf("label value leaked into the file structure:\n%s", got)
	}
}

func TestRenderUnit(t *testing.T) {
	got := RenderUnit()
	golden(t, "herd.service", got)
	opts, err := unit.Deserialize(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if !unit.AllMatch(opts, UnitOptions()) {
		t.Errorf("unit does not round-trip through go-systemd:\n%s", got)
	}
}
