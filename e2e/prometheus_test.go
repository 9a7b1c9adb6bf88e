//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/internal/testutil"
)

// testPrometheus: Debian's prometheus server scrapes every lab board's
// metrics listener (auto:7949) with the metrics token from the state
// folder, and a query through its HTTP API returns the declared replicas
// Running, as the leader counts them.
func testPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (scripts/deps installs Debian's prometheus)")
	}
	converge(t)
	dir := t.TempDir()
	var targets []string
	for _, b := range fleet.Boards {
		targets = append(targets, strconv.Quote(BoardIP(b)+":7949"))
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: herd
    authorization:
      credentials_file: %s
    static_configs:
      - targets: [%s]
`, filepath.Join(fleet.Dir, "state", "metrics.token"), strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	defer cancel()

	query := func(ctx context.Context, q string) ([]float64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(q), nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var body struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return nil, err
		}
		if body.Status != "success" {
			return nil, fmt.Errorf("query %s: status %q", q, body.Status)
		}
		var out []float64
		for _, r := range body.Data.Result {
			s, _ := r.Value[1].(string)
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	pctx := testCtx(t, time.Minute)
	want := float64(Web.Replicas)
	checks := []struct{ what, q string }{
		{fmt.Sprintf("every one of the %d boards scraped (up)", len(fleet.Boards)), `count(up{job="herd"} == 1)`},
		{fmt.Sprintf("%v pods Running as the leader counts them", want), `herd_pods{phase="Running"} and on(instance) herd_raft_leader == 1`},
	}
	wants := []float64{float64(len(fleet.Boards)), want}
	for i, c := range checks {
		err := Poll(pctx, 500*time.Millisecond, c.what, func(ctx context.Context) (bool, string) {
			got, err := query(ctx, c.q)
			if err != nil {
				return false, err.Error()
			}
			return len(got) == 1 && got[0] == wants[i], fmt.Sprintf("%s = %v", c.q, got)
		})
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("%v\nprometheus log:\n%s", err, b)
		}
		t.Logf("prometheus: %s = %v", c.q, wants[i])
	}
}
