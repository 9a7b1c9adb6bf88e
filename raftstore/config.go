package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/herd-dev/herd/internal/clock"
)

// ServerKeySize is the length in bytes of a server key.
const ServerKeySize = 32

// Config configures a Store. Start from DefaultConfig and fill in NodeID,
// BindAddr and ServerKey.
//
// The Raft timings are tuned for a LAN of small boards where a dead leader
// must be replaced in about one to two seconds:
//
//   - a follower that hears nothing from the leader for a random time in
//     [HeartbeatTimeout, 1.5×HeartbeatTimeout] (0.6–0.9 s by default)
//     starts an election (with pre-vote, so a flapping node cannot depose
//     a healthy leader), unless a second opinion finds the leader still
//     answering (Config.LeaderAnswers, suspect.go); an election round
//     takes a LAN round trip and an fsync, and a split vote retries after
//     [ElectionTimeout, 2×ElectionTimeout]. The store itself watches the silence and tells
//     raft (suspect.go), so that the heartbeats need not come ten times
//     per timeout, as hashicorp/raft otherwise sends them.
//   - the leader sends heartbeats every [HeartbeatInterval,
//     2×HeartbeatInterval] (150–300 ms); they keep the followers' patience,
//     also while a slow disk holds the appends up. Idle, they are the
//     leader's main Raft cost (BENCHMARKS.md "Idle agents on the lab").
//     A follower learns that the last write of a burst committed from the
//     commit notice the leader sends right after the burst (notice.go),
//     so its reads (ReadBarrier) and DNS answers see the write about one
//     round trip after the leader does; the AppendEntries hashicorp/raft
//     sends every [CommitTimeout, 2×CommitTimeout] (1–2 s), new entries
//     or not, are only a fallback and pace retries to a failed follower.
//   - a leader that cannot reach a quorum for LeaderLeaseTimeout (600 ms,
//     as long as a follower's patience, so the lease ends before anyone
//     else can lead) steps down, so a partitioned leader stops accepting
//     writes quickly. The heartbeats are its only contacts while idle: at
//     10 % loss one lost segment holds a follower's heartbeats up for a
//     TCP retransmission (≥ 200 ms), and the 400 ms lease of before
//     deposed a healthy leader twice a minute (BENCHMARKS.md).
//
// Raise the timeouts for boards on Wi-Fi or under heavy load, where a
// spurious election costs more than a slower failover.
type Config struct {
	// NodeID is this server's stable Raft ID (usually the board's name).
	NodeID string
	// DataDir holds the Raft log and stable store (DataDir/raft/wal, or
	// DataDir/raft/raft.db with LogStore "bolt") and the snapshots
	// (DataDir/raft/snapshots). Empty means in-memory: nothing survives
	// Close.
	DataDir string
	// LogStore is the on-disk log and stable store: LogStoreWAL (the
	// default when empty; raft-wal, an append-only log) or LogStoreBolt
	// (raft-boltdb). Opening a data dir that holds the other one's data
	// migrates it (migrate.go). See BENCHMARKS.md "Raft log store" for
	// the choice.
	LogStore string
	// BindAddr is the TCP host:port the Raft transport listens on. Port 0
	// picks a free port.
	BindAddr string
	// AdvertiseAddr is the host:port other servers dial. Empty means
	// BindAddr (which must then name a specific host); port 0 means the
	// port actually bound.
	AdvertiseAddr string
	// ServerKey is the 32-byte secret only servers hold: the Raft and
	// forwarding TLS identity is derived from it. Servers prove to each
	// other that they hold it; nobody without it (a worker with only the
	// gossip key, a LAN device) can send a Raft RPC or a forwarded write.
	ServerKey []byte
	// AcceptServerKeys are further server keys whose derived identities
	// are accepted from peers, but never presented: the old or the new
	// key while a server key is rotated.
	AcceptServerKeys [][]byte
	// Logger receives the store's and Raft's logs. Nil discards them.
	Logger *slog.Logger
	// Clock stamps new objects' Created time on the leader. Nil means
	// clock.RealClock().
	Clock clock.Clock

	// HeartbeatTimeout: a follower without contact from the leader for this
	// long (randomised up to 1.5× as long) starts an election.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval: the leader sends each follower a heartbeat every
	// [HeartbeatInterval, 2×HeartbeatInterval]. Below HeartbeatTimeout/2
	// and LeaderLeaseTimeout/2. 0 leaves the followers' patience to raft
	// alone: heartbeats every HeartbeatTimeout/10 and elections after a
	// random [HeartbeatTimeout, 2×HeartbeatTimeout] of silence.
	HeartbeatInterval time.Duration
	// ElectionTimeout: a candidate without a result for this long
	// (randomised up to twice as long) starts a new election round.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader that has not heard from a quorum for this
	// long steps down. At most HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long (randomised up to twice as long) the
	// leader waits before sending an AppendEntries with nothing new, and
	// before retrying a follower whose last one failed. Followers learn
	// the commit index of a burst of writes from the commit notice
	// (notice.go), not from this timer, so it can be long.
	CommitTimeout time.Duration
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks SnapshotThreshold.
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries are kept in the log after a snapshot
	// so that a slightly lagging follower catches up without a snapshot.
	TrailingLogs uint64
	// WatchHistory is how many events are kept for watches that resume from
	// a resourceVersion. Default 1024.
	WatchHistory int
	// WatchHistoryBytes bounds the same history by what its events hold on
	// to (their objects' JSON, names and labels): a watch resuming from
	// before the oldest kept event relists. Default 256 KiB: a few
	// rollouts of a small fleet (a pod's JSON is about 2 KB), which a
	// watch that reconnects within seconds needs; relisting instead costs
	// a small fleet little, and every server holds this history for as
	// long as it runs (BENCHMARKS.md, "Memory after a busy hour").
	WatchHistoryBytes int
	// WatchBuffer is the channel buffer of each watch.
	WatchBuffer int
	// MaxTxnBytes bounds the encoded size of one transaction, locally and
	// on the forwarding RPC.
	MaxTxnBytes int
	// WriteTimeout bounds a write (Txn, membership change) whose context
	// has no deadline.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake and protocol selection of
	// an incoming connection (its first message): a connection that has
	// not sent its protocol byte by then is closed. It also bounds reading
	// one forwarded request, and this server's own dials: connecting to a
	// peer and completing the handshake, so that a write forwarded to a
	// leader that vanished moves on within it. Default 3s.
	HandshakeTimeout time.Duration

	// LeaderAnswers, when set, is asked by a follower whose leader has
	// gone silent on Raft, from a little before the silence would start
	// an election: whether the server with this Raft ID still answers by
	// other means (the agent pings its gossip member). A yes, for a
	// question asked during the silence, holds the election back for a
	// while, up to three times HeartbeatTimeout of silence (suspect.go).
	// It must return within about 150 ms. Nil: no second opinion.
	LeaderAnswers func(id string) bool

	// ObserveTxn, when set, is told of every Txn that succeeded: whether
	// it was forwarded to the leader, and how long it took from the call
	// to the transaction applied on this server (committed by a quorum
	// and applied by the leader, then by this server when forwarded). It
	// is called on the caller's goroutine and must be cheap (metrics).
	ObserveTxn func(forwarded bool, took time.Duration)

	// network is the transport's network; nil is the host's TCP stack.
	// TestCluster sets one that can cut servers off.
	network network
}

// DefaultConfig returns a Config with the timings documented on Config and
// everything else zero: NodeID, BindAddr and ServerKey must be filled in.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   600 * time.Millisecond,
		HeartbeatInterval:  150 * time.Millisecond,
		ElectionTimeout:    600 * time.Millisecond,
		LeaderLeaseTimeout: 600 * time.Millisecond,
		CommitTimeout:      time.Second,
		SnapshotThreshold:  4096,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       4096,
		WatchHistory:       1024,
		WatchHistoryBytes:  256 << 10,
		WatchBuffer:        128,
		MaxTxnBytes:        1 << 20,
		WriteTimeout:       10 * time.Second,
		HandshakeTimeout:   3 * time.Second,
	}
}

// calmTimeouts are raft's HeartbeatTimeout and ElectionTimeout while a
// leader is heard (suspect.go): 10×HeartbeatInterval, so that raft's
// heartbeats come every HeartbeatInterval, and never below the
// configured ones. Without a HeartbeatInterval they are the configured
// ones.
func (c Config) calmTimeouts() (heartbeat, election time.Duration) {
	hb := max(10*c.HeartbeatInterval, c.HeartbeatTimeout)
	return hb, max(hb, c.ElectionTimeout)
}

// watchesSilence reports whether the store watches the leader's silence
// itself (suspect.go): raft's own timeout is then the calm one.
func (c Config) watchesSilence() bool {
	hb, _ := c.calmTimeouts()
	return hb > c.HeartbeatTimeout
}

// Log stores (Config.LogStore).
const (
	LogStoreWAL  = "wal"
	LogStoreBolt = "bolt"
)

// Validate reports every problem with c, each naming the field.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("raftstore: config: "+format, args...))
	}
	switch c.LogStore {
	case "", LogStoreWAL, LogStoreBolt:
	default:
		add("LogStore %q: want %q or %q", c.LogStore, LogStoreWAL, LogStoreBolt)
	}
	if c.NodeID == "" {
		add("NodeID is empty")
	}
	if c.BindAddr == "" {
		add("BindAddr is empty (want host:port, port 0 picks one)")
	} else if _, _, err := splitHostPort(c.BindAddr); err != nil {
		add("BindAddr %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		host, _, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			add("AdvertiseAddr %q: %v", c.AdvertiseAddr, err)
		} else if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			add("AdvertiseAddr %q: host must be an address others can dial", c.AdvertiseAddr)
		}
	} else if host, _, err := splitHostPort(c.BindAddr); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			add("AdvertiseAddr is empty and BindAddr %q does not name a host others can dial", c.BindAddr)
		}
	}
	if len(c.ServerKey) != ServerKeySize {
		add("ServerKey has %d bytes, want %d", len(c.ServerKey), ServerKeySize)
	}
	for i, k := range c.AcceptServerKeys {
		if len(k) != ServerKeySize {
			add("AcceptServerKeys[%d] has %d bytes, want %d", i, len(k), ServerKeySize)
		}
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		add("HeartbeatTimeout %s is below 5ms", c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		add("ElectionTimeout %s is below HeartbeatTimeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		add("LeaderLeaseTimeout %s must be between 5ms and HeartbeatTimeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.HeartbeatInterval < 0 || (c.HeartbeatInterval > 0 &&
		(2*c.HeartbeatInterval >= c.HeartbeatTimeout || 2*c.HeartbeatInterval >= c.LeaderLeaseTimeout)) {
		add("HeartbeatInterval %s must be 0 or below half of HeartbeatTimeout %s and of LeaderLeaseTimeout %s",
			c.HeartbeatInterval, c.HeartbeatTimeout, c.LeaderLeaseTimeout)
	}
	if c.CommitTimeout < time.Millisecond {
		add("CommitTimeout %s is below 1ms", c.CommitTimeout)
	}
	if c.SnapshotThreshold == 0 {
		add("SnapshotThreshold is 0")
	}
	if c.SnapshotInterval < 5*time.Millisecond {
		add("SnapshotInterval %s is below 5ms", c.SnapshotInterval)
	}
	if c.WatchHistory < 1 {
		add("WatchHistory %d is below 1", c.WatchHistory)
	}
	if c.WatchHistoryBytes < 1 {
		add("WatchHistoryBytes %d is below 1", c.WatchHistoryBytes)
	}
	if c.WatchBuffer < 1 {
		add("WatchBuffer %d is below 1", c.WatchBuffer)
	}
	if c.MaxTxnBytes < 1024 {
		add("MaxTxnBytes %d is below 1024", c.MaxTxnBytes)
	}
	if c.WriteTimeout <= 0 {
		add("WriteTimeout %s is not positive", c.WriteTimeout)
	}
	if c.HandshakeTimeout <= 0 {
		add("HandshakeTimeout %s is not positive", c.HandshakeTimeout)
	}
	return errors.Join(errs...)
}

func splitHostPort(addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, n, nil
}
