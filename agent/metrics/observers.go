package metrics

import (
	"sync"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/internal/promtext"
)

// A Registry is the controller Runner's and the placer's Observer.
var (
	_ controller.Observer = (*Registry)(nil)
	_ placer.Observer     = (*Registry)(nil)
)

// QueueStarted implements controller.Observer: the queue's depth is read
// at scrape time until QueueStopped.
func (r *Registry) QueueStarted(depth func() (ready, retrying int)) { r.queue.set(depth) }

// QueueStopped implements controller.Observer: the depth reads 0 again
// (this agent no longer leads).
func (r *Registry) QueueStopped() { r.queue.set(nil) }

// Reconciled implements controller.Observer.
func (r *Registry) Reconciled(ctrl string, took time.Duration, err error, retried bool) {
	r.reconcile.With(ctrl).Observe(took.Seconds())
	if err != nil {
		r.reconcileErrors.With(ctrl).Inc()
	}
	if retried {
		r.reconcileRetries.With(ctrl).Inc()
	}
}

// Placed implements placer.Observer.
func (r *Registry) Placed(_ string, latency time.Duration) {
	r.placement.Observe(latency.Seconds())
}

// BoardCall implements placer.Observer. The node label takes the names of
// the boards this agent's placer works on (Node objects), so its values
// are bounded by the fleet.
func (r *Registry) BoardCall(node, op string, took time.Duration, err error) {
	r.boardCalls.With(node).Inc()
	if err != nil {
		r.boardErrors.With(node).Inc()
	}
	r.boardLatency.With(op).Observe(took.Seconds())
}

// UnitReportResults are the values of herd_unit_reports_total's result
// label.
var UnitReportResults = []string{"kept", "stale", "refused"}

// UnitReport counts one unit report a server received, by result (one of
// UnitReportResults).
func (r *Registry) UnitReport(result string) { r.unitReports.With(result).Inc() }

// initLabels creates every series of a bounded label set at 0, so that
// queries find them before the first event.
func (r *Registry) initLabels() {
	for _, c := range controller.Controllers {
		r.reconcile.With(c)
		r.reconcileErrors.With(c)
		r.reconcileRetries.With(c)
	}
	for _, op := range placer.BoardOps {
		r.boardLatency.With(op)
	}
	for _, res := range UnitReportResults {
		r.unitReports.With(res)
	}
	r.txn.With("false")
	r.txn.With("true")
}

// queueCollector reports the depth of the running Runner's queue, 0 when
// none runs.
type queueCollector struct {
	mu    sync.Mutex
	depth func() (ready, retrying int)
}

var (
	queueDepthDesc    = desc("herd_controller_queue_depth", "Keys ready in the controllers' work queue (leader only; 0 elsewhere).")
	queueRetryingDesc = desc("herd_controller_queue_retrying", "Keys in the controllers' work queue waiting out a retry backoff (leader only; 0 elsewhere).")
)

func (q *queueCollector) set(depth func() (int, int)) {
	q.mu.Lock()
	q.depth = depth
	q.mu.Unlock()
}

func (q *queueCollector) collect(out *promtext.Sink) {
	q.mu.Lock()
	depth := q.depth
	q.mu.Unlock()
	ready, retrying := 0, 0
	if depth != nil {
		ready, retrying = depth()
	}
	out.Add(queueDepthDesc, float64(ready))
	out.Add(queueRetryingDesc, float64(retrying))
}
