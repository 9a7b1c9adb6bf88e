package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
)

// KeySize is the length of the gossip key: 32 bytes, AES-256-GCM.
const KeySize = 32

// DefaultPort is the gossip port (TCP and UDP) of the LAN preset.
const DefaultPort = 7946

// ErrConfig is returned (wrapped) by Config.Validate and New for a bad Config.
var ErrConfig = errors.New("gossip: invalid config")

// Config configures a Gossip. Start from DefaultLANConfig (boards) or
// DefaultLocalConfig (tests on loopback) and set Name, Key and Meta.
type Config struct {
	// Name is this node's unique name in the cluster, a valid object name
	// (api.ValidateName); it becomes the api.Node name.
	Name string
	// BindAddr is the IP address to listen on (TCP and UDP).
	BindAddr string
	// BindPort is the port to listen on; 0 picks a free one (tests), read it
	// back from LocalMember().Port.
	BindPort int
	// AdvertiseAddr is the IP address peers use to reach this node; empty
	// means derive it from BindAddr (or the first private address when
	// BindAddr is 0.0.0.0).
	AdvertiseAddr string
	// AdvertisePort is the port peers use; 0 means BindPort.
	AdvertisePort int
	// Key is the gossip key, exactly KeySize bytes, which every member
	// holds. All gossip (UDP and TCP) is encrypted and authenticated with
	// it; a node without it can neither join nor read.
	Key []byte
	// AcceptKeys are further gossip keys messages may be encrypted with
	// (memberlist's keyring): they are accepted, never used to encrypt.
	// While a gossip key is rotated every member lists the other one here.
	AcceptKeys [][]byte
	// Join is the default seed list for Gossip.Join: "host:port" or "host"
	// (the port then defaults to BindPort).
	Join []string
	// Meta is what this node announces; it must encode to at most
	// MetaMaxSize bytes. Change it later with Gossip.UpdateMeta.
	Meta Meta
	// Logger receives memberlist's log output at debug level and this
	// package's own messages. nil discards everything.
	Logger *slog.Logger
	// Clock stamps the Since of members and the At of events; nil means
	// the real clock.
	Clock clock.Clock
	// DeadRetention is how long a dead or left member stays visible in
	// Members after its last change; 0 keeps it until it comes back.
	DeadRetention time.Duration
	// Jitter returns a number in [0, 1) that spreads the join retries and
	// reconnect rounds over ±20% of their pause; it may be called from
	// several goroutines at once. Nil means math/rand/v2. Tests inject a
	// seeded source.
	Jitter func() float64
	// ReconnectInterval is how often Reconnect tries to reach members
	// declared dead (see Gossip.Reconnect).
	ReconnectInterval time.Duration
	// Timing holds the failure-detection and dissemination settings.
	Timing Timing
	// OnMessage, when set, receives the messages other members Send: kind
	// and body (a copy it may keep). It is called from one goroutine, in
	// arrival order; while it runs, up to 64 more wait and further ones are
	// dropped (MessagesDropped). Anyone holding the gossip key can send, so
	// it must authenticate what it acts on. Nil ignores them.
	OnMessage func(kind byte, body []byte)

	// wrapTransport, when set (tests only), wraps the network transport,
	// e.g. to drop packets.
	wrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}

// Timing holds memberlist's failure-detection and dissemination settings.
// The field meanings are memberlist's (see memberlist.Config).
type Timing struct {
	// ProbeInterval is how often each node probes one other node
	// (round-robin); a probe that gets no ack within it has failed.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a direct ack before asking
	// IndirectChecks other nodes to probe (and trying TCP).
	ProbeTimeout time.Duration
	// IndirectChecks is the number of nodes asked for an indirect probe.
	IndirectChecks int
	// SuspicionMult scales the suspicion timeout: a suspect is declared dead
	// after SuspicionMult * max(1, log10(n)) * ProbeInterval once enough
	// (SuspicionMult-2) other nodes confirm the suspicion.
	SuspicionMult int
	// SuspicionMaxTimeoutMult is the multiple of that minimum used when no
	// other node confirms the suspicion (Lifeguard).
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often queued broadcasts are sent to GossipNodes
	// random nodes.
	GossipInterval time.Duration
	// GossipNodes is the number of nodes gossiped to per GossipInterval.
	GossipNodes int
	// GossipToTheDeadTime is how long a dead node keeps receiving gossip
	// (so that a falsely declared node can learn it and refute) before
	// memberlist forgets it.
	GossipToTheDeadTime time.Duration
	// RetransmitMult: each broadcast is sent RetransmitMult *
	// ceil(log10(n+1)) times.
	RetransmitMult int
	// PushPullInterval is the period of full state syncs over TCP; 0
	// disables them.
	PushPullInterval time.Duration
	// TCPTimeout bounds one TCP exchange, e.g. one join attempt per address.
	TCPTimeout time.Duration
}

// LANTiming is the failure-detection preset for a small LAN fleet (up to a
// few dozen boards, wired or Wi-Fi, RTT well under 100 ms).
//
// Numbers and why:
//   - ProbeInterval 250ms, ProbeTimeout 125ms: every node probes one peer
//     every 250 ms (round-robin), so with n-1 probers a stopped board is
//     probed within ~250 ms. 125 ms leaves room for Wi-Fi latency spikes
//     before the indirect probes start; the probe as a whole fails at 250 ms.
//   - IndirectChecks 3 (plus memberlist's TCP fallback): under 10% packet
//     loss a direct ping/ack fails with p≈0.19, one indirect path (4
//     packets) with p≈0.34, all three with p≈0.04, so a live board is
//     falsely suspected in well under 1% of probes.
//   - SuspicionMult 3, SuspicionMaxTimeoutMult 2: for n < 10 a suspect is
//     declared dead 3*250ms = 750ms after suspicion once one other node
//     confirms it (k = SuspicionMult-2 = 1; a board that is really off is
//     soon probed by another node too), and after 1.5s when nobody confirms,
//     which is what a false suspicion looks like. Refuting takes the suspect
//     one or two gossip hops (~100-300 ms), far inside 1.5 s even when a few
//     packets are lost. For 10-100 nodes both grow by log10(n) (up to 2x).
//   - GossipInterval 100ms to GossipNodes 3, RetransmitMult 5: suspect,
//     refute and dead messages reach every board of a small fleet in one or
//     two intervals; 5 sends per message make losing every copy at 10% loss
//     negligible (1e-5). The packets are small; a small fleet affords it.
//   - GossipToTheDeadTime 15s, PushPullInterval 15s: a board wrongly
//     declared dead still hears about it for 15 s and comes back by
//     refuting; full TCP syncs repair anything gossip missed within 15 s.
//   - TCPTimeout 3s: a join attempt to a powered-off seed gives up soon.
//
// Expected detection of a powered-off board (n < 10): first probe within
// 0-250ms, that probe fails 250ms later, suspicion 750ms (one confirmation),
// dead broadcast to all ~100ms: about 1.2-1.6s, at most ~2.2s when no
// second node confirms. Measured on loopback (BenchmarkDetectLAN, 5 nodes,
// until all 4 survivors report it): mean 1.46s, max 1.95s over 15 stops.
// Under 10% UDP loss (BenchmarkLANLoss, 5 nodes, 180s): 10 false
// suspicions, all refuted, 0 false deaths; detection 1.2s. At 20% loss
// the first false death appears (1 in 60s).
func LANTiming() Timing {
	return Timing{
		ProbeInterval:           250 * time.Millisecond,
		ProbeTimeout:            125 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     15 * time.Second,
		RetransmitMult:          5,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              3 * time.Second,
	}
}

// LocalTiming is a fast preset for tests on loopback: a stopped node is
// declared dead in about 1 s. It is not tuned for packet loss, and it keeps
// some slack for a loaded test machine (ProbeTimeout 100ms).
func LocalTiming() Timing {
	return Timing{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		IndirectChecks:          1,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          50 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     5 * time.Second,
		RetransmitMult:          3,
		PushPullInterval:        5 * time.Second,
		TCPTimeout:              time.Second,
	}
}

// DefaultLANConfig is the preset for boards: listen on all addresses on
// DefaultPort with LANTiming. Set Name, Key and Meta before use.
func DefaultLANConfig() Config {
	return Config{
		BindAddr:      "0.0.0.0",
		BindPort:      DefaultPort,
		DeadRetention: 24 * time.Hour,
		// A healed partition is noticed within about this long.
		ReconnectInterval: 2 * time.Second,
		Timing:            LANTiming(),
	}
}

// DefaultConfig is DefaultLANConfig.
func DefaultConfig() Config { return DefaultLANConfig() }

// DefaultLocalConfig is the preset for tests: 127.0.0.1, a free port, and
// LocalTiming. Set Name, Key and Meta before use.
func DefaultLocalConfig() Config {
	return Config{
		BindAddr:          "127.0.0.1",
		BindPort:          0,
		DeadRetention:     time.Hour,
		ReconnectInterval: 200 * time.Millisecond,
		Timing:            LocalTiming(),
	}
}

// Validate reports every problem with c in one error wrapping ErrConfig
// (and, for a bad Meta, the error of EncodeMeta).
func (c Config) Validate() error {
	var p []string
	var causes []error
	if err := api.ValidateName(c.Name); err != nil {
		p = append(p, fmt.Sprintf("Name: %v", err))
	}
	if net.ParseIP(c.BindAddr) == nil {
		p = append(p, fmt.Sprintf("BindAddr %q: not an IP address", c.BindAddr))
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		p = append(p, fmt.Sprintf("AdvertiseAddr %q: not an IP address", c.AdvertiseAddr))
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		p = append(p, fmt.Sprintf("BindPort %d: out of range", c.BindPort))
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		p = append(p, fmt.Sprintf("AdvertisePort %d: out of range", c.AdvertisePort))
	}
	if len(c.Key) != KeySize {
		p = append(p, fmt.Sprintf("Key: %d bytes, want %d", len(c.Key), KeySize))
	}
	for i, k := range c.AcceptKeys {
		if len(k) != KeySize {
			p = append(p, fmt.Sprintf("AcceptKeys[%d]: %d bytes, want %d", i, len(k), KeySize))
		}
	}
	for i, j := range c.Join {
		if strings.TrimSpace(j) == "" {
			p = append(p, fmt.Sprintf("Join[%d]: empty address", i))
		}
	}
	if _, err := EncodeMeta(c.Meta); err != nil {
		p = append(p, fmt.Sprintf("Meta: %v", err))
		causes = append(causes, err)
	}
	if c.ReconnectInterval < 0 {
		p = append(p, fmt.Sprintf("ReconnectInterval %v: negative", c.ReconnectInterval))
	}
	if c.DeadRetention < 0 {
		p = append(p, fmt.Sprintf("DeadRetention %v: negative", c.DeadRetention))
	}
	p = append(p, c.Timing.problems()...)
	if len(p) > 0 {
		return &configError{
			msg:    ErrConfig.Error() + ": " + strings.Join(p, "; "),
			causes: append([]error{ErrConfig}, causes...),
		}
	}
	return nil
}

// configError lists every problem of a Config; it matches ErrConfig and,
// for a bad Meta, ErrMetaInvalid or ErrMetaTooLarge with errors.Is.
type configError struct {
	msg    string
	causes []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.causes }

func (t Timing) problems() []string {
	var p []string
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			p = append(p, fmt.Sprintf("Timing.%s %v: must be positive", name, d))
		}
	}
	atLeast := func(name string, v, min int) {
		if v < min {
			p = append(p, fmt.Sprintf("Timing.%s %d: must be at least %d", name, v, min))
		}
	}
	pos("ProbeInterval", t.ProbeInterval)
	pos("ProbeTimeout", t.ProbeTimeout)
	if t.ProbeTimeout >= t.ProbeInterval && t.ProbeInterval > 0 {
		p = append(p, fmt.Sprintf("Timing.ProbeTimeout %v: must be shorter than ProbeInterval %v", t.ProbeTimeout, t.ProbeInterval))
	}
	atLeast("IndirectChecks", t.IndirectChecks, 0)
	atLeast("SuspicionMult", t.SuspicionMult, 1)
	atLeast("SuspicionMaxTimeoutMult", t.SuspicionMaxTimeoutMult, 1)
	pos("GossipInterval", t.GossipInterval)
	atLeast("GossipNodes", t.GossipNodes, 1)
	pos("GossipToTheDeadTime", t.GossipToTheDeadTime)
	atLeast("RetransmitMult", t.RetransmitMult, 1)
	if t.PushPullInterval < 0 {
		p = append(p, fmt.Sprintf("Timing.PushPullInterval %v: negative", t.PushPullInterval))
	}
	pos("TCPTimeout", t.TCPTimeout)
	return p
}

// memberlistConfig translates c into memberlist's configuration.
func (c Config) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = c.BindPort
	}
	mc.SecretKey = append([]byte(nil), c.Key...)
	if len(c.AcceptKeys) > 0 {
		keys := make([][]byte, len(c.AcceptKeys))
		for i, k := range c.AcceptKeys {
			keys[i] = append([]byte(nil), k...)
		}
		// Validate checked every size, the only error NewKeyring has.
		mc.Keyring, _ = memberlist.NewKeyring(keys, mc.SecretKey)
	}
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	// No LZW: herd's messages are small (a ping, an ack, a few
	// broadcasts, meta of at most MetaMaxSize bytes), and memberlist
	// builds a fresh LZW writer (tables of ~16 KB) for every message it
	// sends. On the lab that was 45 % of an idle leader's allocated bytes
	// and the main source of its garbage (BENCHMARKS.md, "Idle agents on
	// the lab"). Compressed messages from other members are still read.
	mc.EnableCompression = false
	t := c.Timing
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.IndirectChecks = t.IndirectChecks
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.GossipInterval = t.GossipInterval
	mc.GossipNodes = t.GossipNodes
	mc.GossipToTheDeadTime = t.GossipToTheDeadTime
	mc.RetransmitMult = t.RetransmitMult
	mc.PushPullInterval = t.PushPullInterval
	mc.TCPTimeout = t.TCPTimeout
	return mc
}
