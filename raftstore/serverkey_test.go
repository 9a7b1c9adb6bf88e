package raftstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

// attackerDial connects to addr presenting the identity derived from key
// and accepting whatever certificate the server shows (an attacker does not
// care who it talks to), then sends a forwarded create of a pod. It
// returns the error of reading the answer: nil means the server answered.
func attackerDial(t *testing.T, addr string, key []byte, proto byte, name string) error {
	t.Helper()
	id, err := deriveIdentity(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{id.cert}, InsecureSkipVerify: true}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{proto}); err != nil {
		return err
	}
	if proto != protoForward {
		_, err := c.Read(make([]byte, 1))
		return err
	}
	if err := writeFrame(c, forwardRequest{Ops: []Op{op(OpCreate, obj(api.KindPod, name, 0, `{"node":"anywhere"}`, "", nil))}, TimeoutMillis: 5000}); err != nil {
		return err
	}
	var resp forwardResponse
	return readFrame(c, 1<<20, &resp)
}

// TestOnlyServerKeyHoldersReachTheTransport: a holder of the gossip key (a
// worker) or of any other key can neither forward a write nor open a Raft
// connection, even when it skips checking the server's certificate.
func TestOnlyServerKeyHoldersReachTheTransport(t *testing.T) {
	c := NewTestCluster(t, 1)
	s := c.Stores[0]
	gossipKey := TestKey("gossip")
	for _, tc := range []struct {
		name  string
		key   []byte
		proto byte
	}{
		{"gossip key forwards a write", gossipKey, protoForward},
		{"gossip key opens raft", gossipKey, protoRaft},
		{"other key forwards a write", TestKey("other"), protoForward},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := attackerDial(t, s.Addr(), tc.key, tc.proto, "forged"); err == nil {
				t.Fatal("the server answered a peer without the server key")
			}
		})
	}
	if _, err := s.Get(api.KindPod, "forged"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("forged pod: err %v, want not found", err)
	}
	// The same request with the server key goes through: the refusals
	// above are the key's doing.
	if err := attackerDial(t, s.Addr(), c.Key, protoForward, "genuine"); err != nil {
		t.Fatalf("a holder of the server key was refused: %v", err)
	}
	if _, err := s.Get(api.KindPod, "genuine"); err != nil {
		t.Fatalf("genuine pod: %v", err)
	}
}

// TestAcceptServerKeys: during a rotation a server presenting the new key
// is accepted by one that still presents the old key and lists the new as
// accepted, and the other way round; a key in neither list is refused.
func TestAcceptServerKeys(t *testing.T) {
	oldKey, newKey, other := TestKey("old"), TestKey("new"), TestKey("other")
	both, err := deriveIdentity(oldKey, newKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		peer []byte
		ok   bool
	}{{"old", oldKey, true}, {"new", newKey, true}, {"other", other, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := deriveIdentity(tc.peer)
			if err != nil {
				t.Fatal(err)
			}
			err = both.verify(tls.ConnectionState{PeerCertificates: p.certificates(t)})
			if (err == nil) != tc.ok {
				t.Errorf("verify = %v, want ok %v", err, tc.ok)
			}
		})
	}
	if _, err := deriveIdentity(oldKey, []byte("short")); err == nil {
		t.Error("a short accepted key was taken")
	}
}

// certificates parses id's certificate, as a peer would see it.
func (id *identity) certificates(t *testing.T) []*x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(id.cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{c}
}
