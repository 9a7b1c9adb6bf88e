package raftstore

import (
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
)

// Calm heartbeats, quick suspicion.
//
// hashicorp/raft ties the leader's heartbeat period to the followers'
// patience: it sends a heartbeat every HeartbeatTimeout/10 (randomised up
// to twice that). With the 500 ms a small fleet wants for failover that is
// an RPC to every follower every 50–100 ms, the largest part of an idle
// leader's CPU (BENCHMARKS.md "Idle agents on the lab"). So when
// Config.HeartbeatInterval is set, raft runs with a calm timeout,
// 10×HeartbeatInterval (1.5 s by default: heartbeats every 150–300 ms,
// besides the AppendEntries the leader sends every CommitTimeout), and
// the store watches the leader's silence itself. When the silence reaches
// Config.HeartbeatTimeout, stretched by a random 0–50 % per silence so
// that followers do not all start at once (raft itself stretches by
// 0–100 %), the store reloads raft's timeouts to the quick ones,
// HeartbeatTimeout and ElectionTimeout: raft's follower loop looks at
// once, finds the silence past its new timeout and starts an election,
// with pre-vote, so a follower that is merely cut off cannot depose a
// healthy leader. Once a leader is heard from again, or this server
// leads, the calm timeouts come back (a leader's heartbeat period reads
// the timeout before every heartbeat). A silence counts from the last
// contact with a leader, or from Open for a server that has had none, so
// a fresh or restarted cluster elects as quickly.

// suspicion decides when raft's timeouts change. Pure; suspectLoop is its
// shell.
type suspicion struct {
	after  time.Duration        // Config.HeartbeatTimeout: the silence that starts an election
	poll   time.Duration        // how often to look while the timeouts are quick
	jitter func() time.Duration // in [0, after/2): this silence's stretch

	opened    time.Time     // the silence of a server that never heard a leader counts from here
	quick     bool          // raft has the quick timeouts now
	since     time.Time     // the contact the current threshold was drawn for
	threshold time.Duration // the silence that starts an election this time
}

func newSuspicion(after time.Duration, opened time.Time, jitter func() time.Duration) *suspicion {
	if jitter == nil {
		jitter = func() time.Duration { return rand.N(after/2 + 1) }
	}
	return &suspicion{after: after, poll: max(after/5, time.Millisecond), jitter: jitter, opened: opened}
}

// step is one look at the leader: whether this server leads, whether it
// knows a leader, when it last heard from one (zero: never) and the time
// now. It returns whether raft's timeouts must change and to which (quick
// or calm), and when to look next.
func (s *suspicion) step(leading, leaderKnown bool, lastContact, now time.Time) (change, quick bool, next time.Duration) {
	if leading {
		change = s.quick
		s.quick = false
		return change, false, s.after
	}
	ref := lastContact
	if ref.IsZero() || ref.Before(s.opened) {
		ref = s.opened
	}
	if !ref.Equal(s.since) {
		s.since = ref
		s.threshold = s.after + s.jitter()
	}
	silence := now.Sub(ref)
	if s.quick {
		if leaderKnown && silence < s.after {
			s.quick = false
			return true, false, s.threshold - silence
		}
		return false, true, s.poll
	}
	if silence >= s.threshold {
		s.quick = true
		return true, true, s.poll
	}
	return false, false, s.threshold - silence
}

// suspectLoop runs sp against raft until the store closes.
func (s *Store) suspectLoop(sp *suspicion) {
	defer s.wg.Done()
	t := time.NewTimer(sp.after)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.closedCtx.Done():
			return
		}
		id, _ := s.Leader()
		last := s.raft.LastContact()
		change, quick, next := sp.step(s.raft.State() == raft.Leader, id != "", last, time.Now())
		if change {
			s.setQuickTimeouts(quick, last)
		}
		t.Reset(next)
	}
}

// setQuickTimeouts gives raft the quick timeouts (the configured
// HeartbeatTimeout and ElectionTimeout) or the calm ones.
func (s *Store) setQuickTimeouts(quick bool, lastContact time.Time) {
	rc := s.raft.ReloadableConfig()
	hb, el := s.cfg.calmTimeouts()
	if quick {
		hb, el = s.cfg.HeartbeatTimeout, s.cfg.ElectionTimeout
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = hb, el
	if err := s.raft.ReloadConfig(rc); err != nil {
		s.log.Error("raft timeouts not changed", "quick", quick, "err", err)
		return
	}
	if quick {
		s.suspicions.Add(1)
		silence := "never heard one"
		if !lastContact.IsZero() {
			silence = time.Since(lastContact).Round(time.Millisecond).String()
		}
		s.log.Info("leader silent: quick Raft timeouts, starting an election", "silence", silence, "heartbeatTimeout", hb)
		return
	}
	s.log.Debug("leader heard: calm Raft timeouts again", "heartbeatTimeout", hb)
}
