package api

import (
	"fmt"
	"time"
)

// OnDisconnect is what a board does with a pod's unit while the board
// cannot reach the servers (see PodTemplate.OnDisconnect). The zero
// policy, a nil *OnDisconnect, is "keep": the unit runs on, as every unit
// did before this setting existed.
type OnDisconnect struct {
	// StopAfter is how long the board must have been cut off from a
	// majority of the cluster's servers before its own agent stops the
	// unit: a Go duration such as "30s" or "2m", from MinStopAfter to
	// MaxStopAfter (ParseStopAfter). Stored as written.
	StopAfter string `json:"stopAfter" toml:"stop_after"`
}

// The bounds of OnDisconnect.StopAfter.
const (
	// MinStopAfter is above the time gossip takes to call a silent member
	// dead and to take back a false suspicion (about 1.5 s and one probe
	// round with gossip.LANTiming), with room for a loaded board, so a
	// gossip flap or a server restart never stops a pod.
	MinStopAfter = 5 * time.Second
	// MaxStopAfter is a day: a longer wait is "keep" in practice.
	MaxStopAfter = 24 * time.Hour
)

// OnDisconnectKeep is the manifest spelling of the default policy
// (on_disconnect = "keep"), stored as no policy at all.
const OnDisconnectKeep = "keep"

// ParseStopAfter reads OnDisconnect.StopAfter: a Go duration
// (time.ParseDuration: "30s", "2m", "1h30m") from MinStopAfter to
// MaxStopAfter. It is the one reading of the value: admission validates
// with it and a board's agent reads its units' X-Herd-Disconnect-Stop-After
// (written by package units) with it.
func ParseStopAfter(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("required: a duration such as \"30s\" (leave on_disconnect out, or write %q, to keep the unit running)", OnDisconnectKeep)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write a number with a unit, such as \"30s\", \"2m\" or \"1h\"", s)
	}
	if d < MinStopAfter || d > MaxStopAfter {
		return 0, fmt.Errorf("%q: must be from 5s (so that a gossip flap never stops a pod) to 24h", s)
	}
	return d, nil
}

// StopAfterDuration returns the policy's wait and true, or false for
// "keep" (a nil policy) and for a StopAfter that does not parse (which
// admission refuses).
func (o *OnDisconnect) StopAfterDuration() (time.Duration, bool) {
	if o == nil {
		return 0, false
	}
	d, err := ParseStopAfter(o.StopAfter)
	return d, err == nil
}

// onDisconnect checks a template's OnDisconnect.
func (v *validator) onDisconnect(p fieldPath, o *OnDisconnect) {
	if o == nil {
		return
	}
	if _, err := ParseStopAfter(o.StopAfter); err != nil {
		v.addf(p.field("stopAfter", "stop_after"), "%s", err.Error())
	}
}
