package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herd-dev/herd/agent/svcproxy"
)

// ProxySource is what the service proxy collector reads at scrape time;
// *svcproxy.Proxy is one.
type ProxySource interface {
	Stats() []svcproxy.Stat
}

// AddProxy adds the herd_service_proxy_* metrics, read from src at scrape
// time: one series per service port and endpoint (endpoint "" counts the
// connections refused before one was chosen: no ready endpoint, or the
// connection limit).
func (r *Registry) AddProxy(src ProxySource) { r.reg.MustRegister(&proxyCollector{src: src}) }

var (
	proxyLabels      = []string{"service", "port", "protocol", "endpoint"}
	proxyConnsDesc   = desc("herd_service_proxy_connections_total", "Connections (TCP) or sessions (UDP) this board's service proxy forwarded to the endpoint.", proxyLabels...)
	proxyActiveDesc  = desc("herd_service_proxy_active_connections", "Connections or sessions open now through this board's service proxy to the endpoint.", proxyLabels...)
	proxyBytesDesc   = desc("herd_service_proxy_bytes_total", "Bytes forwarded, direction in (client to endpoint) or out.", append(proxyLabels, "direction")...)
	proxyFailureDesc = desc("herd_service_proxy_failures_total", "Connections the proxy could not forward: dials to the endpoint that failed, or (endpoint \"\") refused for no ready endpoint or the limit.", proxyLabels...)
)

type proxyCollector struct{ src ProxySource }

// Describe implements prometheus.Collector.
func (c *proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{proxyConnsDesc, proxyActiveDesc, proxyBytesDesc, proxyFailureDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *proxyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.Stats() {
		l := []string{s.Service, s.Port, s.Protocol, s.Target}
		ch <- prometheus.MustNewConstMetric(proxyConnsDesc, prometheus.CounterValue, float64(s.Conns), l...)
		ch <- prometheus.MustNewConstMetric(proxyActiveDesc, prometheus.GaugeValue, float64(s.Active), l...)
		ch <- prometheus.MustNewConstMetric(proxyBytesDesc, prometheus.CounterValue, float64(s.BytesIn), append(l, "in")...)
		ch <- prometheus.MustNewConstMetric(proxyBytesDesc, prometheus.CounterValue, float64(s.BytesOut), append(l, "out")...)
		ch <- prometheus.MustNewConstMetric(proxyFailureDesc, prometheus.CounterValue, float64(s.Failures), l...)
	}
}
