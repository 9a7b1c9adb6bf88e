package metrics

import (
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/herd-dev/herd/internal/promtext"
)

// Registry is one agent's metrics: the families it writes and the
// metrics observed as things happen. Its methods are safe for concurrent
// use.
type Registry struct {
	reg *promtext.Registry

	queue            *queueCollector
	reconcile        *promtext.HistogramVec
	reconcileErrors  *promtext.CounterVec
	reconcileRetries *promtext.CounterVec

	placement    *promtext.HistogramValue
	boardCalls   *promtext.CounterVec
	boardErrors  *promtext.CounterVec
	boardLatency *promtext.HistogramVec

	txn *promtext.HistogramVec

	unitReports *promtext.CounterVec
}

// Latency buckets: from a millisecond (a Raft commit on a LAN, an SSH
// round trip) to half a minute (a pod that takes long to come up).
var (
	fastBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	slowBuckets = []float64{.1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120}
)

func desc(name, help string, labels ...string) *promtext.Desc {
	return promtext.NewDesc(name, help, promtext.Gauge, labels...)
}

func counterDesc(name, help string, labels ...string) *promtext.Desc {
	return promtext.NewDesc(name, help, promtext.Counter, labels...)
}

func histogramDesc(name, help string, labels ...string) *promtext.Desc {
	return promtext.NewDesc(name, help, promtext.Histogram, labels...)
}

var (
	buildInfoDesc = desc("herd_build_info", "Always 1: the herd agent's version, Go version and architecture as labels.", "version", "goversion", "arch")
	reconcileDesc = histogramDesc("herd_controller_reconcile_duration_seconds",
		"Time to read state, reconcile one key and write its actions, by controller (leader only).", "controller")
	reconcileErrorsDesc = counterDesc("herd_controller_reconcile_errors_total",
		"Keys whose reconcile failed (state unreadable or a write refused), by controller.", "controller")
	reconcileRetriesDesc = counterDesc("herd_controller_reconcile_retries_total",
		"Failed keys queued again with backoff, by controller (terminal failures are not retried).", "controller")
	placementDesc = histogramDesc("herd_placer_placement_duration_seconds",
		"Time from a pod's binding to a board to the leader recording its unit active there.")
	boardCallsDesc = counterDesc("herd_placer_ssh_requests_total",
		"Requests the leader's placer made to a board over its SSH connection (one command session or file transfer each), by board.", "node")
	boardErrorsDesc = counterDesc("herd_placer_ssh_errors_total",
		"Placer requests to a board that failed (unreachable, command failed, file refused), by board.", "node")
	boardLatencyDesc = histogramDesc("herd_placer_ssh_request_duration_seconds",
		"Duration of the placer's requests to boards, by operation.", "op")
	txnDesc = histogramDesc("herd_raft_apply_duration_seconds",
		"Time from a write's start on this server to its transaction committed and applied here; forwarded is true when a follower sent it to the leader.", "forwarded")
	unitReportsDesc = counterDesc("herd_unit_reports_total",
		"Unit reports boards sent this server, by result: kept (newest of its board), stale (a newer one was kept or listed) or refused (malformed or not signed by the board's host key).", "result")
)

// New returns a Registry with herd_build_info (version, Go version and
// architecture), the Go runtime and process families and the metrics
// herd observes itself. AddRaft, AddGossip, AddState and AddProxy add
// the families read at scrape time.
func New(version string) *Registry {
	r := &Registry{reg: promtext.NewRegistry()}
	r.reg.ConstGauge(buildInfoDesc, 1, version, runtime.Version(), runtime.GOARCH)
	r.reg.AddGo()
	r.reg.AddProcess()
	r.queue = &queueCollector{}
	r.reg.Collect(r.queue.collect, queueDepthDesc, queueRetryingDesc)
	r.reconcile = r.reg.HistogramVec(reconcileDesc, fastBuckets)
	r.reconcileErrors = r.reg.CounterVec(reconcileErrorsDesc)
	r.reconcileRetries = r.reg.CounterVec(reconcileRetriesDesc)
	r.placement = r.reg.HistogramVec(placementDesc, slowBuckets).With()
	r.boardCalls = r.reg.CounterVec(boardCallsDesc)
	r.boardErrors = r.reg.CounterVec(boardErrorsDesc)
	r.boardLatency = r.reg.HistogramVec(boardLatencyDesc, fastBuckets)
	r.txn = r.reg.HistogramVec(txnDesc, fastBuckets)
	r.unitReports = r.reg.CounterVec(unitReportsDesc)
	r.initLabels()
	return r
}

// Handler serves the registry in the Prometheus text exposition format
// (0.0.4) to GET and HEAD. It does no authentication: agent/httpapi
// guards it.
func (r *Registry) Handler() http.Handler { return r.reg.Handler() }

// Write writes the registry in the text exposition format, as the
// Handler serves it; its error names samples a collector got wrong (left
// out). Tests read values from it.
func (r *Registry) Write(w io.Writer) error { return r.reg.Write(w) }

// ObserveTxn records one successful store write; it is
// raftstore.Config.ObserveTxn.
func (r *Registry) ObserveTxn(forwarded bool, took time.Duration) {
	l := "false"
	if forwarded {
		l = "true"
	}
	r.txn.With(l).Observe(took.Seconds())
}
