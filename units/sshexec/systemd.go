package sshexec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// UnitState is what `systemctl show` says about one unit.
type UnitState struct {
	Unit                   string // Id, e.g. "herd-web-1.service"
	LoadState              string // loaded, not-found, masked, ...
	ActiveState            string // active, inactive, failed, activating, ...
	SubState               string // running, dead, failed, auto-restart, ...
	UnitFileState          string // enabled, disabled, ... ("" if unknown)
	FragmentPath           string // the unit file, "" if none
	MainPID                int
	NRestarts              int
	ExecMainStatus         int
	ExecMainStartTimestamp string // as systemd prints it; "" if never started
}

// showProperties are the properties ShowUnits asks for.
const showProperties = "Id,LoadState,ActiveState,SubState,UnitFileState,FragmentPath,MainPID,NRestarts,ExecMainStatus,ExecMainStartTimestamp"

// showUnitsScript is the fixed script ShowUnits runs as
// argv ["sh", "-c", showUnitsScript, "sh", PATTERN]: the pattern is $1, data
// and never code. It collects service units matching $1 that systemd has in
// memory (list-units --all, which includes not-found units still loaded)
// and that have unit files (list-unit-files), then shows them all in one
// `systemctl show`: a single round trip.
const showUnitsScript = `set -f
a=$(systemctl list-units --all --plain --no-legend --no-pager --type=service -- "$1") || exit
b=$(systemctl list-unit-files --no-legend --no-pager --type=service -- "$1") || b=
u=$(printf '%s\n%s\n' "$a" "$b" | while read -r n _; do case $n in *.service) echo "$n";; esac; done | sort -u)
[ -n "$u" ] || exit 0
exec systemctl show --all --no-pager --property=` + showProperties + ` -- $u`

// Valid inputs. Everything reaches the board as argv data anyway; these
// checks give a clear error early and keep option-looking values out.

// isHerdUnit: herd-[a-z0-9-]+.service
func isHerdUnit(u string) bool {
	name, ok := strings.CutPrefix(u, "herd-")
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, ".service")
	return ok && name != "" && allIn(name, "abcdefghijklmnopqrstuvwxyz0123456789-")
}

const unitChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.@\\-"

// isUnitName: a systemd unit name with a known suffix, not starting with '-'.
func isUnitName(u string) bool {
	if len(u) > 256 || strings.HasPrefix(u, "-") || !allIn(u, unitChars) {
		return false
	}
	for _, suf := range []string{".service", ".socket", ".timer", ".path", ".target", ".mount"} {
		if len(u) > len(suf) && strings.HasSuffix(u, suf) {
			return true
		}
	}
	return false
}

// isUnitPattern: a systemctl glob over unit names, not starting with '-'.
func isUnitPattern(p string) bool {
	return p != "" && len(p) <= 256 && !strings.HasPrefix(p, "-") && allIn(p, unitChars+"*?[]")
}

// isSince: a short journalctl time spec ("2024-05-01 10:00:00", "-1h",
// "today"); it is passed as one --since=VALUE argument.
func isSince(s string) bool {
	return s != "" && len(s) <= 64 && strings.TrimSpace(s) == s &&
		allIn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 :.+-")
}

func allIn(s, chars string) bool {
	for _, r := range s {
		if !strings.ContainsRune(chars, r) {
			return false
		}
	}
	return true
}

// isSystemctlVerb lists the verbs Systemctl accepts.
func isSystemctlVerb(v string) bool {
	switch v {
	case "enable", "disable", "start", "stop", "restart", "reset-failed":
		return true
	}
	return false
}

// DaemonReload runs `systemctl daemon-reload` on node.
func (e *Executor) DaemonReload(ctx context.Context, node string) error {
	_, err := e.runChecked(ctx, node, []string{"systemctl", "daemon-reload"})
	return err
}

// Systemctl runs `systemctl VERB -- UNITS...` on node. verb is one of enable,
// disable, start, stop, restart, reset-failed; at least one unit is needed.
// A non-zero status is an *ExitError.
func (e *Executor) Systemctl(ctx context.Context, node, verb string, units ...string) error {
	if !isSystemctlVerb(verb) {
		return fmt.Errorf("%w: systemctl verb %q (allowed: enable, disable, start, stop, restart, reset-failed)", ErrInvalidArgument, verb)
	}
	if len(units) == 0 {
		return fmt.Errorf("%w: systemctl %s: no units", ErrInvalidArgument, verb)
	}
	for _, u := range units {
		if !isUnitName(u) {
			return fmt.Errorf("%w: systemctl %s: unit name %q", ErrInvalidArgument, verb, u)
		}
	}
	argv := append([]string{"systemctl", verb, "--"}, units...)
	_, err := e.runChecked(ctx, node, argv)
	return err
}

// ShowUnits returns the state of every service unit on node matching
// pattern (a systemctl glob such as "herd-*"), loaded or not, sorted by
// name, in one round trip.
func (e *Executor) ShowUnits(ctx context.Context, node, pattern string) ([]UnitState, error) {
	if !isUnitPattern(pattern) {
		return nil, fmt.Errorf("%w: unit pattern %q", ErrInvalidArgument, pattern)
	}
	res, err := e.runChecked(ctx, node, []string{"sh", "-c", showUnitsScript, "sh", pattern})
	if err != nil {
		return nil, err
	}
	units, err := ParseShow(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("sshexec: node %s: %w", node, err)
	}
	return units, nil
}

// Journal writes the journal of unit on node to w (`journalctl -u UNIT -o
// short-iso --no-pager`), from since if it is set (a journalctl time spec:
// "2024-05-01 10:00:00", "today", "-1h", ...), and keeps following new
// entries until ctx is cancelled if follow is set. unit must be a herd
// unit (herd-NAME.service).
func (e *Executor) Journal(ctx context.Context, node, unit string, follow bool, since string, w io.Writer) error {
	if !isHerdUnit(unit) {
		return fmt.Errorf("%w: journal unit %q is not herd-NAME.service", ErrInvalidArgument, unit)
	}
	argv := []string{"journalctl", "-u", unit, "-o", "short-iso", "--no-pager"}
	if since != "" {
		if !isSince(since) {
			return fmt.Errorf("%w: journal since %q is not a simple time spec", ErrInvalidArgument, since)
		}
		argv = append(argv, "--since="+since)
	}
	if follow {
		argv = append(argv, "-f")
	}
	return e.Stream(ctx, node, argv, w)
}

// ParseShow parses `systemctl show` output for several units: blocks of
// Key=Value lines separated by blank lines. Unknown keys are ignored; every
// block needs an Id. Empty and "[not set]" numbers read as 0, an "n/a"
// timestamp as "". The result is sorted by unit name.
func ParseShow(out []byte) ([]UnitState, error) {
	var (
		units []UnitState
		cur   UnitState
		have  bool
		line  int
	)
	flush := func() error {
		if !have {
			return nil
		}
		if cur.Unit == "" {
			return fmt.Errorf("systemctl show: block ending at line %d has no Id", line)
		}
		units = append(units, cur)
		cur, have = UnitState{}, false
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		key, val, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("systemctl show: line %d: %q is not Key=Value", line, text)
		}
		have = true
		var num *int
		switch key {
		case "Id":
			cur.Unit = val
		case "LoadState":
			cur.LoadState = val
		case "ActiveState":
			cur.ActiveState = val
		case "SubState":
			cur.SubState = val
		case "UnitFileState":
			cur.UnitFileState = val
		case "FragmentPath":
			cur.FragmentPath = val
		case "ExecMainStartTimestamp":
			if val != "n/a" {
				cur.ExecMainStartTimestamp = val
			}
		case "MainPID":
			num = &cur.MainPID
		case "NRestarts":
			num = &cur.NRestarts
		case "ExecMainStatus":
			num = &cur.ExecMainStatus
		}
		if num != nil && val != "" && val != "[not set]" {
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("systemctl show: line %d: %s=%q is not a number", line, key, val)
			}
			*num = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("systemctl show: %w", err)
	}
	line++
	if err := flush(); err != nil {
		return nil, err
	}
	slices.SortFunc(units, func(a, b UnitState) int { return strings.Compare(a.Unit, b.Unit) })
	return units, nil
}
