//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/herd-dev/herd/api"
)

// Events runs `herdctl events -o json` through via and decodes the
// timeline, oldest first.
func (f *Fleet) Events(ctx context.Context, via string, args ...string) ([]api.Event, error) {
	out, err := f.Herdctl(ctx, via, "", append([]string{"--timeout", "10s", "events", "-o", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	var evs []api.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e api.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("e2e: herdctl events -o json: %w", err)
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
}
