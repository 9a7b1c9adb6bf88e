package sshexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/herd-dev/herd/units/sshexec/boardsession"
)

// boardSessionCommand is the exec request that starts the board session:
// boardsession.Command, or the test binary Config.BoardHelper names.
func (e *Executor) boardSessionCommand() string {
	if e.cfg.BoardHelper == "" || e.cfg.BoardHelper == DefaultBoardHelper {
		return boardsession.Command
	}
	return e.cfg.BoardHelper + " board session"
}

// boardSession returns c's board session, starting it on first use, or
// nil when the board has none: Config.BoardSession off, or a board whose
// herd or sudoers predate it (no Hello within DialTimeout). A board
// without one is remembered for the connection's life; a session that
// ended is started again on next use. The start gives up with ctx (the
// caller's error is ctx's; nothing is remembered): a board that lost
// power while its connection still looks open does not hold up a witness
// until the keepalives close it.
func (e *Executor) boardSession(ctx context.Context, c *conn) (*boardsession.Client, error) {
	if !e.cfg.BoardSession {
		return nil, nil
	}
	c.bsMu.Lock()
	defer c.bsMu.Unlock()
	if c.bsNone {
		return nil, nil
	}
	if c.bs != nil {
		select {
		case <-c.bs.Done():
			c.bs = nil
		default:
			return c.bs, nil
		}
	}
	type result struct {
		bs  *boardsession.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		bs, err := e.startBoardSession(c)
		ch <- result{bs, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.bs != nil {
				r.bs.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		c.bsNone = true
		e.log.Info("no herd board session on this board; running each command through the wrapper", "node", c.node, "err", r.err)
		return nil, nil
	}
	c.bs = r.bs
	return r.bs, nil
}

// startBoardSession opens the session channel and waits for the Hello
// (at most DialTimeout once the channel is open).
func (e *Executor) startBoardSession(c *conn) (*boardsession.Client, error) {
	s, stdin, stdout, stderr, err := startPiped(c.client, e.boardSessionCommand())
	if err != nil {
		return nil, err
	}
	type result struct {
		bs  *boardsession.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		bs, err := boardsession.NewClient(stdout, stdin)
		ch <- result{bs, err}
	}()
	t := time.NewTimer(e.cfg.DialTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			s.Close()
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return nil, fmt.Errorf("%w (board said: %s)", r.err, msg)
			}
			return nil, r.err
		}
		go func() {
			<-r.bs.Done()
			s.Close()
		}()
		return r.bs, nil
	case <-t.C:
		s.Close()
		return nil, fmt.Errorf("no hello within %s", e.cfg.DialTimeout)
	}
}

// Warm makes node's next operation cheap: it dials the board (unless
// connected) and, with Config.BoardSession, starts its board session. It
// runs nothing on the board. Safe to call concurrently with node's other
// operations; they wait for the dial or the session start it began.
func (e *Executor) Warm(ctx context.Context, node string) error {
	n, err := e.node(node)
	if err != nil {
		return err
	}
	c, err := e.connect(ctx, n)
	if err != nil {
		return err
	}
	_, err = e.boardSession(ctx, c)
	return err
}

// runSession runs argv through the board session. ok is false when the
// board has none: the caller uses the wrapper.
func (e *Executor) runSession(ctx context.Context, node string, argv []string) (res Result, err error, ok bool) {
	if !e.cfg.BoardSession {
		return Result{}, nil, false
	}
	if _, err := encodeArgv(argv); err != nil {
		return Result{}, err, true
	}
	resp, err, ok := e.doSession(ctx, node, boardsession.Run(argv, e.cfg.MaxOutputBytes))
	if !ok || err != nil {
		if err != nil {
			err = fmt.Errorf("%w: %q", err, argv[0])
		}
		return Result{}, err, ok
	}
	res = Result{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitStatus: resp.Exit}
	switch {
	case resp.Error != "" && resp.Exit == 127:
		// Not started (not found, not executable): what a shell says.
		res.Stderr = append(res.Stderr, []byte(resp.Error+"\n")...)
	case resp.Error != "":
		return res, fmt.Errorf("sshexec: node %s: %q: %s", node, argv[0], resp.Error), true
	case resp.Truncated:
		return res, fmt.Errorf("%w: node %s: %q: kept the first %d bytes of each stream", ErrOutputTooLarge, node, argv[0], e.cfg.MaxOutputBytes), true
	}
	return res, nil, true
}

// fileSession writes or removes a file through the board session (req is
// a put or an rm). ok is false when the board has none.
func (e *Executor) fileSession(ctx context.Context, node string, req boardsession.Request) (err error, ok bool) {
	if !e.cfg.BoardSession {
		return nil, false
	}
	resp, err, ok := e.doSession(ctx, node, req)
	if !ok || err != nil {
		return err, ok
	}
	switch {
	case resp.Refused:
		return fmt.Errorf("%w: node %s: %s", ErrRefused, node, strings.TrimPrefix(resp.Error, "boardfs: ")), true
	case resp.Error != "":
		return fmt.Errorf("sshexec: node %s: %s %s: %s", node, req.Op, string(req.Path), resp.Error), true
	}
	return nil, true
}

// listSession asks node's board session for the listing of its herd
// units (ListLocal there). ok is false when the board has no session, or
// one from before the list op: the caller runs ShowUnitsArgv.
func (e *Executor) listSession(ctx context.Context, node string) (out []byte, err error, ok bool) {
	if !e.cfg.BoardSession {
		return nil, nil, false
	}
	resp, err, ok := e.doSession(ctx, node, boardsession.List(e.cfg.MaxOutputBytes))
	if !ok || err != nil {
		return nil, err, ok
	}
	switch {
	case resp.Exit != 0:
		// A systemctl of the listing failed: as the script's status.
		return nil, &ExitError{Node: node, Argv: []string{"board session", boardsession.OpList}, Status: resp.Exit, Stderr: []byte(resp.Error)}, true
	case resp.Truncated:
		return nil, fmt.Errorf("%w: node %s: list: %s", ErrOutputTooLarge, node, resp.Error), true
	case resp.Error != "":
		return nil, fmt.Errorf("sshexec: node %s: list: %s", node, resp.Error), true
	}
	return resp.Stdout, nil, true
}

// doSession sends req on node's board session, holding one of the node's
// MaxSessionsPerNode slots meanwhile. ok is false when the board has no
// session. A session that ends under the request is ErrConnectionLost: the
// request may or may not have been carried out. An op the board's
// session does not know (an older herd) is ok false too.
func (e *Executor) doSession(ctx context.Context, node string, req boardsession.Request) (resp boardsession.Response, err error, ok bool) {
	n, err := e.node(node)
	if err != nil {
		return resp, err, true
	}
	c, err := e.connect(ctx, n)
	if err != nil {
		return resp, err, true
	}
	bs, err := e.boardSession(ctx, c)
	if err != nil {
		return resp, err, true
	}
	if bs == nil {
		return resp, nil, false
	}
	select {
	case n.sem <- struct{}{}:
	case <-ctx.Done():
		return resp, ctx.Err(), true
	}
	open := e.sessions.Add(1)
	for {
		p := e.peakSessions.Load()
		if open <= p || e.peakSessions.CompareAndSwap(p, open) {
			break
		}
	}
	defer func() {
		e.sessions.Add(-1)
		<-n.sem
	}()
	resp, err = bs.Do(ctx, req, func() time.Duration { return e.graceFor(node) })
	switch {
	case err == nil:
		return resp, nil, true
	case errors.Is(err, boardsession.ErrUnknownOp):
		// An older herd on the board: the caller does it another way.
		return resp, nil, false
	case ctx.Err() != nil:
		return resp, ctx.Err(), true
	case errors.Is(err, boardsession.ErrClosed):
		return resp, fmt.Errorf("%w: node %s: board session: %v", ErrConnectionLost, node, err), true
	}
	return resp, fmt.Errorf("sshexec: node %s: board session: %w", node, err), true
}
