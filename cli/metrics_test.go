package cli

import (
	"testing"

	"github.com/herd-dev/herd/api"
)

func TestMetricsScrapeConfig(t *testing.T) {
	h := newHarness(t)
	h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi1"}, Status: api.NodeStatus{Phase: api.NodeReady, Address: "10.0.0.11"}})
	h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi2"}, Status: api.NodeStatus{Phase: api.NodeNotReady, Address: "10.0.0.12"}})
	h.put(&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "pi3"}, Status: api.NodeStatus{Phase: api.NodeLeft, Address: "10.0.0.13"}})
	out, _ := h.mustRun(0, "metrics", "scrape-config", "--token-file", "/etc/prometheus/herd.token")
	want := `scrape_configs:
  - job_name: herd
    authorization:
      credentials_file: "/etc/prometheus/herd.token"
    static_configs:
      - targets: ["10.0.0.11:7949", "10.0.0.12:7949"]
`
	if out != want {
		t.Errorf("scrape-config:\n%s\nwant:\n%s", out, want)
	}
	for _, bad := range [][]string{{}, {"--token-file", "herd.token"}, {"--token-file", "/t", "--port", "0"}, {"--token-file", "/t", "--job", "Herd Job"}} {
		if code, _, _ := h.run(append([]string{"metrics", "scrape-config"}, bad...)...); code != exitUsage {
			t.Errorf("scrape-config %v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}
