package placer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"time"

	"github.com/herd-dev/herd/agent/controller"
	"github.com/herd-dev/herd/units"
)

// ErrInvalidConfig: a Config failed Validate, or New was given a nil
// dependency.
var ErrInvalidConfig = errors.New("placer: invalid config")

// DefaultUnitDir is where unit files live on a board.
const DefaultUnitDir = "/etc/systemd/system"

// Config tunes a Placer.
type Config struct {
	// ObserveInterval is the steady pause between two passes over a board
	// that has nothing in flight. systemd on a board has no watch the
	// leader could subscribe to, so this is the one deliberate poll: it
	// bounds how late a crash, a failed unit or a readiness change is
	// noticed. Each pause is stretched by a random fraction up to
	// ObserveJitter (0.2 means 1.0–1.2×) so boards are not polled in step.
	ObserveInterval time.Duration
	ObserveJitter   float64
	// QuickObserve are the pauses before the passes that follow a pass
	// that changed something on the board (or saw pods not yet running
	// and ready), one after the other; then ObserveInterval takes over.
	// Only a pass that acts on the board, or one whose readiness check of
	// a ready pod failed short of its threshold, starts the sequence
	// again, so a pod that never becomes ready costs len(QuickObserve)
	// quick passes.
	// The default looks every 100 ms for the first 300 ms and at most
	// 250 ms apart for the first second, when a new pod's readiness check
	// is most likely to turn (a failover's endpoint waits for it: the
	// first check, right after the start, mostly finds the pod's server
	// not listening yet), then backs off.
	QuickObserve []time.Duration
	// RetryBase is the pause after a failed pass (board unreachable, a
	// command failed, a write conflicted); it doubles with every further
	// failure up to RetryMax. A state change does not cut a retry pause
	// short: an unreachable board is never hammered.
	RetryBase time.Duration
	RetryMax  time.Duration
	// ResyncInterval is how often the set of boards (one worker each) and
	// their wake-ups are recomputed from a fresh snapshot even without a
	// watch event, in case one was missed.
	ResyncInterval time.Duration
	// RewatchDelay is the pause before watching again after the state
	// watch broke or failed to start.
	RewatchDelay time.Duration
	// PassTimeout bounds one pass over one board, executor calls and
	// probes included (real time).
	PassTimeout time.Duration
	// ProbeTimeout is the readiness check timeout used when a probe has no
	// TimeoutSeconds (admission normally sets it).
	ProbeTimeout time.Duration
	// MaxParallelProbes bounds the tcp and http readiness checks one pass
	// runs at once. Exec checks go through the Executor, one at a time.
	MaxParallelProbes int
	// UnitDir is the directory of unit files on the boards.
	UnitDir string
	// Dial opens the connections of tcp and http readiness checks, from
	// the leader to the board's address; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// WitnessTimeout bounds the second witness: the listing of units the
	// placer makes of a Ready board that gossip declared dead (real time).
	// A board that answers within it is only "agent down" (see
	// controller.ReconcileNode); one that does not is dead. A board that
	// is really gone fails the witness sooner, through WitnessSilence, so
	// this only limits how slow a live board may be: 1.5 s lets a slow
	// board (an emulated arm64 VM on the lab, a Pi Zero) keep its pods
	// while its agent restarts, and with WitnessInterval stays inside
	// controller.WitnessGrace.
	WitnessTimeout time.Duration
	// WitnessInterval is the pause between two passes over such a board
	// (each one a witness), whether the last one answered or not.
	WitnessInterval time.Duration
	// WitnessSilence: a witness fails at once, without waiting for
	// WitnessTimeout, when the executor's connection to the board has had
	// a keepalive unanswered for longer than this (Executors implementing
	// Silencer only). 0 turns this off.
	WitnessSilence time.Duration
	// RecordWitness, when set, receives the outcome of every witness
	// (the node controller reads it as controller.MemberInfo.Witness).
	// It is called from the workers, concurrently, and must not block.
	RecordWitness func(node string, w controller.Witness)
	// ReportedListInterval is how often a board whose agent reports its
	// units (Placer.Report) is still listed over SSH: the safety net for a
	// lost report. Jittered by ObserveJitter. Passes in between come from
	// reports and, while a bound pod has a readiness check or is coming up,
	// every ObserveInterval without listing the board.
	ReportedListInterval time.Duration
	// ReportTTL: a board counts as reporting while its last report is at
	// most this old (boards re-send every minute); after that it is
	// listed every ObserveInterval again.
	ReportTTL time.Duration
	// Reports, when set, is where the boards' unit reports are kept
	// across placers (a server's whole life, not one leadership term);
	// nil gives the placer its own.
	Reports *Reports
	// Credentials, when set, returns the values of a pod's credentials
	// (the keys of the secrets it loads, units.Credentials), by
	// units.Credential.ID: on a server, the stored secrets opened with
	// the server key ring. The placer writes them to the board right
	// before the unit's files and never logs them. Nil: a pod that loads
	// credentials cannot be written (its pass fails and is retried).
	// Called from the workers, concurrently.
	Credentials func(ctx context.Context, creds []units.Credential) (map[string][]byte, error)
	// Observer, when set, is told of every Executor call and of each pod's
	// first running unit (metrics). Nil observes nothing.
	Observer Observer
	// Jitter returns a number in [0, 1) for the ObserveJitter stretch; it
	// is called from several workers at once. Nil means math/rand/v2.
	// Tests inject a seeded source.
	Jitter func() float64
}

// DefaultConfig returns a 5 s observation interval with 20 % jitter, quick
// re-observations from 100 ms apart backing off to 2 s, retries from 200 ms
// doubling up to 5 s, a 30 s resync, a 1 s rewatch delay, a 2-minute pass
// timeout, a 2 s default probe timeout, 8 parallel probes,
// /etc/systemd/system, and witnesses of 750 ms every second, failing at
// once after 300 ms of keepalive silence; a board that reported within 3
// minutes is listed over SSH every 2 minutes.
func DefaultConfig() Config {
	return Config{
		ObserveInterval: 5 * time.Second,
		ObserveJitter:   0.2,
		QuickObserve: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond,
			150 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second},
		RetryBase:         200 * time.Millisecond,
		RetryMax:          5 * time.Second,
		ResyncInterval:    30 * time.Second,
		RewatchDelay:      time.Second,
		PassTimeout:       2 * time.Minute,
		ProbeTimeout:      2 * time.Second,
		MaxParallelProbes: 8,
		UnitDir:           DefaultUnitDir,
		WitnessTimeout:    1500 * time.Millisecond,
		WitnessInterval:   time.Second,
		WitnessSilence:    300 * time.Millisecond,

		ReportedListInterval: 2 * time.Minute,
		ReportTTL:            3 * time.Minute,
	}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.ObserveInterval <= 0:
		return fmt.Errorf("%w: ObserveInterval %v must be positive", ErrInvalidConfig, c.ObserveInterval)
	case c.ObserveJitter < 0 || c.ObserveJitter > 1:
		return fmt.Errorf("%w: ObserveJitter %v must be between 0 and 1", ErrInvalidConfig, c.ObserveJitter)
	case c.RetryBase <= 0:
		return fmt.Errorf("%w: RetryBase %v must be positive", ErrInvalidConfig, c.RetryBase)
	case c.RetryMax < c.RetryBase:
		return fmt.Errorf("%w: RetryMax %v is below RetryBase %v", ErrInvalidConfig, c.RetryMax, c.RetryBase)
	case c.ResyncInterval <= 0:
		return fmt.Errorf("%w: ResyncInterval %v must be positive", ErrInvalidConfig, c.ResyncInterval)
	case c.RewatchDelay <= 0:
		return fmt.Errorf("%w: RewatchDelay %v must be positive", ErrInvalidConfig, c.RewatchDelay)
	case c.PassTimeout <= 0:
		return fmt.Errorf("%w: PassTimeout %v must be positive", ErrInvalidConfig, c.PassTimeout)
	case c.ProbeTimeout <= 0:
		return fmt.Errorf("%w: ProbeTimeout %v must be positive", ErrInvalidConfig, c.ProbeTimeout)
	case c.MaxParallelProbes < 1:
		return fmt.Errorf("%w: MaxParallelProbes %d must be at least 1", ErrInvalidConfig, c.MaxParallelProbes)
	case c.WitnessTimeout <= 0:
		return fmt.Errorf("%w: WitnessTimeout %v must be positive", ErrInvalidConfig, c.WitnessTimeout)
	case c.WitnessInterval <= 0:
		return fmt.Errorf("%w: WitnessInterval %v must be positive", ErrInvalidConfig, c.WitnessInterval)
	case c.ReportedListInterval <= 0:
		return fmt.Errorf("%w: ReportedListInterval %v must be positive", ErrInvalidConfig, c.ReportedListInterval)
	case c.ReportTTL <= 0:
		return fmt.Errorf("%w: ReportTTL %v must be positive", ErrInvalidConfig, c.ReportTTL)
	case c.WitnessSilence < 0:
		return fmt.Errorf("%w: WitnessSilence %v must not be negative", ErrInvalidConfig, c.WitnessSilence)
	case c.UnitDir == "" || !path.IsAbs(c.UnitDir) || path.Clean(c.UnitDir) != c.UnitDir:
		return fmt.Errorf("%w: UnitDir %q must be an absolute, clean path", ErrInvalidConfig, c.UnitDir)
	}
	for i, d := range c.QuickObserve {
		if d <= 0 {
			return fmt.Errorf("%w: QuickObserve[%d] %v must be positive", ErrInvalidConfig, i, d)
		}
	}
	return nil
}
