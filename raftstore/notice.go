package raftstore

import (
	"time"

	"github.com/hashicorp/raft"
)

// Commit notices.
//
// A follower applies an entry once it learns that the entry committed, and
// it learns that only from the leader's next AppendEntries: hashicorp/raft
// sends one when new entries come, and otherwise every CommitTimeout. An
// idle leader paid for that timer with an RPC to every follower every
// 100–200 ms, new entries or not. Instead, the leader now tells the
// followers itself once a burst of writes ends: when no write has
// committed for commitNoticeDelay after the last one, it appends a raft
// barrier (an entry the FSM never sees), whose AppendEntries carries the
// commit index of every write before it. A follower so applies a write
// about one round trip after the leader did, as quickly as before, and
// CommitTimeout (Config) can be long: it only paces retries to a follower
// that failed. Within a burst every write's AppendEntries already carries
// the commit index of the writes before it, so a burst costs one barrier
// entry, not one per write.

// commitNoticeDelay is how long the leader waits after a write commits for
// another before it sends the barrier that tells followers.
const commitNoticeDelay = 5 * time.Millisecond

// noteCommit records that a write committed on this leader (leaderTxn).
// Cheap: it never blocks.
func (s *Store) noteCommit() {
	select {
	case s.committed <- struct{}{}:
	default:
	}
}

// noticeLoop sends a commit notice (a barrier) after every burst of
// writes that noteCommit reported, until the store closes.
func (s *Store) noticeLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.closedCtx.Done():
			return
		case <-s.committed:
		}
		if !s.quietFor(commitNoticeDelay) {
			return
		}
		if s.raft.State() != raft.Leader {
			continue // the new leader's own entries tell the followers
		}
		if err := s.waitFuture(s.closedCtx, s.raft.Barrier(s.cfg.WriteTimeout)); err != nil && !s.isClosed() {
			s.log.Debug("commit notice failed", "err", err)
		}
	}
}

// quietFor waits until no write has committed for d, restarting the wait
// at every commit. It reports false when the store closed meanwhile.
func (s *Store) quietFor(d time.Duration) bool {
	for {
		t := s.clock.NewTimer(d)
		select {
		case <-s.closedCtx.Done():
			t.Stop()
			return false
		case <-s.committed:
			t.Stop()
		case <-t.C():
			return true
		}
	}
}
