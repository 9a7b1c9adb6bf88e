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
// to twice that). With the 600 ms a small fleet wants for failover that is
// an RPC to every follower every 60–120 ms, the largest part of an idle
// leader's CPU (BENCHMARKS.md "Idle agents on the lab"). So when
// Config.HeartbeatInterval is set, raft runs with a calm timeout,
// 10×HeartbeatInterval (1.5 s by default: heartbeats every 150–300 ms),
// and the store watches the leader's silence itself. When the silence
// reaches Config.HeartbeatTimeout, stretched by a random 0–50 % per silence so
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
//
// A second opinion. Heartbeats are the only Raft traffic of an idle
// cluster (the leader's commit notices, notice.go, let CommitTimeout be
// long), and each rides one TCP connection: on a lossy link one lost
// segment holds the next heartbeats up for a retransmission (≥ 200 ms),
// and a follower's silence can pass the threshold while the leader is
// fine. So with Config.LeaderAnswers set, a follower asks, from 150 ms
// before the threshold and every 100 ms while the silence lasts, whether
// the leader answers by other means (the agent pings its gossip member
// over UDP, twice at once). An answer to a question asked during this
// silence holds the election back for 250 ms after it was asked; no
// answer by the threshold, or a silence past 3×HeartbeatTimeout, starts
// it as before. A leader that lost power answers nothing, so its
// followers elect as quickly as without the question; one whose agent
// answers gossip but whose Raft is wedged is replaced after the longer
// silence.

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

	// Second opinions (withOpinions; askLead 0: none).
	askLead  time.Duration // ask this long before the threshold
	askEvery time.Duration // at most one question per this, while silent
	vouchFor time.Duration // an answer holds the election back this long after its question
	patience time.Duration // no answer holds it back past this silence
	asked    time.Time     // when the last question went
	inflight bool          // a question awaits its answer
	answer   time.Time     // when the last question the leader answered went
}

func newSuspicion(after time.Duration, opened time.Time, jitter func() time.Duration) *suspicion {
	if jitter == nil {
		jitter = func() time.Duration { return rand.N(after/2 + 1) }
	}
	return &suspicion{after: after, poll: max(after/5, time.Millisecond), jitter: jitter, opened: opened}
}

// withOpinions makes s ask for a second opinion before a silence starts
// an election (Config.LeaderAnswers): from askLead before the threshold,
// at most every askEvery; an answer to a question asked during the
// silence holds the election back for vouchFor after it was asked, up to
// a silence of patience.
func (s *suspicion) withOpinions(askLead, askEvery, vouchFor, patience time.Duration) *suspicion {
	s.askLead, s.askEvery, s.vouchFor, s.patience = askLead, askEvery, vouchFor, patience
	return s
}

// step is one look at the leader: whether this server leads, whether it
// knows a leader, when it last heard from one (zero: never) and the time
// now. It returns whether raft's timeouts must change and to which (quick
// or calm), whether to ask for a second opinion now (answered reports
// the answer), and when to look next.
func (s *suspicion) step(leading, leaderKnown bool, lastContact, now time.Time) (change, quick, ask bool, next time.Duration) {
	if leading {
		change = s.quick
		s.quick = false
		return change, false, false, leaderLook
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
			return true, false, false, s.threshold - silence
		}
		return false, true, false, s.poll
	}
	if silence >= s.threshold && !s.held(now, silence) {
		s.quick = true
		return true, true, false, s.poll
	}
	ask = s.wantAsk(leaderKnown, now, silence)
	return false, false, ask, s.nextLook(now, silence)
}

// held reports whether the leader answered a question asked during this
// silence recently enough to hold the election back.
func (s *suspicion) held(now time.Time, silence time.Duration) bool {
	return s.askLead > 0 && silence < s.patience && !s.answer.IsZero() &&
		!s.answer.Before(s.since) && now.Sub(s.answer) < s.vouchFor
}

// wantAsk reports whether to ask for a second opinion now, and notes the
// question.
func (s *suspicion) wantAsk(leaderKnown bool, now time.Time, silence time.Duration) bool {
	if s.askLead == 0 || !leaderKnown || s.inflight || silence < s.threshold-s.askLead || silence >= s.patience {
		return false
	}
	if !s.asked.IsZero() && !s.asked.Before(s.since) && now.Sub(s.asked) < s.askEvery {
		return false
	}
	s.asked, s.inflight = now, true
	return true
}

// answered records the answer to the question asked at asked.
func (s *suspicion) answered(asked time.Time, ok bool) {
	s.inflight = false
	if ok && asked.After(s.answer) {
		s.answer = asked
	}
}

// nextLook is when a calm look must come again: at the threshold, and
// with second opinions when the next question is due, or, while an
// answer holds the election back, when it lapses (an answer arriving
// wakes the loop itself).
func (s *suspicion) nextLook(now time.Time, silence time.Duration) time.Duration {
	next := s.threshold - silence
	if s.askLead == 0 {
		return next
	}
	if silence >= s.threshold { // held
		next = min(s.vouchFor-now.Sub(s.answer), s.patience-silence)
	}
	if due := s.threshold - s.askLead - silence; due > 0 {
		next = min(next, due)
	} else if !s.inflight {
		next = min(next, s.askEvery-now.Sub(s.asked))
	}
	return max(next, time.Millisecond)
}

// opinionTimings are the second opinions' timings for a HeartbeatTimeout
// of after: questions from 150 ms before the threshold (a gossip ping is
// answered within a millisecond on a LAN, or given up after 125 ms), one
// every 100 ms while the silence lasts, each yes good for 250 ms, and no
// yes holds an election back past three times after.
func opinionTimings(after time.Duration) (askLead, askEvery, vouchFor, patience time.Duration) {
	return min(150*time.Millisecond, after/2), 100 * time.Millisecond, 250 * time.Millisecond, 3 * after
}

// leaderLook is how long a leader waits before it looks again: the loop
// wakes when raft reports another leader (Store.leaderChanged), so this
// is only a safety net.
const leaderLook = time.Minute

// opinion is the answer to a second opinion asked at asked.
type opinion struct {
	asked time.Time
	ok    bool
}

// suspectLoop runs sp against raft until the store closes.
func (s *Store) suspectLoop(sp *suspicion) {
	defer s.wg.Done()
	t := time.NewTimer(sp.after)
	defer t.Stop()
	answers := make(chan opinion, 1)
	changed := s.leaderChanged.wait()
	for {
		select {
		case <-t.C:
		case a := <-answers:
			sp.answered(a.asked, a.ok)
			if a.ok {
				s.silencesHeld.Add(1)
			}
		case <-changed:
		case <-s.closedCtx.Done():
			return
		}
		changed = s.leaderChanged.wait() // before the look: no change slips between
		id, _ := s.Leader()
		last := s.raft.LastContact()
		now := time.Now()
		change, quick, ask, next := sp.step(s.raft.State() == raft.Leader, id != "", last, now)
		if change {
			s.setQuickTimeouts(quick, last)
		}
		if ask {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				answers <- opinion{asked: now, ok: s.cfg.LeaderAnswers(id)}
			}()
		}
		t.Reset(next) // go ≥ 1.23: no stale tick survives a Reset
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
