package boardsession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ErrUnknownOp: the server does not know the request's operation (a herd
// on the board from before it); nothing was done. The client remembers
// it for the session's life and refuses that op at once afterwards.
var ErrUnknownOp = errors.New("boardsession: operation unknown to the board's session")

// ErrClosed: the session ended (closed, or its stream broke) before the
// answer came; a run may or may not have happened.
var ErrClosed = errors.New("boardsession: session closed")

// Client sends requests to a Serve at the other end of a stream pair.
// Its methods may be called concurrently.
type Client struct {
	wmu sync.Mutex
	w   io.WriteCloser

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan Response
	unknown map[string]bool // ops the server answered as unknown
	err     error           // why the session ended; set once
	done    chan struct{}
}

// NewClient reads the server's Hello from r and returns a client that
// writes requests to w. It fails when r ends or holds something else
// first (a board without the session); the caller bounds the wait (by
// closing the stream) since reading blocks.
func NewClient(r io.Reader, w io.WriteCloser) (*Client, error) {
	var h Hello
	if err := readFrame(r, &h); err != nil {
		return nil, fmt.Errorf("boardsession: no hello: %w", err)
	}
	if h.Protocol != Protocol {
		return nil, fmt.Errorf("boardsession: server speaks %q, want %q", h.Protocol, Protocol)
	}
	c := &Client{w: w, pending: map[uint64]chan Response{}, unknown: map[string]bool{}, done: make(chan struct{})}
	go c.read(r)
	return c, nil
}

// read delivers answers until r ends.
func (c *Client) read(r io.Reader) {
	for {
		var resp Response
		if err := readFrame(r, &resp); err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
}

// fail ends the session with err (the first reason wins).
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	c.mu.Unlock()
	c.w.Close()
}

// Done is closed when the session has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the session ended, nil while it lasts.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the session: the server cancels what still runs.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	return nil
}

// Do sends req (its ID is assigned here) and waits for the answer. When
// ctx ends first, a run is cancelled on the board and Do returns
// ctx.Err() after waiting at most grace() (asked once ctx has ended; 0:
// no wait) for the run to end (a list's likewise). A session that
// ends first gives an error wrapping ErrClosed (or the stream's error).
// An op the server does not know gives ErrUnknownOp, from then on
// without asking.
func (c *Client) Do(ctx context.Context, req Request, grace func() time.Duration) (Response, error) {
	ch := make(chan Response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return Response{}, closedErr(err)
	}
	if c.unknown[req.Op] {
		c.mu.Unlock()
		return Response{}, fmt.Errorf("%w: %q", ErrUnknownOp, req.Op)
	}
	c.next++
	req.ID = c.next
	c.pending[req.ID] = ch
	c.mu.Unlock()
	if err := c.send(req); err != nil {
		c.forget(req.ID)
		c.fail(err)
		return Response{}, closedErr(err)
	}
	select {
	case resp := <-ch:
		if unknownOp(req.Op, resp) {
			c.mu.Lock()
			c.unknown[req.Op] = true
			c.mu.Unlock()
			return resp, fmt.Errorf("%w: %s", ErrUnknownOp, resp.Error)
		}
		return resp, nil
	case <-c.done:
		c.forget(req.ID)
		return Response{}, closedErr(c.Err())
	case <-ctx.Done():
	}
	if req.Op == OpRun || req.Op == OpList {
		if err := c.send(Request{ID: req.ID, Op: OpCancel}); err == nil {
			t := time.NewTimer(grace())
			defer t.Stop()
			select {
			case <-ch:
			case <-c.done:
			case <-t.C:
			}
		}
	}
	c.forget(req.ID)
	return Response{}, ctx.Err()
}

func (c *Client) send(req Request) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return writeFrame(c.w, req)
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func closedErr(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}

// unknownOp reports whether resp is a server's refusal of op as unknown:
// what every version of Serve answers to an op it does not know.
func unknownOp(op string, resp Response) bool {
	return strings.HasPrefix(resp.Error, fmt.Sprintf("unknown op %q ", op))
}
