package gossip

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Stats counts what this member's gossip saw since it started, for
// metrics. memberlist reports suspicions and failed probes only through
// the process-global go-metrics sink, so these are what herd itself sees:
// the acknowledged direct probes (memberlist's ping delegate) and the
// membership events its event delegate receives.
type Stats struct {
	// ProbeAcks counts direct probes of other members that were
	// acknowledged (indirect and TCP fallback probes are not counted).
	ProbeAcks uint64
	// ProbeRTT is the sum of those probes' round-trip times.
	ProbeRTT time.Duration
	// Joins, Leaves and Failures count the members seen joining (or
	// coming back), leaving gracefully and declared dead.
	Joins, Leaves, Failures uint64
	// HealthScore is memberlist's local health (Lifeguard awareness): 0
	// is healthy; higher means this member has trouble probing others in
	// time (and stretches its timeouts accordingly).
	HealthScore int
}

// counters are the atomics behind Stats.
type counters struct {
	probeAcks, probeRTT     atomic.Uint64
	joins, leaves, failures atomic.Uint64
}

// Stats returns the counters of this member's gossip.
func (g *Gossip) Stats() Stats {
	return Stats{
		ProbeAcks:   g.counts.probeAcks.Load(),
		ProbeRTT:    time.Duration(g.counts.probeRTT.Load()),
		Joins:       g.counts.joins.Load(),
		Leaves:      g.counts.leaves.Load(),
		Failures:    g.counts.failures.Load(),
		HealthScore: g.ml.GetHealthScore(),
	}
}

// count records a membership event in the counters.
func (c *counters) count(typ EventType) {
	switch typ {
	case EventJoin:
		c.joins.Add(1)
	case EventLeave:
		c.leaves.Add(1)
	case EventFail:
		c.failures.Add(1)
	}
}

var _ memberlist.PingDelegate = (*delegate)(nil)

// AckPayload implements memberlist.PingDelegate: herd sends none.
func (d *delegate) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: one acknowledged
// direct probe.
func (d *delegate) NotifyPingComplete(_ *memberlist.Node, rtt time.Duration, _ []byte) {
	d.g.counts.probeAcks.Add(1)
	d.g.counts.probeRTT.Add(uint64(max(0, rtt)))
}
