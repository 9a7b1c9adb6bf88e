package agent

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ips(ss ...string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		if s == "" {
			out = append(out, nil)
			continue
		}
		out = append(out, net.ParseIP(s))
	}
	return out
}

func TestChooseAdvertiseIP(t *testing.T) {
	lanAndVPN := ips("127.0.0.1", "::1", "100.64.3.7", "192.168.1.23", "fe80::1")
	tests := []struct {
		name    string
		bind    string
		routes  []net.IP
		ifaces  []net.IP
		want    string
		how     string
		wantErr string
	}{
		{"specific bind wins", "10.0.0.5", ips("192.168.1.23"), lanAndVPN, "10.0.0.5", "bind", ""},
		// herdctl reached the board over a VPN (100.64.x), its peers are
		// on the LAN: the route to them says which address to advertise.
		{"route to peers", "0.0.0.0", ips("192.168.1.23"), lanAndVPN, "192.168.1.23", "route", ""},
		{"first peer with a route", "::", ips("", "10.77.0.2", "192.168.1.23"), lanAndVPN, "10.77.0.2", "route", ""},
		{"loopback peers (one machine)", "0.0.0.0", ips("127.0.0.1"), lanAndVPN, "127.0.0.1", "route", ""},
		{"no peers: first private", "0.0.0.0", nil, lanAndVPN, "192.168.1.23", "private", ""},
		{"no route to any peer: first private", "0.0.0.0", ips("", ""), lanAndVPN, "192.168.1.23", "private", ""},
		{"public only", "", nil, ips("127.0.0.1", "203.0.113.9"), "203.0.113.9", "first IPv4", ""},
		{"nothing", "0.0.0.0", nil, ips("127.0.0.1", "::1"), "", "", "set gossip_advertise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, how, err := chooseAdvertiseIP(tt.bind, tt.routes, tt.ifaces)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || ip.String() != tt.want || !strings.Contains(how, tt.how) {
				t.Errorf("chooseAdvertiseIP = %v, %q, %v; want %s (%s)", ip, how, err, tt.want, tt.how)
			}
		})
	}
}

func TestResolveAdvertise(t *testing.T) {
	base := func(edit func(*Config)) Config {
		c := Config{Server: true, GossipBind: "0.0.0.0:7946", RaftBind: "0.0.0.0:7947", Join: []string{"10.0.0.1:7946"}}
		edit(&c)
		return c
	}
	route, ifaces := ips("10.0.0.9"), ips("127.0.0.1", "172.16.0.4", "10.0.0.9")
	tests := []struct {
		name string
		cfg  Config
		want Advertised
	}{
		{"all auto (what bootstrap writes)", base(func(c *Config) {
			c.GossipAdvertise, c.RaftAdvertise, c.SSHAddress = "auto", "auto", "auto:2222"
		}), Advertised{Gossip: "10.0.0.9:7946", Raft: "10.0.0.9:7947", SSH: "10.0.0.9:2222", How: "route to join peers"}},
		{"empty is auto", base(func(*Config) {}),
			Advertised{Gossip: "10.0.0.9:7946", Raft: "10.0.0.9:7947", SSH: "10.0.0.9:22", How: "route to join peers"}},
		{"auto with ports", base(func(c *Config) { c.GossipAdvertise, c.RaftAdvertise = "auto:8000", "auto:8001" }),
			Advertised{Gossip: "10.0.0.9:8000", Raft: "10.0.0.9:8001", SSH: "10.0.0.9:22", How: "route to join peers"}},
		// bootstrap --advertise pi1=192.168.7.10
		{"explicit (--advertise)", base(func(c *Config) {
			c.GossipAdvertise, c.RaftAdvertise, c.SSHAddress = "192.168.7.10:7946", "192.168.7.10:7947", "192.168.7.10:22"
		}), Advertised{Gossip: "192.168.7.10:7946", Raft: "192.168.7.10:7947", SSH: "192.168.7.10:22", How: "gossip_advertise"}},
		{"explicit gossip, auto raft and ssh follow it", base(func(c *Config) { c.GossipAdvertise = "192.168.7.10:7946" }),
			Advertised{Gossip: "192.168.7.10:7946", Raft: "192.168.7.10:7947", SSH: "192.168.7.10:22", How: "gossip_advertise"}},
		{"specific binds", base(func(c *Config) { c.GossipBind, c.RaftBind = "127.0.0.1:17946", "127.0.0.2:17947" }),
			Advertised{Gossip: "127.0.0.1:17946", Raft: "127.0.0.2:17947", SSH: "127.0.0.1:22", How: "bind address"}},
		{"worker: no raft", base(func(c *Config) { c.Server = false }),
			Advertised{Gossip: "10.0.0.9:7946", SSH: "10.0.0.9:22", How: "route to join peers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveAdvertise(tt.cfg, route, ifaces)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := resolveAdvertise(base(func(*Config) {}), nil, ips("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "gossip_advertise") {
		t.Errorf("no address at all: err = %v", err)
	}
}

func TestCheckAdvertise(t *testing.T) {
	for v, ok := range map[string]bool{
		"": true, "auto": true, "auto:22": true, "auto:65535": true, "10.0.0.1:7946": true, "pi1.local:22": true,
		"auto:": false, "auto:0": false, "auto:x": false, "auto:70000": false, "0.0.0.0:7946": false, "10.0.0.1": false, "automatic": false,
	} {
		if err := checkAdvertise(v); (err == nil) != ok {
			t.Errorf("checkAdvertise(%q) = %v, want ok %v", v, err, ok)
		}
	}
}

// TestRouteSourcesTo asks the kernel for real routes, to loopback only: no
// packet is sent (a UDP "connect" only picks the route).
func TestRouteSourcesTo(t *testing.T) {
	got := routeSourcesTo(context.Background(), []string{"127.0.0.1:7946", "127.0.0.1", "127.0.0.1:notaport"})
	for i, ip := range got {
		if ip == nil || !ip.IsLoopback() {
			t.Errorf("entry %d: source %v, want a loopback address", i, ip)
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d sources, want 3", len(got))
	}
}
