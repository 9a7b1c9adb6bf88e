package cli

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// defaultMetricsPort is the port of the boards' metrics listener as
// herdctl bootstrap configures it (metrics_listen = "auto:7949").
const defaultMetricsPort = 7949

func (a *app) metricsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Help Prometheus scrape the fleet",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	var tokenFile, job string
	var port int
	sc := &cobra.Command{
		Use:   "scrape-config --token-file FILE",
		Short: "Print a Prometheus scrape_configs entry for every board",
		Long: `Print a Prometheus scrape_configs entry whose targets are every board's
metrics listener (its address as the cluster records it, port 7949 as
herdctl bootstrap sets metrics_listen), authenticated with the metrics
token: metrics.token in the cluster's state folder
(~/.config/herd/clusters/NAME/metrics.token), which grants GET /metrics
only. Copy that file to the Prometheus server and name its path there.`,
		Example: `  herdctl metrics scrape-config --token-file /etc/prometheus/herd-attic.token >> prometheus.yml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokenFile == "" || !filepath.IsAbs(tokenFile) {
				return usagef("--token-file %q: want the absolute path of the metrics token on the Prometheus server", tokenFile)
			}
			if port < 1 || port > 65535 {
				return usagef("--port %d: want 1 to 65535", port)
			}
			if err := api.ValidateName(job); err != nil {
				return usagef("--job %q: %v", job, err)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			raws, _, err := c.List(ctx, api.KindNode)
			if err != nil {
				return err
			}
			var targets []string
			for _, raw := range raws {
				raw.Kind = api.KindNode
				o, err := api.FromRaw(raw)
				if err != nil {
					return err
				}
				n := o.(*api.Node)
				if ip := net.ParseIP(n.Status.Address); ip != nil && n.Status.Phase != api.NodeLeft {
					targets = append(targets, strconv.Quote(net.JoinHostPort(ip.String(), strconv.Itoa(port))))
				}
			}
			if len(targets) == 0 {
				return fmt.Errorf("no board has a recorded address yet")
			}
			fmt.Fprintf(a.stdout, `scrape_configs:
  - job_name: %s
    authorization:
      credentials_file: %s
    static_configs:
      - targets: [%s]
`, job, strconv.Quote(tokenFile), strings.Join(targets, ", "))
			return nil
		},
	}
	f := sc.Flags()
	f.StringVar(&tokenFile, "token-file", "", "absolute path of the metrics token on the Prometheus server (required)")
	f.IntVar(&port, "port", defaultMetricsPort, "the boards' metrics port")
	f.StringVar(&job, "job", "herd", "the Prometheus job name")
	cmd.AddCommand(sc)
	return cmd
}
