package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigPresetsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"lan", DefaultLANConfig()},
		{"default", DefaultConfig()},
		{"local", DefaultLocalConfig()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name = "pi-1"
			cfg.Key = make([]byte, KeySize)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate = %v", err)
			}
			// The presets need Name and Key filled in.
			if err := tc.cfg.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("empty preset Validate = %v, want ErrConfig", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"name empty", func(c *Config) { c.Name = "" }, "Name"},
		{"name upper", func(c *Config) { c.Name = "Pi1" }, "only lower-case letters"},
		{"name dash", func(c *Config) { c.Name = "-pi" }, "must start and end"},
		{"name long", func(c *Config) { c.Name = strings.Repeat("a", 64) }, "at most 63"},
		{"bind addr", func(c *Config) { c.BindAddr = "pi.local" }, "BindAddr"},
		{"advertise addr", func(c *Config) { c.AdvertiseAddr = "x" }, "AdvertiseAddr"},
		{"bind port", func(c *Config) { c.BindPort = 70000 }, "BindPort"},
		{"advertise port", func(c *Config) { c.AdvertisePort = -1 }, "AdvertisePort"},
		{"key short", func(c *Config) { c.Key = make([]byte, 16) }, "Key: 16 bytes, want 32"},
		{"key missing", func(c *Config) { c.Key = nil }, "Key: 0 bytes"},
		{"join empty", func(c *Config) { c.Join = []string{"10.0.0.1:7946", " "} }, "Join[1]"},
		{"meta", func(c *Config) { c.Meta.SSHAddr = "nope" }, "Meta: gossip: invalid node metadata: SSHAddr"},
		{"retention", func(c *Config) { c.DeadRetention = -time.Second }, "DeadRetention"},
		{"probe interval", func(c *Config) { c.Timing.ProbeInterval = 0 }, "Timing.ProbeInterval"},
		{"probe timeout", func(c *Config) { c.Timing.ProbeTimeout = time.Second }, "shorter than ProbeInterval"},
		{"suspicion", func(c *Config) { c.Timing.SuspicionMult = 0 }, "Timing.SuspicionMult"},
		{"gossip nodes", func(c *Config) { c.Timing.GossipNodes = 0 }, "Timing.GossipNodes"},
		{"tcp timeout", func(c *Config) { c.Timing.TCPTimeout = 0 }, "Timing.TCPTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultLANConfig()
			cfg.Name = "pi-1"
			cfg.Key = make([]byte, KeySize)
			tc.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	cfg := Config{}
	err := cfg.Validate()
	for _, want := range []string{"Name", "BindAddr", "Key", "Timing.ProbeInterval"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to mention %q", err, want)
		}
	}
}

func TestMemberlistConfig(t *testing.T) {
	cfg := DefaultLANConfig()
	cfg.Name = "pi-1"
	cfg.Key = make([]byte, KeySize)
	mc := cfg.memberlistConfig()
	if !mc.GossipVerifyIncoming || !mc.GossipVerifyOutgoing || len(mc.SecretKey) != KeySize {
		t.Errorf("encryption not enforced: verifyIn %v verifyOut %v key %d bytes", mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing, len(mc.SecretKey))
	}
	lan := LANTiming()
	if mc.ProbeInterval != lan.ProbeInterval || mc.SuspicionMult != lan.SuspicionMult || mc.RetransmitMult != lan.RetransmitMult ||
		mc.GossipToTheDeadTime != lan.GossipToTheDeadTime || mc.AdvertisePort != DefaultPort {
		t.Errorf("timings not carried over: %+v", mc)
	}
	if mc.EnableCompression {
		t.Error("EnableCompression = true, want false (small messages; LZW costs more than it saves)")
	}
}
