package agent

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/internal/testutil"
)

// TestDNSListener: a server answers for its own board from its store, over UDP and TCP on the one address.
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
		testutil.Eventually(t, 15*time.Second, "a1.node.herd. over "+network, func() error {
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
