package unitwatch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/sshexec"
)

// collectTimeout bounds one local listing.
const collectTimeout = 10 * time.Second

// CollectLocal lists this board's herd units with the leader's own
// listing (sshexec.ListLocal, what the board session answers a list
// with), in this process, so a report says exactly what an SSH listing
// would.
func CollectLocal(ctx context.Context) ([]units.UnitState, error) {
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	out, err := sshexec.ListLocal(ctx)
	if err != nil {
		return nil, err
	}
	us, _, err := sshexec.ParseListing(out)
	return us, err
}

// Available reports whether this machine can watch its units: running as
// root (systemd's private socket and the host key need it) on a machine
// booted with systemd.
func Available() bool {
	if os.Geteuid() != 0 {
		return false
	}
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// LoadHostSigner reads the private half of the board's SSH host key: the
// file named by pubFile without its ".pub".
func LoadHostSigner(pubFile string) (ssh.Signer, error) {
	priv, ok := strings.CutSuffix(pubFile, ".pub")
	if !ok {
		return nil, fmt.Errorf("unitwatch: host key %s does not end in .pub; cannot find its private half", pubFile)
	}
	b, err := os.ReadFile(priv)
	if err != nil {
		return nil, fmt.Errorf("unitwatch: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("unitwatch: host key %s: %w", priv, err)
	}
	return s, nil
}

// DBus is the Source of a systemd board: PropertiesChanged signals of the
// herd units, received on systemd's private socket (no bus daemon
// needed; root only).
type DBus struct {
	// Check is how often Watch checks that the connection is still up
	// (a systemd re-exec drops it).
	Check time.Duration
}

// signalBuffer holds signals between the D-Bus reader and Watch; when it
// is full go-systemd drops the signal, which is harmless here: a full
// buffer already means "changed".
const signalBuffer = 256

// Watch implements Source.
func (d DBus) Watch(ctx context.Context, changed chan<- struct{}) error {
	conn, err := sdbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("unitwatch: connecting to systemd: %w", err)
	}
	defer conn.Close()
	updates := make(chan *sdbus.PropertiesUpdate, signalBuffer)
	errs := make(chan error, 1)
	conn.SetPropertiesSubscriber(updates, errs)
	if err := conn.Subscribe(); err != nil {
		return fmt.Errorf("unitwatch: subscribing to systemd: %w", err)
	}
	check := d.Check
	if check <= 0 {
		check = 5 * time.Second
	}
	tick := time.NewTicker(check)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case u := <-updates:
			if isHerdUnitOrRun(u.UnitName) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		case <-errs:
			// Updates were dropped: some may have been ours.
			select {
			case changed <- struct{}{}:
			default:
			}
		case <-tick.C:
			if !conn.Connected() {
				return fmt.Errorf("unitwatch: connection to systemd lost")
			}
		}
	}
}

// isHerdUnitOrRun reports whether a unit is a pod's (api.PodFromUnitName)
// or a run of an overlapping job's (api.PodFromInstanceName): a change of
// either is reported.
func isHerdUnitOrRun(unit string) bool {
	if _, ok := api.PodFromUnitName(unit); ok {
		return true
	}
	_, _, ok := api.PodFromInstanceName(unit)
	return ok
}
