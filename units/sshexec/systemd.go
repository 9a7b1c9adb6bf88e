package sshexec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/artifact"
)

// Valid inputs. Everything reaches the board as argv data anyway; these
// checks give a clear error early and keep option-looking values out.

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
	case "enable", "enable-now", "disable", "start", "stop", "restart", "reset-failed":
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
// disable, start, stop, restart, reset-failed, or enable-now for `systemctl
// enable --now`; at least one unit is needed. enable-now and disable run
// with --no-reload: they only add or remove the [Install] symlinks and
// start or not, and the daemon-reload systemctl would do after them
// (0.25–1.5 s on a lab board, most of a placement) is left to the plan,
// which asks for one where systemd's view of a unit file is stale. systemd
// loads a unit it has not loaded from disk when it is started, with the
// symlinks just made, so it shows enabled. Plain enable keeps its reload:
// systemd caches a loaded unit's UnitFileState until a reload.
// A non-zero status is an *ExitError.
func (e *Executor) Systemctl(ctx context.Context, node, verb string, names ...string) error {
	if !isSystemctlVerb(verb) {
		return fmt.Errorf("%w: systemctl verb %q (allowed: enable, enable-now, disable, start, stop, restart, reset-failed)", ErrInvalidArgument, verb)
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: systemctl %s: no units", ErrInvalidArgument, verb)
	}
	for _, u := range names {
		if !isUnitName(u) {
			return fmt.Errorf("%w: systemctl %s: unit name %q", ErrInvalidArgument, verb, u)
		}
	}
	var argv []string
	switch verb {
	case "disable":
		argv = []string{"systemctl", "--no-reload", verb, "--"}
	case "enable-now":
		argv = []string{"systemctl", "--no-reload", "enable", "--now", "--"}
	default:
		argv = []string{"systemctl", verb, "--"}
	}
	argv = append(argv, names...)
	_, err := e.runChecked(ctx, node, argv)
	return err
}

// UnitDir is where herd writes unit files on a board; ShowUnits hashes the
// herd-*.service files found there.
const UnitDir = "/etc/systemd/system"

// hashMarker separates the `systemctl show` blocks from the hash lines in
// the output of showUnitsScript.
const hashMarker = "@@herd-hashes@@"

// disconnectMarker separates the hash lines from the names of the units
// marked in units.DisconnectDir.
const disconnectMarker = "@@herd-disconnect@@"

// showUnitsScript returns the fixed script ShowUnits runs as
// argv ["sh", "-c", script, "herd-show-units"]. It takes no argument: no
// value from outside reaches it (the property list is units'
// ShowProperties, a constant). It
//
//  0. prints markPrefix and the first line of ReportSeqFile (nothing
//     when the board keeps none), on a line of its own;
//  1. lists the herd-*.service and herd-*.timer units systemd has in
//     memory (list-units --all, which includes not-found units still
//     loaded) and the herd-*.service and herd-*.timer files in UnitDir;
//     a timer (a scheduled job's) stands for its service too;
//  2. exits 0 with no further output if there are none;
//  3. prints `systemctl show` of all the services, in one call, with
//     TZ=UTC so timestamps are in UTC whatever the board's zone;
//  4. prints hashMarker on a line of its own;
//  5. prints "SHA256 NAME" for each of them that has a file in UnitDir;
//  6. prints disconnectMarker on a line of its own, then the name of each
//     of them that has a mark in units.DisconnectDir (stopped by the
//     board's agent while cut off from the servers).
//  7. prints artifactMarker on a line of its own, then "NAME LINE" for
//     each of them with an artifact fetch failure on record: LINE is the
//     first line (at most 512 bytes) of artifact.StatusDir/NAME, which
//     only `herd artifact fetch`, as root, writes.
//  8. prints instanceMarker on a line of its own, then `systemctl show`
//     of the loaded instances of herd templates (api.InstanceUnitName:
//     herd-<pod>@<id>.service, the runs of a job with concurrency allow;
//     at most maxInstanceNames of them), which have no file of their own;
//  9. if there are timers: timerMarker, `systemctl show` of them (Id,
//     ActiveState), timerHashMarker and "SHA256 NAME" for each timer
//     file.
//
// Only names of the form herd-[a-z0-9-]+.service (or .timer) are kept (the characters
// of a pod name), so a stray file such as "herd-x y.service" or
// "herd-[a].service" never reaches systemctl; the name list is then split
// with globbing off. A failing systemctl or sha256sum fails the script, so
// a board whose state cannot be read is an error, never an empty list.
func showUnitsScript() string {
	return `# herd: list herd-*.service units and hash their files
{ read -r m < ` + ReportSeqFile + `; } 2>/dev/null
echo "` + markPrefix + `$m"
d=` + UnitDir + `
a=$(systemctl list-units --all --plain --no-legend --no-pager --type=service,timer -- 'herd-*.service' 'herd-*.timer') || exit
f=$(for x in "$d"/herd-*.service "$d"/herd-*.timer; do [ -f "$x" ] && echo "${x##*/}"; done)
set -f
n=$(printf '%s\n%s\n' "$a" "$f" | while read -r n _; do
	case $n in herd-*[!a-z0-9-]*.service|herd-*[!a-z0-9-]*.timer) ;; herd-?*.service|herd-?*.timer) echo "$n";; esac
done | sort -u)
i=$(printf '%s\n' "$a" | while read -r n _; do
	case $n in herd-*@*@*|herd-*[!a-z0-9@-]*.service) ;; herd-?*@?*.service) echo "$n";; esac
done | sort -u | head -n ` + strconv.Itoa(maxInstanceNames) + `)
[ -n "$n$i" ] || exit 0
u=$(for x in $n; do case $x in *.timer) echo "${x%.timer}.service";; *) echo "$x";; esac; done | sort -u)
t=$(for x in $n; do case $x in *.timer) echo "$x";; esac; done)
if [ -n "$u" ]; then
	TZ=UTC systemctl show --all --no-pager --property=` + strings.Join(units.ShowProperties(), ",") + ` -- $u || exit
fi
echo ` + hashMarker + `
for x in $u; do
	if [ -f "$d/$x" ]; then
		h=$(sha256sum < "$d/$x") || exit
		echo "${h%% *} $x"
	fi
done
echo ` + disconnectMarker + `
for x in $u; do
	if [ -e "` + units.DisconnectDir + `/$x" ]; then echo "$x"; fi
done
echo ` + artifactMarker + `
for x in $u; do
	if [ -f "` + artifact.StatusDir + `/$x" ]; then
		r=$(head -n 1 "` + artifact.StatusDir + `/$x" | head -c 512) || r=
		echo "$x $r"
	fi
done
echo ` + instanceMarker + `
if [ -n "$i" ]; then
	TZ=UTC systemctl show --all --no-pager --property=` + strings.Join(units.ShowProperties(), ",") + ` -- $i || exit
fi
[ -n "$t" ] || exit 0
echo ` + timerMarker + `
systemctl show --all --no-pager --property=Id,ActiveState -- $t || exit
echo ` + timerHashMarker + `
for x in $t; do
	if [ -f "$d/$x" ]; then
		h=$(sha256sum < "$d/$x") || exit
		echo "${h%% *} $x"
	fi
done
`
}

// timerMarker and timerHashMarker start the last sections of
// showUnitsScript's output: `systemctl show` of the herd-*.timer units
// (Id and ActiveState), then "SHA256 NAME" of their files.
const (
	timerMarker     = "@@herd-timers@@"
	timerHashMarker = "@@herd-timer-hashes@@"
)

// artifactMarker separates the hash lines from the artifact failure lines
// in the output of showUnitsScript.
const artifactMarker = "@@herd-artifacts@@"

// instanceMarker starts the section of showUnitsScript's output that
// shows the instances of herd templates; maxInstanceNames bounds how many
// the script shows (the others are seen once these are gone).
const (
	instanceMarker   = "@@herd-instances@@"
	maxInstanceNames = 1024
)

// ShowUnits lists every herd-*.service unit on node in one round trip:
// those systemd has loaded (with or without a file) and those that only
// have a file in UnitDir, sorted by name, with FileHash (units.Hash of the
// file's bytes) set for every unit that has a file there. A file systemd
// does not know yet comes back with only Unit and FileHash set. A board
// with no herd units gives an empty list. A non-zero exit of the script
// (systemctl or sha256sum failed) is an *ExitError.
func (e *Executor) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	states, _, err := e.ShowUnitsMarked(ctx, node)
	return states, err
}

// ReportSeqFile is where a board's agent writes the mark ("EPOCH SEQ") of
// the unit report it is about to collect (package agent/unitwatch);
// ShowUnitsMarked reads it in the same round trip as the listing.
const ReportSeqFile = "/run/herd/unitreport.seq"

// markPrefix starts the first line of showUnitsScript's output.
const markPrefix = "@@herd-mark@@ "

// maxMark bounds the seq file line ShowUnitsMarked passes on.
const maxMark = 64

// ShowUnitsMarked is ShowUnits plus the first line of the board's
// ReportSeqFile as it was just before the listing ("" when there is none,
// or when it is longer than 64 bytes), for the caller to parse.
// Through a board session that has the list op the board lists in Go
// (ListLocal, no process but systemctl's); else it runs ShowUnitsArgv.
func (e *Executor) ShowUnitsMarked(ctx context.Context, node string) ([]units.UnitState, string, error) {
	out, err, ok := e.listSession(ctx, node)
	if !ok {
		var res Result
		res, err = e.runChecked(ctx, node, ShowUnitsArgv())
		out = res.Stdout
	}
	if err != nil {
		return nil, "", err
	}
	states, mark, err := ParseListing(out)
	if err != nil {
		return nil, "", fmt.Errorf("sshexec: node %s: %w", node, err)
	}
	return states, mark, nil
}

// ShowUnitsArgv is the command ShowUnits runs on a board whose session
// does not list (ListLocal is the same listing in Go); parse its output
// with ParseListing.
func ShowUnitsArgv() []string {
	return []string{"sh", "-c", showUnitsScript(), "herd-show-units"}
}

// ParseListing reads the whole output of ShowUnitsArgv: the mark line
// (see ShowUnitsMarked) and the listing (ParseShowUnits).
func ParseListing(out []byte) ([]units.UnitState, string, error) {
	mark, rest := cutMarkLine(out)
	states, err := ParseShowUnits(rest)
	if err != nil {
		return nil, "", err
	}
	return states, mark, nil
}

// cutMarkLine splits off the first line of out when it starts with
// markPrefix, returning what follows the prefix (trimmed, "" when over
// maxMark bytes) and the rest of out.
func cutMarkLine(out []byte) (string, []byte) {
	if !bytes.HasPrefix(out, []byte(markPrefix)) {
		return "", out
	}
	line, rest, _ := bytes.Cut(out[len(markPrefix):], []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) > maxMark {
		return "", rest
	}
	return string(line), rest
}

// ParseShowUnits reads the output of ShowUnits' script: `systemctl show`
// blocks (parsed by units.ParseShow), a marker line, then one "SHA256 NAME"
// line per unit file, then optionally a marker line followed by the names
// of the units marked in units.DisconnectDir, then optionally
// artifactMarker and "NAME KIND MESSAGE" lines. It sets FileHash on the
// unit of each hash line and adds a UnitState with only Unit and FileHash
// for a file no block describes, sets DisconnectMark on the listed units
// of each name line, and ArtifactFailure from each failure line. Hash and
// name lines for names that are not herd units, and name and failure
// lines for units not listed, are skipped.
// Empty output means no units; otherwise the marker is required (its
// absence means the output was cut short). CRLF line ends are accepted.
// The result is sorted by unit name.
func ParseShowUnits(out []byte) ([]units.UnitState, error) {
	out = bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n"))
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	var timers, instances []byte
	if before, after, ok := cutMarker(out, timerMarker); ok { // absent: no timers
		out, timers = before, after
	}
	if before, after, ok := cutMarker(out, instanceMarker); ok { // absent: an older board
		out, instances = before, after
	}
	show, hashes, ok := cutMarker(out, hashMarker)
	if !ok {
		return nil, fmt.Errorf("sshexec: show units: no %q line after the systemctl show output", hashMarker)
	}
	states, err := units.ParseShow(show)
	if err != nil {
		return nil, fmt.Errorf("sshexec: show units: %w", err)
	}
	byUnit := make(map[string]int, len(states))
	for i, s := range states {
		byUnit[s.Unit] = i
	}
	var fails []byte
	if h, f, ok := cutMarker(hashes, artifactMarker); ok { // absent: no failures
		hashes, fails = h, f
	}
	hashes, marked, _ := bytes.Cut(hashes, []byte(disconnectMarker+"\n")) // cutMarker ends hashes with a newline
	sc := bufio.NewScanner(bytes.NewReader(hashes))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !isSHA256(f[0]) {
			return nil, fmt.Errorf("sshexec: show units: hash line %d: %q is not \"SHA256 NAME\"", n, line)
		}
		sum, name := f[0], strings.TrimPrefix(f[1], "*") // sha256sum marks binary mode with '*'
		if !units.IsHerdUnit(name) {
			continue
		}
		if i, ok := byUnit[name]; ok {
			states[i].FileHash = sum
			continue
		}
		byUnit[name] = len(states)
		states = append(states, units.UnitState{Unit: name, FileHash: sum})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sshexec: show units: %w", err)
	}
	for _, name := range strings.Fields(string(marked)) {
		if i, ok := byUnit[name]; ok && units.IsHerdUnit(name) {
			states[i].DisconnectMark = true
		}
	}
	// "NAME KIND MESSAGE" lines: a unit's artifact fetch failure. A line
	// for a unit not listed, or that is not a failure, is skipped.
	for _, line := range strings.Split(string(fails), "\n") {
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		i, ok := byUnit[name]
		if !ok {
			continue
		}
		if kind, msg, ok := artifact.ParseStatus(rest); ok {
			states[i].ArtifactFailure = string(kind) + " " + msg
		}
	}
	states, err = addTimers(states, byUnit, timers)
	if err != nil {
		return nil, err
	}
	states, err = addInstances(states, byUnit, instances)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].Unit < states[j].Unit })
	return states, nil
}

// addTimers folds the timer section of the listing (see showUnitsScript)
// into the states of their services: TimerActiveState and TimerFileHash.
// A timer whose service is not listed gets a UnitState of its own with
// only those (and Unit, the service's name).
func addTimers(states []units.UnitState, byUnit map[string]int, out []byte) ([]units.UnitState, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return states, nil
	}
	show, hashes, ok := cutMarker(out, timerHashMarker)
	if !ok {
		return nil, fmt.Errorf("sshexec: show units: no %q line after the timers", timerHashMarker)
	}
	service := func(timer string) (int, bool) {
		pod, ok := api.PodFromTimerName(timer)
		if !ok {
			return 0, false
		}
		return stateIndex(&states, byUnit, api.UnitName(pod)), true
	}
	ts, err := units.ParseShow(show)
	if err != nil {
		return nil, fmt.Errorf("sshexec: show units: timers: %w", err)
	}
	for _, t := range ts {
		if i, ok := service(t.Unit); ok && t.LoadState != "not-found" {
			states[i].TimerActiveState = t.ActiveState
		}
	}
	for _, line := range strings.Split(string(hashes), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !isSHA256(f[0]) {
			continue
		}
		if i, ok := service(strings.TrimPrefix(f[1], "*")); ok {
			states[i].TimerFileHash = f[0]
		}
	}
	return states, nil
}

// stateIndex returns the index of unit name's state in states (byUnit
// maps names to indexes), appending one with only Unit set when there is
// none.
func stateIndex(states *[]units.UnitState, byUnit map[string]int, name string) int {
	i, ok := byUnit[name]
	if !ok {
		i = len(*states)
		byUnit[name] = i
		*states = append(*states, units.UnitState{Unit: name})
	}
	return i
}

// addInstances folds the instance section of the listing (see
// showUnitsScript) into the states of their pods' units: Instances,
// chosen and ordered by units.KeepInstances. An instance whose pod's
// unit is not listed gets a UnitState of its own with only Unit and
// Instances. Blocks that are not instances of a herd template are
// skipped, and so are instances systemd does not know (not-found) unless
// they are still active or failed: a run that ends after its job's template was
// removed stays loaded, not-found and failed, until it is reset, which
// the plan for a unit no pod wants does.
func addInstances(states []units.UnitState, byUnit map[string]int, out []byte) ([]units.UnitState, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return states, nil
	}
	is, err := units.ParseShow(out)
	if err != nil {
		return nil, fmt.Errorf("sshexec: show units: instances: %w", err)
	}
	touched := map[int]bool{}
	for _, in := range is {
		pod, _, ok := api.PodFromInstanceName(in.Unit)
		if !ok || in.LoadState == "not-found" && (in.ActiveState == "" || in.ActiveState == "inactive") {
			continue
		}
		i := stateIndex(&states, byUnit, api.UnitName(pod))
		states[i].Instances = append(states[i].Instances, in)
		touched[i] = true
	}
	for i := range touched {
		states[i].Instances = units.KeepInstances(states[i].Instances)
	}
	return states, nil
}

// cutMarker splits out around the first line that is exactly marker.
func cutMarker(out []byte, marker string) (before, after []byte, found bool) {
	m := []byte("\n" + marker + "\n")
	s := make([]byte, 0, len(out)+2)
	s = append(append(append(s, '\n'), out...), '\n')
	i := bytes.Index(s, m)
	if i < 0 {
		return nil, nil, false
	}
	return s[1 : i+1], s[i+len(m):], true
}

// isSHA256 reports whether s is 64 lower-case hex digits, as sha256sum
// prints them.
func isSHA256(s string) bool {
	return len(s) == 64 && allIn(s, "0123456789abcdef")
}
