package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// scrape GETs url with token and returns the body; it fails the test
// unless the answer is 200.
func scrape(t *testing.T, url, token string) string {
	t.Helper()
	code, body := get(t, url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return body
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sample returns the value of the sample name whose labels include
// labelPairs (name, value, ...), or an error when there is none.
func sample(body, name string, labelPairs ...string) (float64, error) {
	v, ok, err := testutil.MetricValue(body, name, labelPairs...)
	if err == nil && !ok {
		err = fmt.Errorf("no sample %s %q", name, labelPairs)
	}
	return v, err
}

// promtoolCheck runs `promtool check metrics` on body, or skips when
// promtool is not installed.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; scripts/deps installs it): not checking the exposition")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// TestMetricsAfterPlacing scrapes the leader after it placed a deployment
// on fake boards: the state, raft, controller and placer metrics reflect
// what happened, and promtool (when installed) finds the exposition clean.
func TestMetricsAfterPlacing(t *testing.T) {
	f := newFleet(t, 3, 3)
	lead := f.leader()
	testutil.Eventually(t, 15*time.Second, "every board Ready", func() error {
		for _, name := range []string{"a1", "a2", "a3"} {
			if n, err := f.node(lead, name); err != nil || n.Status.Phase != "Ready" {
				return fmt.Errorf("%s not Ready (%v)", name, err)
			}
		}
		return nil
	})
	if _, err := f.client(lead).Apply(context.Background(), []api.Object{webDeployment(2)}, false); err != nil {
		t.Fatal(err)
	}
	f.runningPods(lead, 2, "")
	a := f.agents[lead].a
	url := a.APIAddrs()[0] + httpapi.MetricsPath
	var body string
	testutil.Eventually(t, 10*time.Second, "placements observed", func() error {
		body = scrape(t, url, a.APIToken())
		if n, err := sample(body, "herd_placer_placement_duration_seconds_count"); err != nil || n < 2 {
			return fmt.Errorf("placements %v (%v)", n, err)
		}
		return nil
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   func(float64) bool
	}{
		{"herd_pods", []string{"phase", "Running"}, func(v float64) bool { return v == 2 }},
		{"herd_pods", []string{"phase", "Lost"}, func(v float64) bool { return v == 0 }},
		{"herd_nodes", []string{"phase", "Ready"}, func(v float64) bool { return v == 3 }},
		{"herd_raft_leader", nil, func(v float64) bool { return v == 1 }},
		{"herd_raft_last_contact_seconds", nil, func(v float64) bool { return v == 0 }},
		{"herd_raft_applied_index", nil, func(v float64) bool { return v > 0 }},
		{"herd_gossip_members", []string{"state", "alive"}, func(v float64) bool { return v == 3 }},
		{"herd_raft_apply_duration_seconds_count", []string{"forwarded", "false"}, func(v float64) bool { return v > 0 }},
		{"herd_controller_reconcile_duration_seconds_count", []string{"controller", "deployment"}, func(v float64) bool { return v > 0 }},
		{"herd_controller_queue_depth", nil, func(v float64) bool { return v >= 0 }},
		{"herd_placer_ssh_request_duration_seconds_count", []string{"op", "show_units"}, func(v float64) bool { return v > 0 }},
	} {
		v, err := sample(body, c.name, c.labels...)
		if err != nil || !c.want(v) {
			t.Errorf("%s%q = %v (%v)", c.name, c.labels, v, err)
		}
	}
	if !regexp.MustCompile(`(?m)^herd_placer_ssh_requests_total\{node="a[123]"\} [1-9]`).MatchString(body) {
		t.Errorf("no herd_placer_ssh_requests_total per board in:\n%s", body)
	}
	if !regexp.MustCompile(`(?m)^herd_build_info\{arch="[a-z0-9]+",goversion="go[^"]+",version="dev"\} 1$`).MatchString(body) {
		t.Errorf("no herd_build_info")
	}
	// A follower reports its own copy and is not the leader.
	fol := (lead + 1) % 3
	fb := scrape(t, f.agents[fol].a.APIAddrs()[0]+httpapi.MetricsPath, f.agents[fol].a.APIToken())
	if v, err := sample(fb, "herd_raft_leader"); err != nil || v != 0 {
		t.Errorf("follower herd_raft_leader = %v (%v)", v, err)
	}
	promtoolCheck(t, body)
}

// TestMetricsListenerOnWorker: a gossip-only agent serves /metrics on its
// metrics_listen address to the metrics token only, and nothing else there.
func TestMetricsListenerOnWorker(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	tokFile := filepath.Join(t.TempDir(), "metrics.token")
	const tok = "metrics-token-0123456789abcdef"
	if err := httpapi.WriteTokenFile(tokFile, tok); err != nil {
		t.Fatal(err)
	}
	cfg := workerConfig(t, "worker", f.agents[0].cfg.GossipBind)
	cfg.MetricsListen = testutil.FreeAddr(t)
	cfg.MetricsTokenFile = tokFile
	w := f.start(cfg).a
	base := "http://" + w.MetricsAddr()
	testutil.Eventually(t, 10*time.Second, "worker sees the server", func() error {
		body := scrape(t, base+httpapi.MetricsPath, tok)
		if v, err := sample(body, "herd_gossip_members", "state", "alive"); err != nil || v != 2 {
			return fmt.Errorf("alive members %v (%v)", v, err)
		}
		if strings.Contains(body, "herd_pods") || strings.Contains(body, "herd_raft_leader") {
			return errors.New("a worker reports store or raft metrics")
		}
		return nil
	})
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{httpapi.MetricsPath, "", http.StatusUnauthorized},
		{httpapi.MetricsPath, "wrong-token-0123456789abcdef", http.StatusUnauthorized},
		{"/v1/pods", tok, http.StatusForbidden},
		{"/v1/status", w.APIToken(), http.StatusNotFound},
	} {
		if code, body := get(t, base+c.path, c.token); code != c.want {
			t.Errorf("GET %s (token %q) on the metrics listener: %d %s, want %d", c.path, c.token, code, body, c.want)
		}
	}
	// On the API listener the metrics token reaches /metrics only.
	if code, _ := get(t, w.APIAddrs()[0]+httpapi.MetricsPath, tok); code != http.StatusOK {
		t.Errorf("metrics token on the API's /metrics: %d", code)
	}
	if code, _ := get(t, w.APIAddrs()[0]+"/v1/status", tok); code != http.StatusForbidden {
		t.Errorf("metrics token on /v1/status: %d, want 403", code)
	}
}

func TestMetricsConfig(t *testing.T) {
	base := DefaultConfig()
	base.Name = "pi1"
	for _, c := range []struct {
		listen, tokenFile, want string
	}{
		{"", "", ""},
		{"auto:7949", "/etc/herd/metrics.token", ""},
		{"10.0.0.1:7949", "/etc/herd/metrics.token", ""},
		{"auto:7949", "", "needs metrics_token_file"},
		{"auto:http", "/t", "auto:PORT"},
		{"nonsense", "/t", "metrics_listen"},
	} {
		cfg := base
		cfg.MetricsListen, cfg.MetricsTokenFile = c.listen, c.tokenFile
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("metrics_listen %q, metrics_token_file %q: %v, want %q", c.listen, c.tokenFile, err, c.want)
		}
	}
	if got := metricsAddr("auto:7949", "10.0.0.5:7946"); got != "10.0.0.5:7949" {
		t.Errorf("metricsAddr auto = %q", got)
	}
}
