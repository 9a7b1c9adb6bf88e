package metrics

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one agent's metrics: the Prometheus registry and the
// metrics observed as things happen. Its methods are safe for concurrent
// use.
type Registry struct {
	reg *prometheus.Registry

	queue            *queueCollector
	reconcile        *prometheus.HistogramVec
	reconcileErrors  *prometheus.CounterVec
	reconcileRetries *prometheus.CounterVec

	placement    prometheus.Histogram
	boardCalls   *prometheus.CounterVec
	boardErrors  *prometheus.CounterVec
	boardLatency *prometheus.HistogramVec

	txn *prometheus.HistogramVec

	unitReports *prometheus.CounterVec
}

// Latency buckets: from a millisecond (a Raft commit on a LAN, an SSH
// round trip) to half a minute (a pod that takes long to come up).
var (
	fastBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	slowBuckets = []float64{.1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120}
)

// New returns a Registry with herd_build_info (version, Go version and
// architecture), the Go runtime and process collectors and the metrics
// herd observes itself. AddRaft, AddGossip and AddState add the
// collectors read at scrape time.
func New(version string) *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "herd_build_info",
		Help:        "Always 1: the herd agent's version, Go version and architecture as labels.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "arch": runtime.GOARCH},
	})
	build.Set(1)
	r.queue = &queueCollector{}
	r.reconcile = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herd_controller_reconcile_duration_seconds",
		Help:    "Time to read state, reconcile one key and write its actions, by controller (leader only).",
		Buckets: fastBuckets,
	}, []string{"controller"})
	r.reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herd_controller_reconcile_errors_total",
		Help: "Keys whose reconcile failed (state unreadable or a write refused), by controller.",
	}, []string{"controller"})
	r.reconcileRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herd_controller_reconcile_retries_total",
		Help: "Failed keys queued again with backoff, by controller (terminal failures are not retried).",
	}, []string{"controller"})
	r.placement = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "herd_placer_placement_duration_seconds",
		Help:    "Time from a pod's binding to a board to the leader recording its unit active there.",
		Buckets: slowBuckets,
	})
	r.boardCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herd_placer_ssh_requests_total",
		Help: "Requests the leader's placer made to a board over its SSH connection (one command session or file transfer each), by board.",
	}, []string{"node"})
	r.boardErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herd_placer_ssh_errors_total",
		Help: "Placer requests to a board that failed (unreachable, command failed, file refused), by board.",
	}, []string{"node"})
	r.boardLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herd_placer_ssh_request_duration_seconds",
		Help:    "Duration of the placer's requests to boards, by operation.",
		Buckets: fastBuckets,
	}, []string{"op"})
	r.txn = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herd_raft_apply_duration_seconds",
		Help:    "Time from a write's start on this server to its transaction committed and applied here; forwarded is true when a follower sent it to the leader.",
		Buckets: fastBuckets,
	}, []string{"forwarded"})
	r.unitReports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herd_unit_reports_total",
		Help: "Unit reports boards sent this server, by result: kept (newest of its board), stale (a newer one was kept or listed) or refused (malformed or not signed by the board's host key).",
	}, []string{"result"})
	r.initLabels()
	r.reg.MustRegister(
		build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.queue, r.reconcile, r.reconcileErrors, r.reconcileRetries,
		r.placement, r.boardCalls, r.boardErrors, r.boardLatency, r.txn,
		r.unitReports,
	)
	return r
}

// Handler serves the registry in the Prometheus text (or negotiated)
// exposition format. It does no authentication: agent/httpapi guards it.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer returns the underlying registry, for tests.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// ObserveTxn records one successful store write; it is
// raftstore.Config.ObserveTxn.
func (r *Registry) ObserveTxn(forwarded bool, took time.Duration) {
	l := "false"
	if forwarded {
		l = "true"
	}
	r.txn.WithLabelValues(l).Observe(took.Seconds())
}
