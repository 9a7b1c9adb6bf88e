package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
)

// Server is one member of the Raft configuration.
type Server struct {
	// ID is the server's NodeID.
	ID string `json:"id"`
	// Address is the server's advertised raft address (host:port).
	Address string `json:"address"`
	// Voter is false for a non-voter, which replicates the log but does not
	// count towards a quorum.
	Voter bool `json:"voter"`
}

// Stats is a point-in-time view of a Store, for status pages and metrics.
type Stats struct {
	// NodeID and Address identify this server.
	NodeID  string `json:"nodeID"`
	Address string `json:"address"`
	// State is Follower, Candidate, Leader or Shutdown.
	State string `json:"state"`
	// LeaderID and LeaderAddr name the known leader, empty if none.
	LeaderID   string `json:"leaderID,omitempty"`
	LeaderAddr string `json:"leaderAddr,omitempty"`
	// Term is the current Raft term.
	Term uint64 `json:"term"`
	// LastLogIndex is the last index in the local log.
	LastLogIndex uint64 `json:"lastLogIndex"`
	// CommitIndex is the last index known committed.
	CommitIndex uint64 `json:"commitIndex"`
	// AppliedIndex is the last index raft applied (commands, configuration
	// changes and no-ops).
	AppliedIndex uint64 `json:"appliedIndex"`
	// StoreIndex is the last command applied to the object store: the
	// resourceVersion List returns.
	StoreIndex uint64 `json:"storeIndex"`
	// LastContact is when this follower last heard from a leader; zero
	// on a leader (which is its own contact) and before any contact.
	LastContact time.Time `json:"lastContact,omitzero"`
	// LastSnapshotIndex is the index of the latest local snapshot.
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
	// Objects is how many objects the store holds.
	Objects int `json:"objects"`
	// Watchers is how many watches are running.
	Watchers int `json:"watchers"`
	// Suspicions counts the leader's silences after which this server
	// started an election of its own watch (suspect.go) since it opened:
	// real leader losses, and on a lossy link false alarms (whose
	// pre-vote the others refuse).
	Suspicions uint64 `json:"suspicions"`
	// SilencesHeld counts the second opinions (Config.LeaderAnswers) in
	// which a leader silent on Raft still answered, holding an election
	// back: on a lossy link, the false alarms that cost nothing.
	SilencesHeld uint64 `json:"silencesHeld"`
}

// Store is the replicated object store of one server. Reads (Get, List,
// Watch) are served from the local copy, which may lag the leader by the
// replication delay; after ReadBarrier they are linearizable. Writes (Txn)
// go through the leader, and a Txn that returns has been applied locally
// too (read-your-writes).
//
// All methods are safe for concurrent use.
type Store struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock

	hub   *hub
	fsm   *fsm
	raft  *raft.Raft
	mux   *mux
	trans *raft.NetworkTransport

	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	disk   *diskLog // nil in memory

	leadership    *leadership
	leaderChanged *broadcaster
	// readyTerm is the term in which this server, as leader, last applied
	// everything committed before it (its barrier): reads may be served
	// in that term only.
	readyTerm atomic.Uint64
	observer  *raft.Observer
	// suspicions counts the silences after which this server gave raft
	// its quick timeouts (suspect.go; Stats.Suspicions).
	suspicions atomic.Uint64
	// silencesHeld counts the second opinions in which the silent leader
	// answered (suspect.go; Stats.SilencesHeld).
	silencesHeld atomic.Uint64
	// committed wakes noticeLoop when a write committed here (notice.go).
	committed chan struct{}

	closedCtx   context.Context // done once Close starts
	closeCancel context.CancelFunc
	closeOnce   sync.Once
	closeErr    error
	wg          sync.WaitGroup
}

// Open starts a Store: it opens (or creates) the on-disk state in DataDir,
// listens on BindAddr and starts Raft, which replays the log into the
// store. A server that was never part of a cluster does nothing until
// Bootstrap is called or a leader adds it.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("node", cfg.NodeID)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock()
	}
	id, err := deriveIdentity(cfg.ServerKey, cfg.AcceptServerKeys...)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg:           cfg,
		log:           logger,
		clock:         clk,
		hub:           hubFor(cfg),
		leadership:    newLeadership(),
		leaderChanged: newBroadcaster(),
		committed:     make(chan struct{}, 1),
	}
	s.fsm = newFSM(s.hub)
	s.closedCtx, s.closeCancel = context.WithCancel(context.Background())
	hc := newHCLog(logger, "raft", nil)

	var undo []func()
	fail := func(err error) (*Store, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		s.closeCancel()
		return nil, err
	}

	closeStorage, err := s.openStorage(hc)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, closeStorage)

	closeTransport, err := s.openTransport(id, hc)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, closeTransport)

	rc, err := raftConfig(cfg, hc)
	if err != nil {
		return fail(err)
	}
	r, err := raft.NewRaft(rc, s.fsm, s.logs, s.stable, s.snaps, s.trans)
	if err != nil {
		return fail(fmt.Errorf("raftstore: start raft: %w", err))
	}
	s.raft = r

	obs := make(chan raft.Observation, 16)
	s.observer = raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(s.observer)
	s.wg.Add(3)
	go s.leaderLoop()
	go s.observeLoop(obs)
	go s.noticeLoop()
	if cfg.watchesSilence() {
		s.wg.Add(1)
		sp := newSuspicion(cfg.HeartbeatTimeout, time.Now(), nil)
		if cfg.LeaderAnswers != nil {
			sp.withOpinions(opinionTimings(cfg.HeartbeatTimeout))
		}
		go s.suspectLoop(sp)
	}
	logger.Info("raft store open", "addr", s.mux.Addr().String(), "dataDir", cfg.DataDir)
	return s, nil
}

// logCacheEntries is how many of the newest Raft log entries every server
// keeps in memory, so that replicating them to a follower does not read the
// disk. A follower that is further behind reads the older ones from the log
// store (raft-wal reads them from its segment files, mostly in the page
// cache). Each entry holds a transaction's objects, about 1 KB for a pod:
// 64 entries cover any burst a follower keeps up with, where 256 (herd's
// before; Consul and Nomad keep 512) cost a Pi Zero's agent a few hundred KB
// for as long as it runs (BENCHMARKS.md, "Memory after a busy hour").
const logCacheEntries = 64

// openStorage sets up the Raft log, stable and snapshot stores: in
// memory without a DataDir, else the on-disk log (openDiskLog, behind a
// log cache) and snapshot files under DataDir/raft. The returned func
// closes what it opened.
func (s *Store) openStorage(hc *hclogAdapter) (func(), error) {
	if s.cfg.DataDir == "" {
		mem := raft.NewInmemStore()
		s.logs, s.stable, s.snaps = mem, mem, raft.NewInmemSnapshotStore()
		return func() {}, nil
	}
	dir := filepath.Join(s.cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: data dir: %w", err)
	}
	disk, err := openDiskLog(dir, s.cfg.LogStore, hc, s.log)
	if err != nil {
		return nil, err
	}
	cache, err := raft.NewLogCache(logCacheEntries, disk.logs)
	if err != nil {
		disk.Close()
		return nil, fmt.Errorf("raftstore: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hc.Named("snapshots"))
	if err != nil {
		disk.Close()
		return nil, fmt.Errorf("raftstore: snapshot store in %s: %w", dir, err)
	}
	s.disk, s.logs, s.stable, s.snaps = disk, cache, disk.stable, snaps
	return func() { disk.Close() }, nil
}

// openTransport listens on BindAddr with the server-key TLS mux (Raft RPCs
// and forwarded writes) and puts Raft's network transport on it. The
// returned func closes both.
func (s *Store) openTransport(id *identity, hc *hclogAdapter) (func(), error) {
	cfg := s.cfg
	m, err := listen(cfg.network, cfg.BindAddr, cfg.AdvertiseAddr, id, cfg.HandshakeTimeout, s.log)
	if err != nil {
		return nil, err
	}
	s.mux = m
	m.setForward(s.serveForward)
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  m,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		// No pipelined replication: when a pipelined append fails (a
		// newer term, a dropped connection) hashicorp/raft's pipeline
		// reader exits and the next append can block for good, hanging
		// Close and stalling replication to that follower (seen under
		// armv7 emulation). One RPC in flight is plenty for a small fleet.
		MaxRPCsInFlight: 1,
		Logger:          hc.Named("transport"),
	})
	s.trans = trans
	return func() { trans.Close(); m.Close(); m.wait() }, nil
}

// raftConfig is hashicorp/raft's configuration for cfg.
func raftConfig(cfg Config, hc *hclogAdapter) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = cfg.calmTimeouts()
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hc
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raftstore: raft config: %w", err)
	}
	return rc, nil
}

// leaderLoop turns raft's leadership signal into the one subscribers see:
// true only after a barrier, so that the local store holds everything
// committed by earlier leaders when leader-only work starts.
func (s *Store) leaderLoop() {
	defer s.wg.Done()
	for {
		select {
		case v := <-s.raft.LeaderCh():
			if v && !s.barrierAsLeader() {
				continue // a false follows
			}
			s.log.Info("leadership changed", "leader", v)
			s.leadership.set(v)
		case <-s.closedCtx.Done():
			return
		}
	}
}

// barrierAsLeader waits until every earlier entry is applied, retrying
// while this server is still leader, and records the term it did so in.
// It reports whether it succeeded.
func (s *Store) barrierAsLeader() bool {
	for s.closedCtx.Err() == nil && s.raft.State() == raft.Leader {
		term := s.raft.CurrentTerm()
		err := s.waitFuture(s.closedCtx, s.raft.Barrier(s.cfg.WriteTimeout))
		if err == nil {
			// A barrier of an older term cannot succeed after the term
			// changed: it would have failed with leadership lost.
			s.readyTerm.Store(term)
			return true
		}
		s.log.Warn("barrier after winning the election failed", "err", err)
	}
	return false
}

func (s *Store) observeLoop(obs <-chan raft.Observation) {
	defer s.wg.Done()
	for {
		select {
		case <-obs:
			s.leaderChanged.fire()
		case <-s.closedCtx.Done():
			return
		}
	}
}

func (s *Store) isClosed() bool { return s.closedCtx.Err() != nil }

// Get returns the stored object kind/name from the local copy. The result
// is the caller's to modify.
func (s *Store) Get(kind api.Kind, name string) (api.RawObject, error) {
	if s.isClosed() {
		return api.RawObject{}, ErrClosed
	}
	if !validKind(kind) {
		return api.RawObject{}, fmt.Errorf("%w: get: unknown kind %q", ErrInvalid, kind)
	}
	if name == "" {
		return api.RawObject{}, fmt.Errorf("%w: get %s: empty name", ErrInvalid, kind)
	}
	o, _ := s.fsm.get(kind, name)
	if o == nil {
		return api.RawObject{}, fmt.Errorf("%w: %s/%s", ErrNotFound, kind, name)
	}
	return cloneRaw(*o), nil
}

// List returns every object of kind ("" = every object kind, in api.Kinds
// order; events only when asked for by kind)
// sorted by name, and the index of the last applied write: pass it to Watch
// as fromRV to follow changes from exactly this state.
func (s *Store) List(kind api.Kind) ([]api.RawObject, uint64, error) {
	if s.isClosed() {
		return nil, 0, ErrClosed
	}
	if kind != "" && !validKind(kind) {
		return nil, 0, fmt.Errorf("%w: list: unknown kind %q", ErrInvalid, kind)
	}
	objs, rv := s.fsm.list(kind)
	return objs, rv, nil
}

// Watch delivers every event for kind ("" = every object kind; events,
// api.KindEvent, only when asked for by kind) with a
// resourceVersion above fromRV, in commit order: first from the retained
// history, then live. fromRV 0 means "from now". If events after fromRV are
// no longer retained it fails with ErrCompacted: list again.
//
// The channel is closed when ctx ends, when the store closes, and after an
// EventRelist event, which is sent when the watcher fell more than
// WatchHistory events behind or the state was replaced by a snapshot.
// Events never block the store: a watcher that does not read only hurts
// itself.
func (s *Store) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if kind != "" && !validKind(kind) {
		return nil, fmt.Errorf("%w: watch: unknown kind %q", ErrInvalid, kind)
	}
	return s.hub.watch(ctx, kind, fromRV)
}

// Txn commits ops as one transaction: all apply or none. On a follower it is
// forwarded to the leader. It returns the objects as stored, in op order (a
// delete returns the object it deleted), once the local store has applied
// them. Rejections wrap ErrExists, ErrNotFound, ErrConflict or ErrInvalid.
// Without a leader it waits for one until ctx ends (or WriteTimeout, if ctx
// has no deadline) and then fails with ErrNoLeader.
//
// A forwarded write follows raft's view of the leader: when the leader it
// was sent to vanishes, it moves to the new one as soon as raft knows it
// (before the request was sent) or fails at once (after). So a write
// through a follower is acknowledged, or fails, within about an election
// and a round trip of the leader's loss, not at the end of ctx.
//
// ErrOutcomeUnknown (leadership lost mid-commit, connection to the leader
// cut, the leader changed while it held the request) means the write may
// or may not have committed: read before retrying, or retry with the same
// request id (WithRequestID), which applies it at most once. ErrNoLeader
// and ErrClosed mean it did not commit.
func (s *Store) Txn(ctx context.Context, ops []Op) ([]api.RawObject, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: empty transaction", ErrInvalid)
	}
	for i, op := range ops {
		if err := validateOp(op); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	id, err := requestIDFor(ctx)
	if err != nil {
		return nil, err
	}
	if b, err := json.Marshal(ops); err != nil {
		return nil, fmt.Errorf("%w: encode: %v", ErrInvalid, err)
	} else if len(b) > s.cfg.MaxTxnBytes {
		return nil, fmt.Errorf("%w: transaction of %d bytes exceeds the limit of %d", ErrInvalid, len(b), s.cfg.MaxTxnBytes)
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()

	start := time.Now() // real time: for ObserveTxn only
	forwarded := false
	var out []api.RawObject
	err = s.withLeader(ctx, func() error {
		forwarded = false
		res, err := s.leaderTxn(ctx, ops, id)
		if err != nil {
			return err
		}
		out = make([]api.RawObject, len(res.Objects))
		for i, o := range res.Objects {
			out[i] = cloneRaw(*o)
		}
		return nil
	}, func(addr string) error {
		forwarded = true
		index, objs, err := s.forward(ctx, addr, ops, id)
		if err != nil {
			return err
		}
		if werr := s.hub.waitApplied(ctx, index); werr != nil {
			s.log.Debug("forwarded txn committed but not yet applied here", "index", index, "err", werr)
		}
		out = objs
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.cfg.ObserveTxn != nil {
		s.cfg.ObserveTxn(forwarded, time.Since(start))
	}
	return out, nil
}

// writeContext bounds ctx by WriteTimeout if it has no deadline and ends it
// when the store closes.
func (s *Store) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.WriteTimeout)
	}
	stop := context.AfterFunc(s.closedCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// leaderTxn commits ops, with request id id ("" for none), through the
// local raft, which must be the leader. Errors that certainly did not
// commit are wrapped in errRetry.
func (s *Store) leaderTxn(ctx context.Context, ops []Op, id string) (*applyResult, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if id != "" {
		if err := ValidateRequestID(id); err != nil {
			return nil, err
		}
	}
	data, err := json.Marshal(command{Ops: ops, Created: s.clock.Now().UTC(), RequestID: id})
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %v", ErrInvalid, err)
	}
	if len(data) > s.cfg.MaxTxnBytes+forwardOverhead {
		return nil, fmt.Errorf("%w: transaction of %d bytes exceeds the limit of %d", ErrInvalid, len(data), s.cfg.MaxTxnBytes)
	}
	timeout := s.cfg.WriteTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := s.raft.Apply(data, timeout)
	switch err = s.waitFuture(ctx, f); {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrAbortedByRestore):
		// Rejected before it entered the log: safe to retry.
		return nil, &errRetry{fmt.Errorf("%w: %s: %v", ErrNotLeader, s.cfg.NodeID, err)}
	default:
		// Leadership lost, shutdown or deadline while committing: the
		// entry may still commit, so nobody may retry blindly.
		return nil, fmt.Errorf("%w: txn: %w", ErrOutcomeUnknown, err)
	}
	s.noteCommit()
	res, ok := f.Response().(*applyResult)
	if !ok {
		return nil, fmt.Errorf("raftstore: txn: unexpected apply response %T", f.Response())
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res, nil
}

// waitFuture waits for f, or for ctx or the store to end. raft does not
// answer every future once it shuts down, so nothing waits on one without
// an escape.
func (s *Store) waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closedCtx.Done():
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// IsLeader reports whether this server is the Raft leader right now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the current leader's ID and address, empty if none is
// known.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderSilence returns how long ago this server last heard from a leader
// (an AppendEntries or a heartbeat: a live leader sends one at least every
// 2×HeartbeatInterval): 0 on the leader and on a server that has never
// heard from one. It keeps growing through an election this server takes
// part in, until a leader is heard from again. Cheap.
func (s *Store) LeaderSilence() time.Duration {
	if s.raft.State() == raft.Leader {
		return 0
	}
	lc := s.raft.LastContact()
	if lc.IsZero() {
		return 0
	}
	return max(0, time.Since(lc))
}

// Addr returns the address this server advertises to its peers (the port
// actually bound when BindAddr had port 0).
func (s *Store) Addr() string { return s.mux.Addr().String() }

// NodeID returns the configured NodeID.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// LeadershipChanges subscribes to this server's leadership. The channel
// first holds the current state, then every change: true once this server
// is leader and its store has applied everything committed before (start
// leader-only work with a full resync), false when it stops being leader
// (stop it). The channel holds only the latest value, so a slow reader may
// miss intermediate ones; true after true means leadership was lost and
// regained in between, and leader-only work must restart. The channel is
// closed by cancel and when the store closes. Any number of subscribers may
// exist.
func (s *Store) LeadershipChanges() (<-chan bool, func()) { return s.leadership.subscribe() }

// WaitForLeader waits until some server is known as leader, or ctx ends
// (ErrNoLeader).
func (s *Store) WaitForLeader(ctx context.Context) error {
	for {
		if s.isClosed() {
			return ErrClosed
		}
		wake := s.leaderChanged.wait()
		if addr, _ := s.raft.LeaderWithID(); addr != "" {
			return nil
		}
		timer := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-s.closedCtx.Done():
			timer.Stop()
			return ErrClosed
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// HasExistingState reports whether this server has Raft state (it was
// bootstrapped or joined before), in which case it must not be bootstrapped.
func (s *Store) HasExistingState() (bool, error) {
	ok, err := raft.HasExistingState(s.logs, s.stable, s.snaps)
	if err != nil {
		return false, fmt.Errorf("raftstore: read existing state: %w", err)
	}
	return ok, nil
}

// Bootstrap makes servers the initial configuration. Call it on each of the
// initial servers with the same list; a server that already has state
// ignores it (so it is safe to call on every start).
func (s *Store) Bootstrap(servers []Server) error {
	if len(servers) == 0 {
		return fmt.Errorf("%w: bootstrap: no servers", ErrInvalid)
	}
	var conf raft.Configuration
	for _, srv := range servers {
		if srv.ID == "" || srv.Address == "" {
			return fmt.Errorf("%w: bootstrap: server %+v needs an ID and an address", ErrInvalid, srv)
		}
		suffrage := raft.Nonvoter
		if srv.Voter {
			suffrage = raft.Voter
		}
		conf.Servers = append(conf.Servers, raft.Server{
			ID: raft.ServerID(srv.ID), Address: raft.ServerAddress(srv.Address), Suffrage: suffrage,
		})
	}
	err := s.waitWrite(s.raft.BootstrapCluster(conf))
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		s.log.Info("bootstrap skipped: raft state exists")
		return nil
	case err != nil:
		return s.raftErr("bootstrap", err)
	}
	s.log.Info("bootstrapped", "servers", len(servers))
	return nil
}

// AddVoter adds (or promotes) a voting server. Leader only: ErrNotLeader
// elsewhere. Waits at most WriteTimeout.
func (s *Store) AddVoter(id, addr string) error {
	f := s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, s.cfg.WriteTimeout)
	return s.raftErr("add voter "+id, s.waitWrite(f))
}

// waitWrite waits for a membership future for at most WriteTimeout.
func (s *Store) waitWrite(f raft.Future) error {
	ctx, cancel := s.writeContext(context.Background())
	defer cancel()
	return s.waitFuture(ctx, f)
}

// AddNonvoter adds a server that replicates the log without voting. Leader
// only: ErrNotLeader elsewhere.
func (s *Store) AddNonvoter(id, addr string) error {
	f := s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, s.cfg.WriteTimeout)
	return s.raftErr("add nonvoter "+id, s.waitWrite(f))
}

// RemoveServer removes a server from the configuration. Leader only:
// ErrNotLeader elsewhere.
func (s *Store) RemoveServer(id string) error {
	f := s.raft.RemoveServer(raft.ServerID(id), 0, s.cfg.WriteTimeout)
	return s.raftErr("remove server "+id, s.waitWrite(f))
}

// Configuration returns the latest Raft configuration.
func (s *Store) Configuration() ([]Server, error) {
	f := s.raft.GetConfiguration()
	if err := s.waitWrite(f); err != nil {
		return nil, s.raftErr("configuration", err)
	}
	var out []Server
	for _, srv := range f.Configuration().Servers {
		out = append(out, Server{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return out, nil
}

// Barrier waits until every write committed before the call has been
// applied to the local store. Leader only: ErrNotLeader elsewhere.
func (s *Store) Barrier(ctx context.Context) error {
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	dl, _ := ctx.Deadline()
	return s.raftErr("barrier", s.waitFuture(ctx, s.raft.Barrier(time.Until(dl))))
}

// LeadershipTransfer asks this server, which must be leader, to hand
// leadership to another voter and waits for the outcome.
func (s *Store) LeadershipTransfer() error {
	return s.raftErr("leadership transfer", s.waitWrite(s.raft.LeadershipTransfer()))
}

// raftErr maps raft's errors to this package's sentinels.
func (s *Store) raftErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		id, _ := s.Leader()
		return fmt.Errorf("%w: %s (leader is %q)", ErrNotLeader, op, id)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("raftstore: %s: %w", op, err)
}

// Stats returns a snapshot of the store's state.
func (s *Store) Stats() Stats {
	leaderID, leaderAddr := s.Leader()
	st := Stats{
		NodeID:       s.cfg.NodeID,
		Address:      s.Addr(),
		State:        s.raft.State().String(),
		LeaderID:     leaderID,
		LeaderAddr:   leaderAddr,
		Term:         s.raft.CurrentTerm(),
		LastLogIndex: s.raft.LastIndex(),
		CommitIndex:  s.raft.CommitIndex(),
		AppliedIndex: s.raft.AppliedIndex(),
		StoreIndex:   s.fsm.appliedIndex(),
		Watchers:     s.hub.watchers(),
		Suspicions:   s.suspicions.Load(),
		SilencesHeld: s.silencesHeld.Load(),
	}
	if st.State != raft.Leader.String() {
		st.LastContact = s.raft.LastContact()
	}
	if v, err := strconv.ParseUint(s.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.LastSnapshotIndex = v
	}
	s.fsm.mu.RLock()
	for _, m := range s.fsm.kinds {
		st.Objects += len(m)
	}
	s.fsm.mu.RUnlock()
	return st
}

// Close shuts the store down: a leader first hands leadership to another
// voter (so the cluster need not wait out an election), then Raft stops,
// every watch and leadership subscription is closed, and the files are
// closed. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.raft.State() == raft.Leader && s.otherVoters() {
			if err := s.waitWrite(s.raft.LeadershipTransfer()); err != nil {
				s.log.Info("leadership transfer before close failed", "err", err)
			}
		}
		s.closeCancel()
		s.leadership.close()
		s.hub.close()
		// The transport closes first: raft's shutdown waits for its RPCs
		// in flight, and a peer that is shutting down too answers them
		// only once its transport has closed (hashicorp/raft closes it
		// after that wait), so two servers closing in an election would
		// wait out the RPC timeout for each other.
		s.trans.Close()
		var errs []error
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raftstore: shutdown raft: %w", err))
		}
		s.raft.DeregisterObserver(s.observer)
		s.mux.Close()
		s.wg.Wait()
		s.mux.wait()
		if s.disk != nil {
			if err := s.disk.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
		s.log.Info("raft store closed")
	})
	return s.closeErr
}

// otherVoters reports whether the configuration has a voter besides this
// server.
func (s *Store) otherVoters() bool {
	servers, err := s.Configuration()
	if err != nil {
		return false
	}
	for _, srv := range servers {
		if srv.Voter && srv.ID != s.cfg.NodeID {
			return true
		}
	}
	return false
}
