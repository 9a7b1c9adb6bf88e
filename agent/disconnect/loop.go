package disconnect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units"
)

// Config is what a Loop needs: the board's I/O as functions, so tests
// hand in fakes. Loop calls them from one goroutine, never concurrently.
type Config struct {
	// Clock tells the time and paces the steps.
	Clock clock.Clock
	// Interval is the time between steps; it adds at most that much to
	// every stop_after.
	Interval time.Duration
	// Connected reports whether the board sees a quorum of the servers
	// now (Quorum, and on a server its Raft leader).
	Connected func() bool
	// Units reads the board's herd unit files and their policies (Marked
	// is filled in by the Loop from Marks).
	Units func() ([]Unit, error)
	// Marks lists the units marked in units.DisconnectDir.
	Marks func() ([]string, error)
	// Mark marks a unit before it is stopped; Unmark drops its mark.
	Mark, Unmark func(unit string) error
	// List lists the board's herd units as the leader would
	// (unitwatch.CollectLocal), for their ActiveState and file.
	List func(ctx context.Context) ([]units.UnitState, error)
	// Stop stops the units (`systemctl stop -- UNITS...`).
	Stop func(ctx context.Context, units []string) error
	// Logger receives what the loop does.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with Interval 500 ms and the real clock;
// the functions are the caller's to set.
func DefaultConfig() Config {
	return Config{Clock: clock.RealClock(), Interval: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
}

// Validate reports a Config a Loop cannot run with.
func (c Config) Validate() error {
	switch {
	case c.Clock == nil:
		return errors.New("disconnect: no Clock")
	case c.Interval <= 0:
		return errors.New("disconnect: Interval must be positive")
	case c.Connected == nil || c.Units == nil || c.Marks == nil || c.Mark == nil || c.Unmark == nil || c.List == nil || c.Stop == nil:
		return errors.New("disconnect: Connected, Units, Marks, Mark, Unmark, List and Stop are required")
	case c.Logger == nil:
		return errors.New("disconnect: no Logger")
	}
	return nil
}

// Loop stops a cut-off board's on_disconnect units (see the package
// documentation). Run it in one goroutine.
type Loop struct {
	cfg     Config
	tracker Tracker
	// down are the due units a listing found not running during this
	// cut (crashed, failed, stopped by hand): left alone, and not listed
	// for again, until the cut ends.
	down map[string]bool
	// unmarked: the last read of the marks found none, and the loop has
	// marked nothing since. Only this loop marks (the marks live under
	// /run, gone with a reboot), so a connected board need not read them
	// again: one directory read at start instead of two a second.
	unmarked bool
}

// New returns a Loop, or Config.Validate's error.
func New(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Loop{cfg: cfg}, nil
}

// Run steps every Config.Interval until ctx ends, and returns its error.
// The cut-off clock starts with Run: an agent that starts cut off (a board
// rebooted during a partition) waits stop_after from its start.
func (l *Loop) Run(ctx context.Context) error {
	for {
		if err := l.Step(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("on_disconnect step failed", "err", err)
		}
		t := l.cfg.Clock.NewTimer(l.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Step observes the board once and acts: while cut off, marks and stops
// the units that are due; while connected, drops the marks no longer
// needed. It reads unit files and lists units only when that can lead to
// an action.
func (l *Loop) Step(ctx context.Context) error {
	c := l.cfg
	now := c.Clock.Now()
	connected := c.Connected()
	wasCut, _ := l.tracker.Cut()
	l.tracker.Observe(now, connected)
	cut, since := l.tracker.Cut()
	switch {
	case cut && !wasCut:
		c.Logger.Warn("cut off from the servers: no quorum of them in sight; units with on_disconnect stop_after will stop")
	case !cut && wasCut:
		c.Logger.Info("servers in sight again; the leader restarts or removes the units stopped meanwhile")
	}
	if !cut && l.unmarked {
		l.down = nil
		return nil
	}
	marks, err := c.Marks()
	if err != nil {
		return fmt.Errorf("reading marks: %w", err)
	}
	l.unmarked = len(marks) == 0
	if !cut {
		l.down = nil
		return l.clear(ctx, marks)
	}
	us, err := c.Units()
	if err != nil {
		return fmt.Errorf("reading unit files: %w", err)
	}
	for i := range us {
		us[i].Marked = slices.Contains(marks, us[i].Name) || l.down[us[i].Name]
	}
	due, _ := Due(now, cut, since, us)
	if len(due) == 0 {
		return nil
	}
	listing, err := c.List(ctx)
	if err != nil {
		return fmt.Errorf("listing units: %w", err)
	}
	stop := ToStop(due, listing)
	for _, u := range due {
		if !slices.Contains(stop, u) {
			if l.down == nil {
				l.down = make(map[string]bool)
			}
			l.down[u] = true
		}
	}
	if len(stop) == 0 {
		return nil
	}
	for _, u := range stop {
		l.unmarked = false
		if err := c.Mark(u); err != nil {
			return fmt.Errorf("marking %s: %w", u, err)
		}
	}
	c.Logger.Warn("stopping units: cut off from the servers for their on_disconnect stop_after", "units", stop, "cutOffFor", now.Sub(since).Round(time.Millisecond))
	if err := c.Stop(ctx, StopNames(stop, listing)); err != nil {
		return fmt.Errorf("stopping %v: %w", stop, err)
	}
	return nil
}

// clear drops the marks a connected board no longer needs.
func (l *Loop) clear(ctx context.Context, marks []string) error {
	if len(marks) == 0 {
		return nil
	}
	listing, err := l.cfg.List(ctx)
	if err != nil {
		return fmt.Errorf("listing units: %w", err)
	}
	var errs []error
	for _, u := range ClearMarks(marks, listing) {
		if err := l.cfg.Unmark(u); err != nil {
			errs = append(errs, fmt.Errorf("unmarking %s: %w", u, err))
		}
	}
	return errors.Join(errs...)
}
