package agent

import (
	"testing"

	"github.com/herd-dev/herd/bootstrap"
)

// TestDNSPortMatchesBootstrap: the resolver drop-in bootstrap writes
// (bootstrap.DNSPort) names the port the agent's DNS listener uses.
// bootstrap cannot import agent (this package's tests import bootstrap,
// and herdctl would link the agent), so the value lives in both.
func TestDNSPortMatchesBootstrap(t *testing.T) {
	if DefaultDNSPort != bootstrap.DNSPort {
		t.Errorf("agent.DefaultDNSPort = %d, bootstrap.DNSPort = %d: they must agree", DefaultDNSPort, bootstrap.DNSPort)
	}
}
