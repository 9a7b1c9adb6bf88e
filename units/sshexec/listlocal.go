package sshexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/artifact"
	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

// MaxListing bounds ListLocal's output, and the output of each systemctl
// it runs: over it the listing is an error, never a cut one. It is the
// board session's cap on what a request answers (boardsession.MaxOutput).
const MaxListing = boardsession.MaxOutput

// maxListStderr bounds what ListLocal keeps of a systemctl's stderr (for
// its error).
const maxListStderr = 64 << 10

// maxMarkRead bounds how much of ReportSeqFile ListLocal reads: a first
// line longer than this is passed on cut here, which ParseListing drops as
// over maxMark anyway.
const maxMarkRead = 4 << 10

// maxStatusLine bounds the first line of an artifact status file the
// listing passes on, as the script's `head -c 512`.
const maxStatusLine = 512

// ListLocal lists this machine's herd units as ShowUnitsArgv's script
// does, in-process: ParseListing reads its output to exactly what it
// reads from the script's on the same board. It runs systemctl (from
// PATH, like the script) with fixed argv, at most four times (list-units,
// then show of the services, of the template instances and of the
// timers), and reads only the fixed paths the script reads: no input
// reaches it. A failing systemctl is an error (its exit status through
// ExitCode, as a *ListError), so a board whose state cannot be read is
// never an empty list. Cancelling ctx kills the systemctl running.
//
// The script and ListLocal differ only where the script's shell mangles
// names no herd writes: the script's echo of a file name in UnitDir
// holding a newline or a backslash (dash's echo reads escapes) can print
// names that are not files there, and of an artifact status line holding
// a backslash a changed line; ListLocal passes such names and lines on
// unchanged. Names are sorted in byte order (the C locale's); the script
// sorts in the board's locale (LANG, kept through sudo), which only
// matters to which instances are kept when there are more than
// maxInstanceNames.
func ListLocal(ctx context.Context) ([]byte, error) {
	return boardLister.list(ctx)
}

// lister is where a listing looks: the board's paths and its systemctl,
// which tests point elsewhere.
type lister struct {
	UnitDir       string
	ReportSeqFile string
	DisconnectDir string
	StatusDir     string // artifact.StatusDir
	Systemctl     string // a path, or a name looked up in PATH
	Max           int    // bound on the listing and on each systemctl's output
}

var boardLister = lister{
	UnitDir:       UnitDir,
	ReportSeqFile: ReportSeqFile,
	DisconnectDir: units.DisconnectDir,
	StatusDir:     artifact.StatusDir,
	Systemctl:     "systemctl",
	Max:           MaxListing,
}

// ListError is a listing's systemctl that exited non-zero.
type ListError struct {
	Argv   []string
	Status int // 128+N when killed by signal N
	Stderr []byte
}

// Error implements error.
func (e *ListError) Error() string {
	msg := fmt.Sprintf("sshexec: list: %q exited with status %d", strings.Join(e.Argv, " "), e.Status)
	if s := strings.TrimSpace(string(e.Stderr)); s != "" {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[:i] + " ..."
		}
		msg += ": " + s
	}
	return msg
}

// ExitCode is the status (the board session passes it on as a run's).
func (e *ListError) ExitCode() int { return e.Status }

// list writes what showUnitsScript prints, step for step (see there).
func (l lister) list(ctx context.Context) ([]byte, error) {
	var out bytes.Buffer
	// The mark first: a report written after it can only be newer than
	// what this listing sees.
	out.WriteString(markPrefix)
	out.Write(readMark(l.ReportSeqFile))
	out.WriteByte('\n')
	loaded, err := l.systemctl(ctx, false, "list-units", "--all", "--plain", "--no-legend", "--no-pager",
		"--type=service,timer", "--", "herd-*.service", "herd-*.timer")
	if err != nil {
		return nil, err
	}
	files, err := l.unitFiles()
	if err != nil {
		return nil, err
	}
	var names, instances []string
	for line := range strings.SplitSeq(string(loaded), "\n") {
		n := firstField(line)
		if listedUnit(n) {
			names = append(names, n)
		}
		if listedInstance(n) {
			instances = append(instances, n)
		}
	}
	for _, n := range files {
		if listedUnit(n) {
			names = append(names, n)
		}
	}
	names = sortUnique(names)
	instances = sortUnique(instances)
	if len(instances) > maxInstanceNames {
		instances = instances[:maxInstanceNames]
	}
	if len(names)+len(instances) == 0 {
		return out.Bytes(), nil
	}
	var services, timers []string
	for _, n := range names {
		if base, ok := strings.CutSuffix(n, ".timer"); ok {
			timers = append(timers, n)
			n = base + ".service"
		}
		services = append(services, n)
	}
	services = sortUnique(services)
	show := func(utc bool, props string, us []string) error {
		b, err := l.systemctl(ctx, utc, append([]string{"show", "--all", "--no-pager", "--property=" + props, "--"}, us...)...)
		out.Write(b)
		return err
	}
	props := strings.Join(units.ShowProperties(), ",")
	if len(services) > 0 {
		if err := show(true, props, services); err != nil {
			return nil, err
		}
	}
	out.WriteString(hashMarker + "\n")
	if err := l.hashLines(ctx, &out, services); err != nil {
		return nil, err
	}
	out.WriteString(disconnectMarker + "\n")
	for _, u := range services {
		if _, err := os.Stat(filepath.Join(l.DisconnectDir, u)); err == nil {
			out.WriteString(u + "\n")
		}
	}
	out.WriteString(artifactMarker + "\n")
	for _, u := range services {
		p := filepath.Join(l.StatusDir, u)
		if regular(p) {
			out.WriteString(u + " ")
			out.Write(firstLine(p, maxStatusLine))
			out.WriteByte('\n')
		}
	}
	out.WriteString(instanceMarker + "\n")
	if len(instances) > 0 {
		if err := show(true, props, instances); err != nil {
			return nil, err
		}
	}
	if len(timers) > 0 {
		out.WriteString(timerMarker + "\n")
		if err := show(false, "Id,ActiveState", timers); err != nil {
			return nil, err
		}
		out.WriteString(timerHashMarker + "\n")
		if err := l.hashLines(ctx, &out, timers); err != nil {
			return nil, err
		}
	}
	if out.Len() > l.Max {
		return nil, fmt.Errorf("%w: the listing is %d bytes, limit %d", ErrOutputTooLarge, out.Len(), l.Max)
	}
	return out.Bytes(), nil
}

// systemctl runs l.Systemctl with args (argv, no shell; TZ=UTC when utc),
// stdin /dev/null, and returns its stdout.
func (l lister) systemctl(ctx context.Context, utc bool, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, l.Systemctl, args...)
	cmd.Dir = "/"
	if utc {
		cmd.Env = append(os.Environ(), "TZ=UTC")
	}
	stdout, stderr := newCapBuffer(l.Max), newCapBuffer(maxListStderr)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child of systemctl's holding its stdout open (a pager: there is
	// none with --no-pager) does not hold the listing up.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	argv := append([]string{"systemctl"}, args...)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		status := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
		return nil, &ListError{Argv: argv, Status: status, Stderr: stderr.buf.Bytes()}
	case err != nil:
		return nil, fmt.Errorf("sshexec: list: %q: %w", argv[0], err)
	case stdout.dropped:
		return nil, fmt.Errorf("%w: %q wrote more than %d bytes", ErrOutputTooLarge, strings.Join(argv[:2], " "), l.Max)
	}
	return stdout.buf.Bytes(), nil
}

// unitFiles returns the names in l.UnitDir the script's globs
// herd-*.service and herd-*.timer match that are regular files or links
// to one (`[ -f ]`). A missing directory has none.
func (l lister) unitFiles() ([]string, error) {
	ents, err := os.ReadDir(l.UnitDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sshexec: list: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		rest, ok := strings.CutPrefix(n, "herd-")
		if !ok || !strings.HasSuffix(rest, ".service") && !strings.HasSuffix(rest, ".timer") {
			continue
		}
		if regular(filepath.Join(l.UnitDir, n)) {
			names = append(names, n)
		}
	}
	return names, nil
}

// hashLines writes "SHA256 NAME" for each of names that is a regular file
// (or a link to one) in l.UnitDir. A file that cannot be read is an error,
// as sha256sum's failure fails the script.
func (l lister) hashLines(ctx context.Context, out *bytes.Buffer, names []string) error {
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(l.UnitDir, n)
		if !regular(p) {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("sshexec: list: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("sshexec: list: %s: %w", p, err)
		}
		out.WriteString(hex.EncodeToString(h.Sum(nil)) + " " + n + "\n")
	}
	return nil
}

// regular is the shell's `[ -f path ]`: a regular file, links followed.
func regular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// readMark returns the first line of the seq file at path (at most
// maxMarkRead bytes of it) without blanks around it, as the script's
// `read -r`; nothing when there is none or it is not a regular file
// (opened without blocking: a FIFO there does not hold the listing up).
func readMark(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return bytes.Trim(readFirstLine(f, maxMarkRead), " \t")
}

// firstLine is `head -n 1 path | head -c max` without the line's newline;
// nothing when it cannot be read (the script's `|| r=`).
func firstLine(path string, max int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return readFirstLine(f, max)
}

func readFirstLine(r io.Reader, max int) []byte {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)))
	if err != nil {
		return nil
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return line
}

// firstField is what the script's `read -r n _` puts in n: the line's
// first field split on IFS blanks (space, tab).
func firstField(line string) string {
	line = strings.TrimLeft(line, " \t")
	if i := strings.IndexAny(line, " \t"); i >= 0 {
		return line[:i]
	}
	return line
}

// listedUnit is the script's first case: herd-X.service or herd-X.timer
// with X non-empty and only [a-z0-9-] (the characters of a pod name).
func listedUnit(n string) bool {
	rest, ok := strings.CutPrefix(n, "herd-")
	if !ok {
		return false
	}
	x, ok := strings.CutSuffix(rest, ".service")
	if !ok {
		if x, ok = strings.CutSuffix(rest, ".timer"); !ok {
			return false
		}
	}
	return x != "" && onlyBytes(x, "-")
}

// listedInstance is the script's second case: herd-P@I.service with P
// and I non-empty, only [a-z0-9-] in them and one '@' (an instance of a
// herd template, api.InstanceUnitName).
func listedInstance(n string) bool {
	rest, ok := strings.CutPrefix(n, "herd-")
	if !ok {
		return false
	}
	x, ok := strings.CutSuffix(rest, ".service")
	if !ok {
		return false
	}
	p, i, ok := strings.Cut(x, "@")
	return ok && p != "" && i != "" && onlyBytes(p, "-") && onlyBytes(i, "-")
}

// onlyBytes reports whether s holds only bytes a-z, 0-9 and those of
// extra (compared byte by byte, as dash's patterns do).
func onlyBytes(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// sortUnique is `sort -u` in the C locale: byte order, duplicates dropped.
func sortUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
