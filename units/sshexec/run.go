package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// wrapperCommand is the one and only exec request string the executor ever
// sends. sshd hands it to the login shell. The argv to run travels on stdin
// and never becomes part of any command line. See doc.go for the design;
// in short, stdin carries "LEN\n", then LEN bytes of NUL-terminated argv,
// and then stays open as a lifeline until the command ends:
//
//	read -r n; exec 3>&1 5<&0       LEN; fd 3 = session stdout, fd 5 = lifeline
//	s=$( dd bs=1 count="$n"         exactly the argv bytes, no further
//	     | xargs -0 -r -x sh -c '   argv as arguments; -x: refuse, never split
//	         (exec "$@") 4>&- 5<&- & c=$!     the command, never a builtin
//	         (trap "" TERM; read -r _ <&5;    lifeline closed (cancelled, or
//	          kill -TERM 0; sleep 2;          connection lost): TERM, then
//	          kill -KILL 0) ... & w=$!        KILL, the session's process group
//	         wait "$c"; s=$?; kill -KILL "$w"; echo "$s" >&4' sh
//	     4>&1 >&3 3>&- )            fd 4 = this $(...) pipe, stdout = session's
//	[ -n "$s" ] && exit "$s"        exit with the command's own status
//	echo MARKER >&2; exit 255       no status: the wrapper failed
//
// xargs itself would collapse statuses 1–125 into 123; here the inner sh
// always exits 0 and the real status goes around xargs, through fd 4.
const wrapperCommand = `read -r n; exec 3>&1 5<&0; s=$(dd bs=1 count="$n" 2>/dev/null | xargs -0 -r -x sh -c '` +
	`(exec "$@") 4>&- 5<&- & c=$!; ` +
	`(trap "" TERM; read -r _ <&5; kill -TERM 0; sleep 2; kill -KILL 0) 4>&- >/dev/null 2>&1 & w=$!; ` +
	`wait "$c"; s=$?; kill -KILL "$w"; echo "$s" >&4' sh 4>&1 >&3 3>&-); ` +
	`[ -n "$s" ] && exit "$s"; echo "` + wrapperFailMarker + `" >&2; exit 255`

// WrapperCommand is the executor's one exec request string, exported for
// herd ssh-gate (units/sshgate), the forced command of the cluster SSH
// key's authorized_keys entry, which admits exactly this string.
const WrapperCommand = wrapperCommand

// wrapperFailMarker ends stderr when the wrapper could not report a status.
const wrapperFailMarker = "herd-sshexec: wrapper failed: no exit status"

// maxArgvBytes bounds the encoded argv: GNU xargs builds command lines of
// at most 128 KiB and, with -x, refuses longer ones.
const maxArgvBytes = 100 << 10

// Result is what a command did.
type Result struct {
	Stdout, Stderr []byte
	// ExitStatus is the command's exit status, exactly (0–255). A command
	// killed by signal N reports 128+N, as a shell would.
	ExitStatus int
}

// encodeArgv validates argv and encodes it for the wrapper's stdin:
// "LEN\n" and LEN bytes of NUL-terminated arguments.
func encodeArgv(argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: empty argv", ErrInvalidArgument)
	}
	if argv[0] == "" {
		return nil, fmt.Errorf("%w: argv[0] is empty", ErrInvalidArgument)
	}
	if strings.HasPrefix(argv[0], "-") {
		return nil, fmt.Errorf("%w: argv[0] %q starts with '-'", ErrInvalidArgument, argv[0])
	}
	size := 0
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: argv[%d] contains a NUL byte", ErrInvalidArgument, i)
		}
		size += len(a) + 1
	}
	if size > maxArgvBytes {
		return nil, fmt.Errorf("%w: argv is %d bytes, limit %d", ErrInvalidArgument, size, maxArgvBytes)
	}
	b := make([]byte, 0, size+8)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, '\n')
	for _, a := range argv {
		b = append(b, a...)
		b = append(b, 0)
	}
	return b, nil
}

// Run runs argv on node and returns its output and exit status. err is nil
// whenever the command ran to completion, whatever its status: check
// Result.ExitStatus. The command's stdin is /dev/null. argv[0] is looked up
// in the remote PATH and run directly (never as a shell builtin); no element
// of argv is ever interpreted by a shell.
func (e *Executor) Run(ctx context.Context, node string, argv []string) (Result, error) {
	if res, err, ok := e.runSession(ctx, node, argv); ok {
		return res, err
	}
	stdout := newCapBuffer(e.cfg.MaxOutputBytes)
	stderr := newCapBuffer(e.cfg.MaxOutputBytes)
	status, err := e.exec(ctx, node, argv, stdout, stderr)
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitStatus: status}
	if err != nil {
		return res, err
	}
	if stdout.dropped || stderr.dropped {
		return res, fmt.Errorf("%w: node %s: %q: kept the first %d bytes of each stream", ErrOutputTooLarge, node, argv[0], e.cfg.MaxOutputBytes)
	}
	return res, nil
}

// Stream runs argv on node like Run, but copies its stdout to stdout as it
// arrives, until the command ends or ctx is cancelled (use it for
// `journalctl -f`). stdout is written from one goroutine at a time and never
// after Stream returns. A non-zero exit status is an *ExitError carrying the
// command's stderr.
func (e *Executor) Stream(ctx context.Context, node string, argv []string, stdout io.Writer) error {
	stderr := newCapBuffer(e.cfg.MaxOutputBytes)
	status, err := e.exec(ctx, node, argv, stdout, stderr)
	if err != nil {
		return err
	}
	if status != 0 {
		return &ExitError{Node: node, Argv: argv, Status: status, Stderr: stderr.Bytes()}
	}
	return nil
}

// runChecked runs argv and turns a non-zero status into an *ExitError.
func (e *Executor) runChecked(ctx context.Context, node string, argv []string) (Result, error) {
	res, err := e.Run(ctx, node, argv)
	if err != nil {
		return res, err
	}
	if res.ExitStatus != 0 {
		return res, &ExitError{Node: node, Argv: argv, Status: res.ExitStatus, Stderr: res.Stderr}
	}
	return res, nil
}

// exec runs argv through the wrapper on one session and returns the exit
// status.
func (e *Executor) exec(ctx context.Context, node string, argv []string, stdout io.Writer, stderr *capBuffer) (int, error) {
	stdin, err := encodeArgv(argv)
	if err != nil {
		return -1, err
	}
	s, release, err := e.session(ctx, node)
	if err != nil {
		return -1, err
	}
	defer release()
	defer s.Close()
	// The gate guarantees no write to stdout or stderr after we return,
	// even if the remote end is slow to close the channel.
	gate := &gate{}
	s.Stdout = gate.writer(stdout)
	s.Stderr = gate.writer(stderr)
	lifeline, err := s.StdinPipe()
	if err != nil {
		return -1, fmt.Errorf("sshexec: node %s: stdin: %w", node, err)
	}
	if err := s.Start(wrapperCommand); err != nil {
		return -1, fmt.Errorf("sshexec: node %s: start %q: %w", node, argv[0], err)
	}
	// The frame fits the channel window (sshd offers 2 MiB), so this does
	// not wait for the remote side to read it.
	if _, err := lifeline.Write(stdin); err != nil {
		return -1, fmt.Errorf("sshexec: node %s: send argv of %q: %w", node, argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		e.cancelSession(s, lifeline, done, e.graceFor(node))
		gate.shut()
		return -1, ctx.Err()
	}
	if werr == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	var em *ssh.ExitMissingError
	switch {
	case errors.As(werr, &ee) && ee.Signal() != "":
		return -1, fmt.Errorf("sshexec: node %s: %q: remote wrapper killed by signal %s", node, argv[0], ee.Signal())
	case errors.As(werr, &ee):
		if ee.ExitStatus() == 255 && stderr.trimSuffix(wrapperFailMarker+"\n") {
			return -1, fmt.Errorf("%w: node %s: %q: %s", ErrWrapper, node, argv[0], bytes.TrimSpace(stderr.Bytes()))
		}
		return ee.ExitStatus(), nil
	case errors.As(werr, &em), errors.Is(werr, io.EOF):
		return -1, fmt.Errorf("%w: node %s: %q: %v", ErrConnectionLost, node, argv[0], werr)
	}
	return -1, fmt.Errorf("sshexec: node %s: %q: %w", node, argv[0], werr)
}

// cancelSession stops a running command by closing its lifeline (stdin):
// the wrapper then signals the session's process group, TERM and after 2 s
// KILL, and sshd closes the channel once the login shell is gone. (SSH
// "signal" requests would be simpler, but OpenSSH refuses them for root
// logins.) Waiting for that is bounded by grace, twice; the channel is
// closed from our side too.
func (e *Executor) cancelSession(s *ssh.Session, lifeline io.Closer, done <-chan error, grace time.Duration) {
	lifeline.Close()
	if grace <= 0 {
		s.Close()
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	s.Close()
	t.Reset(grace)
	select {
	case <-done:
	case <-t.C:
	}
}

// cancelGrace bounds each wait for a cancelled command to end on the
// board (cancelSession, and the board session's cancel). It only limits
// how long we watch: the remote kill is already under way. A variable for
// tests.
var cancelGrace = time.Second

// cancelSilence: a board that has left a keepalive (or a connect)
// unanswered this long will not acknowledge a kill either, so a cancelled
// command does not wait for it (cancelGrace is skipped): the caller, often
// the placer cutting a pass short because the board went silent, gets on
// with its witness at once. The connection stays pooled until the
// keepalives close it; the remote kill, if the board is only slow, still
// happens, as the cancel was sent.
const cancelSilence = 250 * time.Millisecond

// graceFor returns how long a cancelled command on node is waited for:
// cancelGrace, or 0 when node is silent (cancelSilence).
func (e *Executor) graceFor(node string) time.Duration {
	if e.Silence(node) >= cancelSilence {
		return 0
	}
	return cancelGrace
}

// gate passes writes through until shut, then drops them.
type gate struct {
	mu     sync.Mutex
	closed bool
}

func (g *gate) writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed {
			return len(p), nil
		}
		return w.Write(p)
	})
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// capBuffer keeps the first max bytes written to it and remembers the last
// few, so that a trailing marker is seen even past the cap.
type capBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped bool
	tail    []byte
}

const capBufferTail = 64

func newCapBuffer(max int) *capBuffer { return &capBuffer{max: max} }

func (b *capBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if len(p) > room {
		b.dropped = true
	}
	if room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > capBufferTail {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-capBufferTail:]...)
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (b *capBuffer) Bytes() []byte { return b.buf.Bytes() }

// trimSuffix reports whether the stream ended with suffix and removes it
// from the kept bytes.
func (b *capBuffer) trimSuffix(suffix string) bool {
	if !bytes.HasSuffix(b.tail, []byte(suffix)) {
		return false
	}
	if bytes.HasSuffix(b.buf.Bytes(), []byte(suffix)) {
		b.buf.Truncate(b.buf.Len() - len(suffix))
	}
	return true
}
