package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Linearizable reads (read index, as etcd and Consul do them): the leader
// answers a read only once it has applied everything committed before its
// term (the barrier it runs on winning an election) and a quorum has
// confirmed it is still leader (VerifyLeader, one heartbeat round). The
// read index is the last entry at or below the leader's commit index that
// the FSM applies: it covers every write acknowledged anywhere before the
// read began, and every entry any follower may already have applied (a
// follower can apply a committed entry before the leader's own FSM does,
// so the leader's applied index is not enough). The leader waits until
// its copy has applied the read index; a follower asks the leader for it
// over the forwarding RPC, waits the same way, and reads locally.

// ReadBarrier waits until the local copy holds every write acknowledged,
// through any server, before the call: a Get or List after it returns is
// linearizable. On the leader it costs a heartbeat round to a quorum; on a
// follower a round trip to the leader plus the replication delay. Without
// a leader it waits for one until ctx ends (or WriteTimeout, if ctx has no
// deadline) and then fails with ErrNoLeader. A deposed leader (frozen,
// partitioned) cannot pass it: it fails or follows the new leader.
//
// Only while the leader runs a version without read indexes (a rolling
// upgrade) does a follower's ReadBarrier return at once, with a warning:
// its reads are then local, as they were before.
func (s *Store) ReadBarrier(ctx context.Context) error {
	if s.isClosed() {
		return ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	var index uint64
	err := s.withLeader(ctx, func() error {
		var err error
		index, err = s.readIndex(ctx)
		return err
	}, func(addr string) error {
		resp, err := s.call(ctx, addr, forwardRequest{ReadIndex: true})
		if errors.Is(err, ErrInvalid) {
			// A leader from before read indexes (during a rolling
			// upgrade) refuses the request: read the local copy, as
			// every read did then.
			s.log.Warn("leader does not serve read indexes (older version?): reading the local copy", "leader", addr, "err", err)
			index = 0
			return nil
		}
		if err != nil {
			var retry *errRetry
			if !errors.As(err, &retry) && !errors.Is(err, ErrInvalid) && ctx.Err() == nil {
				// Asking is idempotent: whatever cut the call short,
				// ask again.
				err = &errRetry{err}
			}
			return err
		}
		index = resp.Index
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.hub.waitApplied(ctx, index); err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		return fmt.Errorf("%w: read barrier: waiting to apply index %d: %w", ErrNoLeader, index, err)
	}
	return nil
}

// VerifyLeader returns nil if this server is the leader and has just
// confirmed it with a quorum, after applying everything committed before
// its term; ErrNotLeader otherwise (a leader frozen or cut off, and then
// deposed, learns it here even before raft tells it).
func (s *Store) VerifyLeader(ctx context.Context) error {
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	_, err := s.readIndex(ctx)
	var retry *errRetry
	if errors.As(err, &retry) {
		err = retry.err
	}
	return err
}

// readIndex returns the index a linearizable read must wait for: the
// last command committed (readTarget), which this server, the leader, may
// not have applied yet. Errors that say this server is not (or not yet)
// the leader are wrapped in errRetry.
func (s *Store) readIndex(ctx context.Context) (uint64, error) {
	term := s.raft.CurrentTerm()
	if s.raft.State() != raft.Leader || s.readyTerm.Load() != term {
		return 0, &errRetry{fmt.Errorf("%w: %s is not a leader that has caught up in term %d", ErrNotLeader, s.cfg.NodeID, term)}
	}
	index := s.readTarget()
	for range verifyRounds(s.voters()) {
		switch err := s.waitFuture(ctx, s.raft.VerifyLeader()); {
		case err == nil:
		case ctx.Err() != nil:
			return 0, fmt.Errorf("%w: verify leadership: %w", ErrNoLeader, ctx.Err())
		case errors.Is(err, raft.ErrRaftShutdown):
			return 0, ErrClosed
		default:
			return 0, &errRetry{fmt.Errorf("%w: %s: verify leadership: %v", ErrNotLeader, s.cfg.NodeID, err)}
		}
	}
	if s.raft.CurrentTerm() != term { // lost and won again meanwhile
		return 0, &errRetry{fmt.Errorf("%w: %s: term changed while verifying", ErrNotLeader, s.cfg.NodeID)}
	}
	return index, nil
}

// verifyRounds is how many VerifyLeader calls, one after the other, a
// read needs among voters voting servers. hashicorp/raft counts a
// follower's answer to any heartbeat or append in flight when the answer
// arrives, including one sent before VerifyLeader was called: after a
// pause of the leader (SIGSTOP, a stalled board), an answer sent by a
// follower before the pause, when it still followed this leader, can
// confirm a leader deposed meanwhile, and the read would be stale (seen by
// TestLinearizable). Each follower has at most two requests of this
// leader in flight (its heartbeat and its replication; no pipelining), and
// an answer votes only in the verifications pending when it arrives. With
// F followers and a quorum of Q, stale answers can satisfy at most
// 2F/(Q-1) verifications in a row, so one more than that is satisfied
// only by answers to requests sent after the read began. On a live leader
// each round is one heartbeat round trip.
func verifyRounds(voters int) int {
	q := voters/2 + 1
	if voters <= 1 || q <= 1 {
		return 1
	}
	return 2*(voters-1)/(q-1) + 1
}

// voters is the number of voters in the latest configuration (at least 1).
func (s *Store) voters() int {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return 1
	}
	n := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			n++
		}
	}
	return max(n, 1)
}

// readTarget returns the index of the last command (an entry the FSM
// applies) at or below raft's commit index. Raft's own entries (the
// election's no-op, barriers, configuration changes) never reach the FSM:
// waiting for one of those would never end. An entry no longer in the log
// was compacted into a snapshot, so every command up to it is applied.
func (s *Store) readTarget() uint64 {
	applied := s.fsm.appliedIndex()
	var l raft.Log
	for i := s.raft.CommitIndex(); i > applied; i-- {
		if err := s.logs.GetLog(i, &l); err != nil {
			break
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return applied
}

// withLeader runs onLeader on the leader, or onFollower with the leader's
// address elsewhere, until one returns something other than errRetry,
// re-reading raft's leader after each retry (woken by leadership changes,
// with a short backoff). When ctx ends it fails with ErrNoLeader.
func (s *Store) withLeader(ctx context.Context, onLeader func() error, onFollower func(addr string) error) error {
	backoff := 10 * time.Millisecond
	for {
		var err error
		if s.raft.State() == raft.Leader {
			err = onLeader()
		} else if addr, _ := s.raft.LeaderWithID(); addr != "" {
			err = onFollower(string(addr))
		} else {
			err = &errRetry{ErrNoLeader}
		}
		var retry *errRetry
		if !errors.As(err, &retry) {
			return err
		}
		wake := s.leaderChanged.wait()
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if s.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("%w: %w (last attempt: %v)", ErrNoLeader, ctx.Err(), retry.err)
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// VerifiedLeader returns the leader's ID and address once that leader has
// confirmed its leadership with a quorum (this server itself, or the one
// a follower asked for a read index), so that a deposed leader is never
// named. It fails like ReadBarrier when no leader answers before ctx ends.
func (s *Store) VerifiedLeader(ctx context.Context) (id, addr string, err error) {
	if s.isClosed() {
		return "", "", ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	err = s.withLeader(ctx, func() error {
		if _, err := s.readIndex(ctx); err != nil {
			return err
		}
		id, addr = s.cfg.NodeID, s.Addr()
		return nil
	}, func(leader string) error {
		// A leader from before read indexes refuses the request as
		// invalid: name it unverified, as every status did then.
		if _, err := s.call(ctx, leader, forwardRequest{ReadIndex: true}); err != nil && !errors.Is(err, ErrInvalid) {
			var retry *errRetry
			if !errors.As(err, &retry) && ctx.Err() == nil {
				err = &errRetry{err}
			}
			return err
		}
		if a, i := s.raft.LeaderWithID(); string(a) == leader {
			id, addr = string(i), leader
			return nil
		}
		return &errRetry{fmt.Errorf("%w: leader changed while verifying", ErrNoLeader)}
	})
	if err != nil {
		return "", "", err
	}
	return id, addr, nil
}
