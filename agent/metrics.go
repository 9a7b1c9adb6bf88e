package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/agent/metrics"
)

// DefaultMetricsPort is the port of the metrics listener herdctl bootstrap
// configures (metrics_listen = "auto:7949").
const DefaultMetricsPort = 7949

// checkMetricsListen validates metrics_listen: empty, auto:PORT or
// host:port, and then a metrics_token_file.
func checkMetricsListen(l, tokenFile string) error {
	if l == "" {
		return nil
	}
	if err := checkListenAddr(l); err != nil {
		return err
	}
	if tokenFile == "" {
		return errors.New("a metrics listener needs metrics_token_file")
	}
	return nil
}

// checkListenAddr validates an extra listener's address (metrics_listen,
// dns_listen): auto:PORT or host:port.
func checkListenAddr(l string) error {
	if port, auto := autoPort(l); auto {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("want host:port or auto:PORT (a port from 1 to 65535)")
		}
		return nil
	}
	return checkHostPort(l, false)
}

// metricsAddr is the address metrics_listen names: auto:PORT is the
// gossip advertise IP and PORT.
func metricsAddr(listen, gossipAdv string) string {
	port, auto := autoPort(listen)
	if !auto {
		return listen
	}
	host, _, _ := net.SplitHostPort(gossipAdv)
	return net.JoinHostPort(host, port)
}

// openMetricsTokens opens metrics_token_file (nil when unset), re-read as
// it changes like the API token file.
func openMetricsTokens(cfg Config, log *slog.Logger) (*httpapi.TokenFile, error) {
	if cfg.MetricsTokenFile == "" {
		return nil, nil
	}
	tf, err := httpapi.OpenTokenFile(cfg.MetricsTokenFile)
	if err != nil {
		return nil, fmt.Errorf("agent: metrics_token_file: %w", err)
	}
	tf.OnError = func(err error) { log.Warn("metrics token file not reloaded", "err", err) }
	return tf, nil
}

// startMetrics makes the agent's metrics registry (before the store, whose
// writes it times) and opens the metrics token file.
func (a *Agent) startMetrics() error {
	a.metrics = metrics.New(Version)
	tf, err := openMetricsTokens(a.cfg, a.log)
	if err != nil {
		return err
	}
	a.metricsTokens = tf
	return nil
}

// listenMetrics adds the collectors read at scrape time and opens the
// metrics listener (metrics_listen), served by Run.
func (a *Agent) listenMetrics() error {
	a.metrics.AddGossip(a.gossip)
	if a.store != nil {
		a.metrics.AddRaft(a.store)
		a.metrics.AddState(a.store)
	}
	if a.cfg.MetricsListen == "" {
		return nil
	}
	addr := metricsAddr(a.cfg.MetricsListen, a.adv.Gossip)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent: metrics listen: %w", err)
	}
	a.metricsListener = ln
	return nil
}

// MetricsAddr returns the address of the metrics listener, "" without one.
func (a *Agent) MetricsAddr() string {
	if a.metricsListener == nil {
		return ""
	}
	return a.metricsListener.Addr().String()
}

// Metrics returns the agent's metrics registry.
func (a *Agent) Metrics() *metrics.Registry { return a.metrics }
