package raftstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/herd-dev/herd/api"
)

// The forwarding RPC: a follower sends a transaction to the leader over the
// authenticated transport (protocol byte protoForward) and gets the result.
// One request per connection. Each message is a 4-byte big-endian length
// followed by that many bytes of JSON.

// forwardOverhead is what a forwarded request may add to MaxTxnBytes.
const forwardOverhead = 64 << 10

// maxForwardTimeout caps how long the leader works on a forwarded request.
const maxForwardTimeout = time.Minute

// forwardRequest asks the leader to commit a transaction, or, with
// ReadIndex, for its read index (read.go).
type forwardRequest struct {
	Ops []Op `json:"ops,omitempty"`
	// RequestID is the transaction's request id (WithRequestID), if any.
	// A leader that predates it rejects a request carrying one as
	// invalid (unknown field) and applies nothing.
	RequestID string `json:"requestID,omitempty"`
	// ReadIndex asks for the index a linearizable read must wait for.
	ReadIndex bool `json:"readIndex,omitempty"`
	// TimeoutMillis is how long the follower will wait for the answer.
	TimeoutMillis int64 `json:"timeoutMillis"`
}

// forwardResponse is the leader's answer: the log index and the objects as
// stored (the read index, for a ReadIndex request), or an error.
type forwardResponse struct {
	Index   uint64          `json:"index,omitempty"`
	Objects []api.RawObject `json:"objects,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

// wireError carries an error across the RPC; Code names the sentinel it
// wraps so that errors.Is keeps working on the follower.
type wireError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// wireCodes maps sentinel errors to their codes on the wire.
var wireCodes = []struct {
	code string
	err  error
}{
	{"notFound", ErrNotFound},
	{"exists", ErrExists},
	{"conflict", ErrConflict},
	{"invalid", ErrInvalid},
	{"noLeader", ErrNoLeader},
	{"notLeader", ErrNotLeader},
	{"compacted", ErrCompacted},
	{"closed", ErrClosed},
	{"outcomeUnknown", ErrOutcomeUnknown},
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	for _, c := range wireCodes {
		if errors.Is(err, c.err) {
			return &wireError{Code: c.code, Message: err.Error()}
		}
	}
	return &wireError{Message: err.Error()}
}

func (w *wireError) toError() error {
	for _, c := range wireCodes {
		if w.Code == c.code {
			return &remoteError{msg: w.Message, sentinel: c.err}
		}
	}
	return &remoteError{msg: w.Message}
}

// remoteError is an error the leader returned: its message as the leader
// wrote it, wrapping the sentinel it named.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// errFrameTooLarge: a message's length prefix exceeds the limit.
var errFrameTooLarge = errors.New("raftstore: message too large")

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	bw.Write(hdr[:])
	bw.Write(b)
	return bw.Flush()
}

// readFrame reads one message of at most limit bytes into v.
func readFrame(r io.Reader, limit int, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(limit) {
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: decode: %v", ErrInvalid, err)
	}
	return nil
}

// serveForward handles one forwarding connection on the leader.
func (s *Store) serveForward(c net.Conn) {
	defer c.Close()
	remote := c.RemoteAddr().String()
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	var req forwardRequest
	if err := readFrame(c, s.cfg.MaxTxnBytes+forwardOverhead, &req); err != nil {
		s.log.Warn("bad forwarded request", "remote", remote, "err", err)
		if errors.Is(err, errFrameTooLarge) || errors.Is(err, ErrInvalid) {
			_ = c.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
			_ = writeFrame(c, forwardResponse{Error: toWire(fmt.Errorf("%w: forwarded request: %v", ErrInvalid, err))})
		}
		return
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxForwardTimeout {
		timeout = min(s.cfg.WriteTimeout, maxForwardTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stop := context.AfterFunc(s.closedCtx, cancel)
	defer stop()

	var resp forwardResponse
	switch {
	case s.isClosed() || !s.IsLeader():
		resp.Error = toWire(fmt.Errorf("%w: %s", ErrNotLeader, s.cfg.NodeID))
	case req.ReadIndex:
		index, err := s.readIndex(ctx)
		resp.Index, resp.Error = index, toWire(err)
	default:
		res, err := s.leaderTxn(ctx, req.Ops, req.RequestID)
		if err != nil {
			resp.Error = toWire(err)
		} else {
			resp.Index = res.Index
			resp.Objects = make([]api.RawObject, len(res.Objects))
			for i, o := range res.Objects {
				resp.Objects[i] = *o
			}
		}
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if err := writeFrame(c, resp); err != nil {
		s.log.Warn("forwarded request: writing response failed", "remote", remote, "err", err)
	}
}

// errRetry marks an attempt that certainly did not commit and may be
// retried (after a short backoff) while the context allows.
type errRetry struct{ err error }

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

// errLeaderMoved ends a forwarding attempt whose leader raft no longer
// names.
var errLeaderMoved = errors.New("raftstore: leader changed")

// forward sends ops, with request id id, to the leader at addr. Errors before the request was
// sent, and the leader's "not leader" answer, are wrapped in errRetry;
// others are final (ErrOutcomeUnknown: the write may or may not have
// committed).
func (s *Store) forward(ctx context.Context, addr string, ops []Op, id string) (uint64, []api.RawObject, error) {
	resp, err := s.call(ctx, addr, forwardRequest{Ops: ops, RequestID: id})
	if err != nil {
		return 0, nil, err
	}
	if len(resp.Objects) != len(ops) {
		return 0, nil, fmt.Errorf("raftstore: forward to leader %s: %d objects for %d ops", addr, len(resp.Objects), len(ops))
	}
	return resp.Index, resp.Objects, nil
}

// call sends req to the leader at addr and returns its answer. Errors
// before the request was sent, and the leader's "not leader" answer, are
// wrapped in errRetry; after it was sent the outcome is unknown
// (ErrOutcomeUnknown).
//
// The attempt follows raft's view of the leader: it gives up as soon as
// raft names another leader, or none while it is still connecting, so
// that a request whose leader vanished moves on to the new one at once
// instead of waiting on a peer that will never answer. Connecting is also
// bounded by the handshake timeout; the whole call by ctx.
func (s *Store) call(ctx context.Context, addr string, req forwardRequest) (forwardResponse, error) {
	timeout := s.cfg.WriteTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	req.TimeoutMillis = timeout.Milliseconds()
	var sent atomic.Bool
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go s.watchLeader(actx, func() bool {
		now, _ := s.raft.LeaderWithID()
		if string(now) == addr || (now == "" && sent.Load()) {
			return false
		}
		to := string(now)
		if to == "" {
			to = "none known"
		}
		cancel(fmt.Errorf("%w from %s to %s", errLeaderMoved, addr, to))
		return true
	})
	c, err := s.mux.dial(actx, addr, protoForward)
	if err != nil {
		if cause := context.Cause(actx); ctx.Err() == nil && errors.Is(cause, errLeaderMoved) {
			err = cause
		}
		return forwardResponse{}, &errRetry{fmt.Errorf("raftstore: forward to leader %s: %w", addr, err)}
	}
	defer c.Close()
	stop := context.AfterFunc(actx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	sent.Store(true)
	if err := writeFrame(c, req); err != nil {
		return forwardResponse{}, fmt.Errorf("%w: forward to leader %s: %w", ErrOutcomeUnknown, addr, s.attemptErr(ctx, actx, err))
	}
	var resp forwardResponse
	if err := readFrame(c, 4*s.cfg.MaxTxnBytes+forwardOverhead, &resp); err != nil {
		return forwardResponse{}, fmt.Errorf("%w: forward to leader %s: %w", ErrOutcomeUnknown, addr, s.attemptErr(ctx, actx, err))
	}
	if resp.Error != nil {
		err := resp.Error.toError()
		if errors.Is(err, ErrNotLeader) { // answered before anything entered the log
			return forwardResponse{}, &errRetry{err}
		}
		return forwardResponse{}, err
	}
	return resp, nil
}

// attemptErr returns why a forwarding attempt's I/O failed: the caller's
// context, the leader change that ended the attempt, or err itself.
func (s *Store) attemptErr(ctx, actx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case actx.Err() != nil:
		return context.Cause(actx)
	}
	return err
}

// watchLeader calls changed every time raft reports a leadership change
// until it returns true or ctx ends.
func (s *Store) watchLeader(ctx context.Context, changed func() bool) {
	for {
		wake := s.leaderChanged.wait()
		if changed() {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}
