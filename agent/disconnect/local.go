package disconnect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// stopTimeout bounds one `systemctl stop`: units stop within their
// TimeoutStopSec (10 s, package units), then systemd kills them.
const stopTimeout = 30 * time.Second

// ReadUnits reads the herd unit files in dir (sshexec.UnitDir on a board)
// and their on_disconnect policy. A file that does not read as a herd unit,
// or whose stop-after does not parse, counts as "keep".
func ReadUnits(dir string) ([]Unit, error) {
	paths, err := filepath.Glob(filepath.Join(dir, api.UnitPrefix+"*"+api.UnitSuffix))
	if err != nil {
		return nil, err
	}
	var out []Unit
	for _, p := range paths {
		name := filepath.Base(p)
		if !units.IsHerdUnit(name) {
			continue
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		u := Unit{Name: name}
		if m, err := units.ReadMeta(bytes.NewReader(b)); err == nil {
			u.StopAfter, _ = m.OnDisconnect.StopAfterDuration()
		}
		out = append(out, u)
	}
	return out, nil
}

// Marks are the marks in a directory (units.DisconnectDir on a board): one
// empty file per unit, named after it.
type Marks struct {
	// Dir is the directory, created (0755) with the first mark.
	Dir string
}

// List returns the marked unit names, sorted; none when Dir is missing.
func (m Marks) List() ([]string, error) {
	es, err := os.ReadDir(m.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		if units.IsHerdUnit(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Mark marks unit.
func (m Marks) Mark(unit string) error {
	if !units.IsHerdUnit(unit) {
		return fmt.Errorf("disconnect: %q is not a herd unit", unit)
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(m.Dir, unit), nil, 0o644)
}

// Unmark drops unit's mark; a missing mark is not an error.
func (m Marks) Unmark(unit string) error {
	if !units.IsHerdUnit(unit) {
		return fmt.Errorf("disconnect: %q is not a herd unit", unit)
	}
	err := os.Remove(filepath.Join(m.Dir, unit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// stoppable reports whether name is one Stop may stop.
func stoppable(name string) bool {
	if units.IsHerdUnit(name) {
		return true
	}
	if _, ok := api.PodFromTimerName(name); ok {
		return true
	}
	_, _, ok := api.PodFromInstanceName(name)
	return ok
}

// StopArgv is the command that stops names: `systemctl stop -- NAMES...`,
// argv, never a shell string.
func StopArgv(names []string) []string {
	return append([]string{"systemctl", "stop", "--"}, names...)
}

// Stop runs StopArgv on this board. Every name must be a herd unit name,
// a scheduled job pod's timer or a run of one (see StopNames).
func Stop(ctx context.Context, names []string) error {
	for _, n := range names {
		if !stoppable(n) {
			return fmt.Errorf("disconnect: %q is not a herd unit", n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	argv := StopArgv(names)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
