//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"
)

// PollAttemptTimeout bounds one call of a Poll condition: a command that
// hangs (an SSH session over a link that just went away) costs one attempt,
// not the whole wait.
const PollAttemptTimeout = 20 * time.Second

// Poll calls cond every interval (the first time at once) until it reports
// done or ctx ends; each call gets a context bounded by PollAttemptTimeout.
// cond returns a short status saying what it saw; the last one goes into
// the error when ctx ends first, so a timeout says why.
func Poll(ctx context.Context, interval time.Duration, what string, cond func(context.Context) (bool, string)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	for {
		actx, cancel := context.WithTimeout(ctx, PollAttemptTimeout)
		done, status := cond(actx)
		cancel()
		if done {
			return nil
		}
		// An attempt cut short by the end of the wait says nothing.
		if status != "" && ctx.Err() == nil {
			last = status
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: waiting for %s: %w (last seen: %s)", what, ctx.Err(), orNone(last))
		case <-t.C:
		}
	}
}
