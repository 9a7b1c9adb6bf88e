package metrics

import (
	"github.com/herd-dev/herd/agent/svcproxy"
	"github.com/herd-dev/herd/internal/promtext"
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
func (r *Registry) AddProxy(src ProxySource) {
	c := &proxyCollector{src: src}
	r.reg.Collect(c.collect, proxyConnsDesc, proxyActiveDesc, proxyBytesDesc, proxyFailureDesc)
}

var (
	proxyLabels      = []string{"service", "port", "protocol", "endpoint"}
	proxyConnsDesc   = counterDesc("herd_service_proxy_connections_total", "Connections (TCP) or sessions (UDP) this board's service proxy forwarded to the endpoint.", proxyLabels...)
	proxyActiveDesc  = desc("herd_service_proxy_active_connections", "Connections or sessions open now through this board's service proxy to the endpoint.", proxyLabels...)
	proxyBytesDesc   = counterDesc("herd_service_proxy_bytes_total", "Bytes forwarded, direction in (client to endpoint) or out.", append(proxyLabels, "direction")...)
	proxyFailureDesc = counterDesc("herd_service_proxy_failures_total", "Connections the proxy could not forward: dials to the endpoint that failed, or (endpoint \"\") refused for no ready endpoint or the limit.", proxyLabels...)
)

type proxyCollector struct{ src ProxySource }

func (c *proxyCollector) collect(out *promtext.Sink) {
	for _, s := range c.src.Stats() {
		l := []string{s.Service, s.Port, s.Protocol, s.Target}
		out.Add(proxyConnsDesc, float64(s.Conns), l...)
		out.Add(proxyActiveDesc, float64(s.Active), l...)
		out.Add(proxyBytesDesc, float64(s.BytesIn), append(l, "in")...)
		out.Add(proxyBytesDesc, float64(s.BytesOut), append(l, "out")...)
		out.Add(proxyFailureDesc, float64(s.Failures), l...)
	}
}
