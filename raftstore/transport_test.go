package raftstore

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
)

func TestDeriveIdentity(t *testing.T) {
	a1, err := deriveIdentity(TestKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := deriveIdentity(TestKey("a"))
	b, _ := deriveIdentity(TestKey("b"))
	if !a1.pub.Equal(a2.pub) {
		t.Error("same key, different identities")
	}
	if a1.pub.Equal(b.pub) {
		t.Error("different keys, same identity")
	}
	if _, err := deriveIdentity([]byte("short")); err == nil {
		t.Error("short key accepted")
	}
	// Each side rejects the other's certificate.
	if err := a1.verify(tls.ConnectionState{PeerCertificates: nil}); err == nil {
		t.Error("no certificate accepted")
	}
}

// rawDial opens a TLS connection to addr holding key and sends proto.
func rawDial(t *testing.T, addr string, key []byte, proto byte) net.Conn {
	t.Helper()
	id, err := deriveIdentity(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, id.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{proto}); err != nil {
		t.Fatal(err)
	}
	return c
}

// readResponse reads a forwardResponse frame from c.
func readResponse(t *testing.T, c net.Conn) (forwardResponse, error) {
	t.Helper()
	var resp forwardResponse
	err := readFrame(c, 1<<20, &resp)
	return resp, err
}

func TestMuxSurvivesGarbage(t *testing.T) {
	c := NewTestClusterWithOptions(t, TestClusterOptions{N: 1, Configure: func(_ int, cfg *Config) { cfg.MaxTxnBytes = 4096 }})
	s := c.Stores[0]
	addr := s.Addr()

	t.Run("oversized frame gets an error", func(t *testing.T) {
		conn := rawDial(t, addr, c.Key, protoForward)
		defer conn.Close()
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1<<30)
		conn.Write(hdr[:])
		resp, err := readResponse(t, conn)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil || !errors.Is(resp.Error.toError(), ErrInvalid) {
			t.Errorf("response %+v, want an invalid error", resp)
		}
	})
	t.Run("malformed JSON gets an error", func(t *testing.T) {
		conn := rawDial(t, addr, c.Key, protoForward)
		defer conn.Close()
		body := []byte(`{"ops": [{"type": 12`)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
		conn.Write(append(hdr[:], body...))
		resp, err := readResponse(t, conn)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil || resp.Error.Code != "invalid" {
			t.Errorf("response %+v, want an invalid error", resp)
		}
	})
	t.Run("wrong types get an error", func(t *testing.T) {
		conn := rawDial(t, addr, c.Key, protoForward)
		defer conn.Close()
		writeFrame(conn, map[string]any{"ops": []any{map[string]any{"type": "create", "object": map[string]any{"kind": 5}}}})
		resp, err := readResponse(t, conn)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil || resp.Error.Code != "invalid" {
			t.Errorf("response %+v, want an invalid error", resp)
		}
	})
	t.Run("truncated frame is dropped", func(t *testing.T) {
		conn := rawDial(t, addr, c.Key, protoForward)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 100)
		conn.Write(append(hdr[:], "only a little"...))
		conn.Close()
	})
	t.Run("unknown protocol byte is dropped", func(t *testing.T) {
		conn := rawDial(t, addr, c.Key, 'Z')
		defer conn.Close()
		if n, err := conn.Read(make([]byte, 16)); !errors.Is(err, io.EOF) {
			t.Errorf("read %d bytes, err %v; want the connection closed", n, err)
		}
	})
	t.Run("plain TCP garbage is dropped", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write(bytes.Repeat([]byte{0x16, 0x03, 0x01, 0xff, 0xff, 'R', 0}, 100))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("connection not closed: %v", err)
			}
		}
	})
	t.Run("wrong key is refused", func(t *testing.T) {
		id, _ := deriveIdentity(TestKey("wrong"))
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, id.clientConfig())
		if err == nil {
			conn.Close()
			t.Fatal("handshake with the wrong key succeeded")
		}
	})
	t.Run("no client certificate is refused", func(t *testing.T) {
		id, _ := deriveIdentity(c.Key)
		cfg := id.clientConfig()
		cfg.Certificates = nil
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			conn.Write([]byte{protoForward})
			if _, err := conn.Read(make([]byte, 1)); err == nil {
				t.Fatal("server talked to a client without a certificate")
			}
		}
	})

	// The store still works.
	mustTxn(t, s, op(OpCreate, obj(api.KindPod, "still-alive", 0, `{}`, "", nil)))
}
