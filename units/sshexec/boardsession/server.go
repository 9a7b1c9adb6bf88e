package boardsession

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herd-dev/herd/units/sshexec/boardfs"
)

// Serve runs a session: it writes the Hello to w, then carries out the
// requests read from r until r ends, answering each on w. At the end every
// running command is cancelled (SIGTERM to its process group, SIGKILL
// KillGrace later) and Serve returns once all have ended: nil at a clean
// end of r, else the protocol or write error that stopped it. A session
// with nothing running that gets no request for IdleExit ends too (nil):
// the leader that opened it is gone (its connection may linger on the
// board for hours without traffic), or will start a new one when it next
// needs the board.
//
// Serve knows run, put, rm and cancel; ServeWith adds what opts provides.
func Serve(r io.Reader, w io.Writer) error {
	return serve(r, w, IdleExit, Options{})
}

// Options are what a session can do beyond run, put and rm. The caller
// provides them, since they live in packages that import this one.
type Options struct {
	// List produces the answer to a list request: the board's listing of
	// its herd units (sshexec.ListLocal). It gets the request's context,
	// cancelled by a cancel or the end of the session, and must run
	// nothing that comes from the request (it gets nothing of it). An
	// error that has an ExitCode() int method (a command of the listing
	// that failed) passes its status on in Response.Exit. Nil: a list is
	// an unknown op, as to a herd from before it.
	List func(ctx context.Context) ([]byte, error)
}

// ServeWith is Serve with the operations opts provides.
func ServeWith(r io.Reader, w io.Writer, opts Options) error {
	return serve(r, w, IdleExit, opts)
}

func serve(r io.Reader, w io.Writer, idleExit time.Duration, opts Options) error {
	s := &server{w: w, running: map[uint64]context.CancelFunc{}, opts: opts}
	if err := s.send(Hello{Protocol: Protocol}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	type frame struct {
		req Request
		err error
	}
	frames := make(chan frame)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			var f frame
			f.err = readFrame(r, &f.req)
			select {
			case frames <- f:
			case <-stop:
				return
			}
			if f.err != nil {
				return
			}
		}
	}()
	idle := time.NewTimer(idleExit)
	defer idle.Stop()
	for {
		select {
		case f := <-frames:
			if errors.Is(f.err, io.EOF) {
				return nil
			}
			if f.err != nil {
				return f.err
			}
			if err := s.handle(ctx, f.req); err != nil {
				return err
			}
			idle.Reset(idleExit)
		case <-idle.C:
			s.mu.Lock()
			busy := len(s.running) > 0
			s.mu.Unlock()
			if !busy {
				return nil
			}
			idle.Reset(idleExit)
		}
	}
}

type server struct {
	wmu  sync.Mutex
	w    io.Writer
	opts Options

	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	wg      sync.WaitGroup
}

func (s *server) send(v any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeFrame(s.w, v)
}

// handle starts req (or cancels the run it names). Only a failure to
// answer stops the session.
func (s *server) handle(ctx context.Context, req Request) error {
	if req.Op == OpCancel {
		s.mu.Lock()
		if c := s.running[req.ID]; c != nil {
			c()
		}
		s.mu.Unlock()
		return nil
	}
	if req.ID == 0 {
		return s.send(Response{Error: "request id 0"})
	}
	s.mu.Lock()
	switch {
	case s.running[req.ID] != nil:
		s.mu.Unlock()
		return s.send(Response{ID: req.ID, Error: fmt.Sprintf("request id %d is already in flight", req.ID)})
	case len(s.running) >= MaxRunning:
		s.mu.Unlock()
		return s.send(Response{ID: req.ID, Error: fmt.Sprintf("busy: %d requests in flight", MaxRunning)})
	}
	rctx, cancel := context.WithCancel(ctx)
	s.running[req.ID] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		resp := s.carryOut(rctx, req)
		s.mu.Lock()
		delete(s.running, req.ID)
		s.mu.Unlock()
		cancel()
		s.send(resp) // a dead writer ends the session through the reader
	}()
	return nil
}

// carryOut does one request.
func (s *server) carryOut(ctx context.Context, req Request) Response {
	resp := Response{ID: req.ID}
	var err error
	switch {
	case req.Op == OpRun:
		return run(ctx, req)
	case req.Op == OpList && s.opts.List != nil:
		return s.list(ctx, req)
	case req.Op == OpPut:
		err = boardfs.PutFile(string(req.Path), bytes.NewReader(req.Content),
			boardfs.PutOptions{Mode: req.Mode, ParentMode: req.ParentMode, AllowSetID: req.AllowSetID})
	case req.Op == OpRemove:
		err = boardfs.RemoveFile(string(req.Path))
	default:
		// The prefix is what a client recognises (unknownOp): keep it.
		want := fmt.Sprintf("%s, %s, %s or %s", OpRun, OpPut, OpRemove, OpCancel)
		if s.opts.List != nil {
			want = fmt.Sprintf("%s, %s, %s, %s or %s", OpRun, OpPut, OpRemove, OpList, OpCancel)
		}
		err = fmt.Errorf("unknown op %q (want %s)", req.Op, want)
	}
	if err != nil {
		resp.Error = err.Error()
		resp.Refused = errors.Is(err, boardfs.ErrRefused)
	}
	return resp
}

// list answers a list request with what opts.List produces, refusing
// one longer than the request's cap.
func (s *server) list(ctx context.Context, req Request) Response {
	resp := Response{ID: req.ID}
	limit := req.MaxOutput
	if limit <= 0 || limit > MaxOutput {
		limit = MaxOutput
	}
	out, err := s.opts.List(ctx)
	var ec interface{ ExitCode() int }
	switch {
	case err != nil:
		resp.Error = err.Error()
		if errors.As(err, &ec) && ec.ExitCode() > 0 {
			resp.Exit = ec.ExitCode()
		}
	case len(out) > limit:
		resp.Error = fmt.Sprintf("the listing is %d bytes, limit %d", len(out), limit)
		resp.Truncated = true
	default:
		resp.Stdout = out
	}
	return resp
}

// run executes req.Argv in its own process group with /dev/null as stdin.
// Cancelling ctx sends SIGTERM to the group, then SIGKILL after KillGrace.
func run(ctx context.Context, req Request) Response {
	resp := Response{ID: req.ID}
	argv := make([]string, len(req.Argv))
	for i, a := range req.Argv {
		argv[i] = string(a)
	}
	if len(argv) == 0 || argv[0] == "" || strings.HasPrefix(argv[0], "-") || strings.ContainsRune(strings.Join(argv, ""), 0) {
		resp.Error = fmt.Sprintf("bad argv %q", argv)
		return resp
	}
	limit := req.MaxOutput
	if limit <= 0 || limit > MaxOutput {
		limit = MaxOutput
	}
	stdout, stderr := &capped{max: limit}, &capped{max: limit}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child the command leaves behind holding stdout open does not
	// hold the answer for longer than this.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		resp.Error = err.Error()
		resp.Exit = 127
		return resp
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		pgid := cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(KillGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			resp.Exit = 128 + int(ws.Signal())
		} else {
			resp.Exit = ee.ExitCode()
		}
	default:
		resp.Error = err.Error()
		resp.Exit = -1
	}
	resp.Stdout, resp.Stderr = stdout.buf.Bytes(), stderr.buf.Bytes()
	resp.Truncated = stdout.over || stderr.over
	return resp
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.buf.Len(); n > room {
		c.over = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return n, nil
}

// Main is `herd board session`: ServeWith(opts) on stdin and stdout. It
// returns the exit status: 0 at a clean end, 1 otherwise (the reason on
// stderr).
func Main(stderr io.Writer, opts Options) int {
	if err := ServeWith(os.Stdin, os.Stdout, opts); err != nil {
		fmt.Fprintf(stderr, "herd board session: %v\n", err)
		return 1
	}
	return 0
}
