package boardsession

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Protocol names this protocol in the server's Hello.
const Protocol = "herd-board-session/1"

// Command is the exec request that starts a session on a board: the
// gate (units/sshgate) admits exactly this string, and without a gate (a
// test sshd) the login shell runs it.
const Command = "/usr/local/bin/herd board session"

// Limits of the protocol.
const (
	// MaxFrame bounds one frame: a put of the largest file herd writes
	// (16 MiB) with its JSON encoding (base64, a third more).
	MaxFrame = 24 << 20
	// MaxOutput bounds what a run keeps of each of stdout and stderr.
	MaxOutput = 8 << 20
	// MaxRunning bounds the requests a session handles at once.
	MaxRunning = 16
	// KillGrace is how long a cancelled command has between SIGTERM and
	// SIGKILL.
	KillGrace = 2 * time.Second
	// IdleExit ends a session that has had no request and nothing
	// running for this long. The leader lists every board at least every
	// few minutes, so only a session whose leader is gone lives this long
	// idle.
	IdleExit = 10 * time.Minute
)

// Operations of a Request.
const (
	OpRun    = "run"
	OpPut    = "put"
	OpRemove = "rm"
	OpCancel = "cancel"
	// OpList answers with the board's listing of its herd units (what
	// Options.List produces); a session served without one, like a herd
	// from before the op, answers it as an unknown op.
	OpList = "list"
)

// Hello is the server's first frame.
type Hello struct {
	Protocol string `json:"protocol"`
}

// Request is one frame from the client.
type Request struct {
	// ID names the request in its Response and in a cancel; unique among
	// the requests in flight, never 0.
	ID uint64 `json:"id"`
	Op string `json:"op"`
	// Argv is the command of a run, byte for byte (JSON strings would
	// not keep bytes that are not UTF-8).
	Argv [][]byte `json:"argv,omitempty"`
	// MaxOutput caps what a run keeps of each stream, and a list's
	// answer (0: MaxOutput).
	MaxOutput int `json:"max_output,omitempty"`
	// Path, Content, Mode, ParentMode and AllowSetID are a put's (Path
	// also an rm's), as boardfs.PutOptions.
	Path       []byte `json:"path,omitempty"`
	Content    []byte `json:"content,omitempty"`
	Mode       uint32 `json:"mode,omitempty"`
	ParentMode uint32 `json:"parent_mode,omitempty"`
	AllowSetID bool   `json:"allow_setid,omitempty"`
}

// Run is the request to run argv, keeping at most maxOutput bytes of each
// stream (0: MaxOutput).
func Run(argv []string, maxOutput int) Request {
	r := Request{Op: OpRun, MaxOutput: maxOutput}
	for _, a := range argv {
		r.Argv = append(r.Argv, []byte(a))
	}
	return r
}

// Put is the request to write content to path (boardfs.PutFile).
func Put(path string, content []byte, mode, parentMode uint32, allowSetID bool) Request {
	return Request{Op: OpPut, Path: []byte(path), Content: content, Mode: mode, ParentMode: parentMode, AllowSetID: allowSetID}
}

// Remove is the request to remove path (boardfs.RemoveFile).
func Remove(path string) Request { return Request{Op: OpRemove, Path: []byte(path)} }

// List is the request for the board's unit listing, at most maxOutput
// bytes of it (0: MaxOutput); a longer one is an error, never cut.
func List(maxOutput int) Request { return Request{Op: OpList, MaxOutput: maxOutput} }

// Response is the server's answer to one request (none to a cancel).
type Response struct {
	ID uint64 `json:"id"`
	// Exit is a run's exit status: 0–255, 128+N when killed by signal N.
	// For a list, the status of the command of the listing that failed
	// (with Error), when one did.
	Exit int `json:"exit"`
	// Stdout is a run's standard output, or a list's listing.
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	// Truncated: a stream of the run went over its cap; the first bytes
	// were kept. For a list: the listing went over the cap and is not
	// sent (with Error).
	Truncated bool `json:"truncated,omitempty"`
	// Refused: boardfs refused a put or rm (a symbolic link in the path,
	// setuid bits not allowed, ...); Error says why.
	Refused bool `json:"refused,omitempty"`
	// Error is why the request could not be carried out (a bad request,
	// a command that could not be started, a failed write). A run that
	// started and exited non-zero has no Error.
	Error string `json:"error,omitempty"`
}

// ErrFrameTooLarge: a frame's length is over MaxFrame.
var ErrFrameTooLarge = errors.New("boardsession: frame too large")

// writeFrame writes v as one frame.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxFrame {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, len(b), MaxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame into v: io.EOF at a clean end between frames,
// an error for a truncated or oversized frame or bad JSON (unknown fields
// included).
func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("boardsession: truncated frame header: %w", err)
		}
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, MaxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("boardsession: truncated frame (%d bytes announced): %w", n, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("boardsession: bad frame: %w", err)
	}
	return nil
}
