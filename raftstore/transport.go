package raftstore

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Protocol bytes: the first byte a client sends after the TLS handshake
// selects what the connection is for.
const (
	protoRaft    byte = 'R' // hashicorp/raft's NetworkTransport
	protoForward byte = 'F' // herd's write forwarding RPC (forward.go)
)

// tlsInfo is the HKDF info string the transport key is derived with.
const tlsInfo = "herd raft tls v1"

// Limits on connections that have not yet completed the TLS handshake and
// sent their protocol byte ("pending"). A connection over a limit is closed
// at once, so a flood cannot exhaust memory, CPU or the slots themselves;
// every pending connection is closed when the first-message deadline
// (Config.HandshakeTimeout) passes.
//
// A source is an IP address. It is known once a connection from it has
// completed the handshake (it holds the key) or once this server has
// dialed it (a peer in the Raft configuration or the leader): known
// sources share the whole budget, strangers only maxPendingStrangers of
// it, so however many keyless hosts connect, maxPendingConns -
// maxPendingStrangers slots stay free for servers.
const (
	maxPendingConns       = 64 // all pending connections
	maxPendingStrangers   = 32 // pending connections from unknown sources
	maxPendingPerStranger = 4  // from one unknown source
	maxPendingPerKnown    = 16 // from one known source (a pod on a server shares its IP)
	maxKnownSources       = 4096
)

// maxForwardConns bounds forwarded requests served at once; more wait for a
// slot (bounded by their own deadline).
const maxForwardConns = 256

// errNotPeer is returned by the TLS verification when the peer does not
// hold a server key.
var errNotPeer = errors.New("raftstore: peer does not hold the server key")

// identity is the TLS identity every holder of the server key shares: an
// ed25519 key derived from the server key and a self-signed certificate.
// accept lists the public keys accepted from peers: the own one first,
// then those derived from the keys accepted during a rotation.
type identity struct {
	pub    ed25519.PublicKey
	cert   tls.Certificate
	accept []ed25519.PublicKey
}

// deriveIdentity derives the transport identity from the server key with
// HKDF-SHA256; the public keys derived from accepted are accepted from
// peers too. Every call with the same key yields the same public key.
func deriveIdentity(serverKey []byte, accepted ...[]byte) (*identity, error) {
	cert, err := Certificate(serverKey)
	if err != nil {
		return nil, err
	}
	pub := cert.PrivateKey.(ed25519.PrivateKey).Public().(ed25519.PublicKey)
	id := &identity{
		pub:    pub,
		cert:   cert,
		accept: []ed25519.PublicKey{pub},
	}
	for _, k := range accepted {
		p, err := derivePrivate(k)
		if err != nil {
			return nil, fmt.Errorf("raftstore: accepted server key: %w", err)
		}
		id.accept = append(id.accept, p.Public().(ed25519.PublicKey))
	}
	return id, nil
}

// Certificate is the TLS certificate every holder of serverKey presents
// to the other servers: self-signed, on the ed25519 key derived from
// serverKey (derivePrivate). Peers accept it for its public key alone.
func Certificate(serverKey []byte) (tls.Certificate, error) {
	priv, err := derivePrivate(serverKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "herd raft"},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("raftstore: transport certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}

// derivePrivate derives the ed25519 transport key of one server key.
func derivePrivate(serverKey []byte) (ed25519.PrivateKey, error) {
	if len(serverKey) != ServerKeySize {
		return nil, fmt.Errorf("raftstore: server key has %d bytes, want %d", len(serverKey), ServerKeySize)
	}
	seed, err := hkdf.Key(sha256.New, serverKey, nil, tlsInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("raftstore: derive transport key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// verify accepts a connection only if the peer's certificate carries one
// of the accepted public keys. TLS 1.3 has already checked that the peer
// holds the matching private key (CertificateVerify), so equality is the
// whole check. It runs on every connection, resumed or not.
func (id *identity) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errNotPeer
	}
	pk, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return errNotPeer
	}
	for _, a := range id.accept {
		if pk.Equal(a) {
			return nil
		}
	}
	return errNotPeer
}

func (id *identity) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{id.cert},
		ClientAuth:             tls.RequireAnyClientCert,
		VerifyConnection:       id.verify,
		SessionTicketsDisabled: true,
	}
}

func (id *identity) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		ServerName:   "herd-raft",
		// The chain is not verified against a CA because there is none:
		// VerifyConnection checks the server's key against the derived one.
		InsecureSkipVerify: true,
		VerifyConnection:   id.verify,
	}
}

// mux owns the TCP listener. After the TLS handshake it reads one protocol
// byte and hands raft connections to Accept (the raft.StreamLayer side) and
// forwarding connections to the forward handler.
//
// Safe for concurrent use.
type mux struct {
	ln        net.Listener
	id        *identity
	serverTLS *tls.Config
	clientTLS *tls.Config
	advertise net.Addr
	log       *slog.Logger
	handshake time.Duration
	net       network

	raftConns chan net.Conn
	pending   pendingConns  // connections before their first message
	fwdSem    chan struct{} // forwarded requests being served
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu      sync.Mutex
	forward func(net.Conn) // nil until set; connections are closed
}

var _ raft.StreamLayer = (*mux)(nil)

// network is how the transport reaches other servers: the host's TCP stack,
// or in tests one that can cut a server off (testnet.go). Safe for
// concurrent use.
type network interface {
	// Listen opens a TCP listener on addr.
	Listen(addr string) (net.Listener, error)
	// DialContext opens a TCP connection to addr, giving up when ctx ends.
	DialContext(ctx context.Context, addr string) (net.Conn, error)
}

// tcpNetwork is the host's TCP stack.
type tcpNetwork struct{}

func (tcpNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func (tcpNetwork) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// listen opens the listener on bindAddr. advertise "" means the listener's
// address; a zero port in advertise is replaced by the bound port. A nil
// nw is the host's TCP stack.
func listen(nw network, bindAddr, advertise string, id *identity, handshake time.Duration, log *slog.Logger) (*mux, error) {
	if nw == nil {
		nw = tcpNetwork{}
	}
	ln, err := nw.Listen(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raftstore: listen on %s: %w", bindAddr, err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	if advertise == "" {
		advertise = bound.String()
	}
	host, port, err := splitHostPort(advertise)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raftstore: advertise address %q: %w", advertise, err)
	}
	if port == 0 {
		port = bound.Port
	}
	adv, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raftstore: advertise address %q: %w", advertise, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raftstore: advertise address %s is not dialable; set AdvertiseAddr", adv)
	}
	m := &mux{
		ln:        ln,
		id:        id,
		serverTLS: id.serverConfig(),
		clientTLS: id.clientConfig(),
		advertise: adv,
		log:       log,
		handshake: handshake,
		net:       nw,
		raftConns: make(chan net.Conn),
		pending:   newPendingConns(),
		fwdSem:    make(chan struct{}, maxForwardConns),
		done:      make(chan struct{}),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// setForward installs the handler for forwarding connections. The handler
// owns the connection and must close it.
func (m *mux) setForward(h func(net.Conn)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forward = h
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			m.log.Warn("raft transport accept failed", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-m.done:
				return
			}
			continue
		}
		backoff = 0
		src := sourceOf(c.RemoteAddr())
		if why := m.pending.admit(src); why != "" {
			if n, log := m.pending.dropped(time.Now()); log {
				m.log.Warn("raft transport dropping connections", "remote", c.RemoteAddr().String(), "reason", why, "dropped", n)
			}
			c.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.serveConn(c, src)
		}()
	}
}

// serveConn authenticates c and dispatches it on its protocol byte. The
// caller has admitted c as pending from src.
func (m *mux) serveConn(c net.Conn, src netip.Addr) {
	released := false
	release := func() {
		if !released {
			released = true
			m.pending.release(src)
		}
	}
	defer release()
	remote := c.RemoteAddr().String()
	tc := tls.Server(c, m.serverTLS)
	_ = tc.SetDeadline(time.Now().Add(m.handshake))
	ctx, cancel := context.WithTimeout(context.Background(), m.handshake)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		m.log.Warn("raft transport rejected connection", "remote", remote, "err", err)
		tc.Close()
		return
	}
	m.pending.markKnown(src) // it holds the key
	var proto [1]byte
	if _, err := tc.Read(proto[:]); err != nil {
		m.log.Debug("raft transport connection closed before protocol byte", "remote", remote, "err", err)
		tc.Close()
		return
	}
	release()
	switch proto[0] {
	case protoRaft:
		_ = tc.SetDeadline(time.Time{})
		select {
		case m.raftConns <- tc:
		case <-m.done:
			tc.Close()
		}
	case protoForward:
		m.mu.Lock()
		h := m.forward
		m.mu.Unlock()
		if h == nil {
			tc.Close()
			return
		}
		select {
		case m.fwdSem <- struct{}{}:
		case <-m.done:
			tc.Close()
			return
		}
		defer func() { <-m.fwdSem }()
		_ = tc.SetDeadline(time.Time{})
		h(tc)
	default:
		m.log.Warn("raft transport: unknown protocol byte, dropping connection", "remote", remote, "byte", proto[0])
		tc.Close()
	}
}

// Accept implements net.Listener for raft: it returns the next raft
// connection.
func (m *mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops the listener. Established connections are closed by their
// owners (raft's transport, the forward handler). Idempotent.
func (m *mux) Close() error {
	m.closeOnce.Do(func() {
		close(m.done)
		m.ln.Close()
	})
	return nil
}

// wait waits for the accept loop and connection handlers to end.
func (m *mux) wait() { m.wg.Wait() }

// Addr returns the advertised address, which raft puts in its configuration.
func (m *mux) Addr() net.Addr { return m.advertise }

// Dial implements raft.StreamLayer: it opens an authenticated raft
// connection to address.
func (m *mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return m.dial(ctx, string(address), protoRaft)
}

// dial connects to address, completes the TLS handshake and sends proto,
// within the handshake timeout (and ctx): a peer that does not answer, such
// as a board without power or a frozen process, costs no more than that.
func (m *mux) dial(ctx context.Context, address string, proto byte) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, m.handshake)
	defer cancel()
	c, err := m.net.DialContext(ctx, address)
	if err != nil {
		return nil, fmt.Errorf("raftstore: dial %s: %w", address, err)
	}
	// A server this one dials (a Raft peer, the leader) keeps pending
	// slots when it connects back, even before its first handshake here.
	m.pending.markKnown(sourceOf(c.RemoteAddr()))
	tc := tls.Client(c, m.clientTLS)
	dl, _ := ctx.Deadline()
	_ = tc.SetDeadline(dl)
	if err := tc.HandshakeContext(ctx); err != nil {
		tc.Close()
		return nil, fmt.Errorf("raftstore: handshake with %s: %w", address, err)
	}
	if _, err := tc.Write([]byte{proto}); err != nil {
		tc.Close()
		return nil, fmt.Errorf("raftstore: handshake with %s: %w", address, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// sourceOf returns the IP address of a TCP address (IPv4-mapped addresses
// unmapped), or the zero Addr for anything else.
func sourceOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// pendingConns counts connections before their first message, by source,
// and enforces the limits above.
//
// Safe for concurrent use.
type pendingConns struct {
	mu        sync.Mutex
	total     int
	strangers int
	bySource  map[netip.Addr]int
	known     map[netip.Addr]struct{}
	// Drops are logged at most once a second, with the count since.
	drops   int
	lastLog time.Time
}

func newPendingConns() pendingConns {
	return pendingConns{bySource: make(map[netip.Addr]int), known: make(map[netip.Addr]struct{})}
}

// admit counts a new connection from src, or returns why it is refused.
func (p *pendingConns) admit(src netip.Addr) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, known := p.known[src]
	switch {
	case p.total >= maxPendingConns:
		return "too many connections in the handshake"
	case known && p.bySource[src] >= maxPendingPerKnown:
		return "too many connections in the handshake from this server's address"
	case !known && p.strangers >= maxPendingStrangers:
		return "too many connections in the handshake from unknown addresses"
	case !known && p.bySource[src] >= maxPendingPerStranger:
		return "too many connections in the handshake from this unknown address"
	}
	p.total++
	p.bySource[src]++
	if !known {
		p.strangers++
	}
	return ""
}

// release uncounts a connection admitted from src. If src became known
// meanwhile, markKnown has already moved it out of the strangers' count.
func (p *pendingConns) release(src netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.bySource[src]--; p.bySource[src] <= 0 {
		delete(p.bySource, src)
	}
	if _, known := p.known[src]; !known {
		p.strangers--
	}
}

// markKnown records src as a server's address. Its pending connections
// stop counting as strangers'.
func (p *pendingConns) markKnown(src netip.Addr) {
	if !src.IsValid() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.known[src]; ok || len(p.known) >= maxKnownSources {
		return
	}
	p.known[src] = struct{}{}
	p.strangers -= p.bySource[src]
}

// dropped counts a refused connection and says whether to log it now, with
// the number of drops since the last log line.
func (p *pendingConns) dropped(now time.Time) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops++
	if now.Sub(p.lastLog) < time.Second {
		return 0, false
	}
	n := p.drops
	p.drops, p.lastLog = 0, now
	return n, true
}

// counts returns the pending connections in all, from strangers and from
// src, for tests.
func (p *pendingConns) counts(src netip.Addr) (total, strangers, fromSrc int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total, p.strangers, p.bySource[src]
}
