package controller

import (
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// Observer is told how the Runner's work goes, for metrics. The
// reconcilers know nothing of it: the Runner calls it around them. Its
// methods are called from the Runner's goroutines, concurrently; they must
// be cheap and must not block.
type Observer interface {
	// QueueStarted is called when Run starts, with a function that returns
	// the depth of its queue: the keys ready to be handed out and those
	// waiting out a retry delay. The function is safe for concurrent use
	// and valid until QueueStopped, called when Run returns.
	QueueStarted(depth func() (ready, retrying int))
	QueueStopped()
	// Reconciled is called after each key the worker processed:
	// controller is the key's controller (ControllerOf), took is how long
	// reading state, reconciling and writing the actions took, err is why
	// the key failed (nil on success) and retried whether it was queued
	// again with backoff (a Terminal error or a cancelled context is not).
	Reconciled(controller string, took time.Duration, err error, retried bool)
}

// Controllers are the values ControllerOf returns.
var Controllers = []string{"node", "deployment", "daemon", "service", "job", "schedule", "other"}

// ControllerOf names the controller that reconciles key: node,
// deployment, daemon, service, job or schedule ("other" for a key of no known
// controller), a bounded set fit for a metric label.
func ControllerOf(key Key) string {
	if key == KeySchedule {
		return "schedule"
	}
	kind, _, _ := strings.Cut(key, "/")
	switch api.Kind(kind) {
	case api.KindNode:
		return "node"
	case api.KindDeployment:
		return "deployment"
	case api.KindDaemon:
		return "daemon"
	case api.KindService:
		return "service"
	case api.KindJob:
		return "job"
	}
	return "other"
}

// nopObserver is the Observer of a Runner configured without one.
type nopObserver struct{}

func (nopObserver) QueueStarted(func() (int, int))                {}
func (nopObserver) QueueStopped()                                 {}
func (nopObserver) Reconciled(string, time.Duration, error, bool) {}
