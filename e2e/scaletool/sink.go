//go:build e2e

package main

import (
	"sync/atomic"

	metrics "github.com/hashicorp/go-metrics"
)

// byteSink is a go-metrics sink that keeps only memberlist's byte
// counters (memberlist.udp.sent, memberlist.tcp.sent): what this process's
// gossip members sent, every message after encryption, probes, acks,
// gossip and push/pull syncs included.
type byteSink struct {
	metrics.BlackholeSink
	udp, tcp atomic.Uint64
}

// installSink makes a byteSink the process-global go-metrics sink, where
// memberlist reports.
func installSink() *byteSink {
	s := &byteSink{}
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	_, _ = metrics.NewGlobal(cfg, s) // the error is only a sink's own start-up error; this one has none
	return s
}

// IncrCounter implements metrics.MetricSink.
func (s *byteSink) IncrCounter(key []string, val float32) { s.count(key, val) }

// IncrCounterWithLabels implements metrics.MetricSink.
func (s *byteSink) IncrCounterWithLabels(key []string, val float32, _ []metrics.Label) {
	s.count(key, val)
}

func (s *byteSink) count(key []string, val float32) {
	n := len(key)
	if n < 3 || key[n-1] != "sent" || key[n-3] != "memberlist" {
		return
	}
	switch key[n-2] {
	case "udp":
		s.udp.Add(uint64(val))
	case "tcp":
		s.tcp.Add(uint64(val))
	}
}
