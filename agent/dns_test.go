package agent

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/internal/testutil"
)

func TestDNSConfig(t *testing.T) {
	base := DefaultConfig()
	base.Name = "pi1"
	for _, c := range []struct {
		listen string
		server bool
		want   string
	}{
		{"", false, ""},
		{"auto:8600", true, ""},
		{"10.0.0.1:8600", true, ""},
		{"auto:8600", false, "only servers answer DNS"},
		{"auto:dns", true, "auto:PORT"},
		{"nonsense", true, "dns_listen"},
	} {
		cfg := base
		cfg.DNSListen, cfg.Server = c.listen, c.server
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("dns_listen %q (server %v): %v, want %q", c.listen, c.server, err, c.want)
		}
	}
}

// TestDNSListener: a server with dns_listen answers for its own board
// from its store, over UDP and TCP on the one address.
func TestDNSListener(t *testing.T) {
	sum := sha256.Sum256([]byte(t.Name()))
	f := &testFleet{t: t, key: sum[:], boards: fakeboard.New()}
	cfg := DefaultConfig()
	cfg.Name = "a1"
	cfg.DataDir = t.TempDir()
	cfg.Server = true
	cfg.BootstrapExpect = 1
	cfg.GossipBind = testutil.FreeAddr(t)
	cfg.RaftBind = testutil.FreeAddr(t)
	cfg.APIListen = []string{testutil.FreeAddr(t)}
	cfg.SSHAddress = "127.0.0.1:22"
	cfg.SSHHostKeyFile = ""
	cfg.ClusterKeyFile = ""
	cfg.DNSListen = "127.0.0.1:0"
	r := f.start(cfg)
	t.Cleanup(func() { r.stop(); <-r.done })
	addr := r.a.DNSAddr()
	if addr == "" {
		t.Fatal("no DNS listener")
	}
	for _, network := range []string{"udp", "tcp"} {
		waitFor(t, "a1.node.herd. over "+network, 15*time.Second, func() error {
			q := new(dns.Msg)
			q.SetQuestion("a1.node.herd.", dns.TypeA)
			m, _, err := (&dns.Client{Net: network, Timeout: time.Second}).Exchange(q, addr)
			if err != nil {
				return err
			}
			if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
				return fmt.Errorf("%s with %d answers", dns.RcodeToString[m.Rcode], len(m.Answer))
			}
			return nil
		})
	}
}
