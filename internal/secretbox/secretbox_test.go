package secretbox

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/herd-dev/herd/api"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestSealOpen(t *testing.T) {
	r, err := NewRing([][]byte{key(1)})
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("hunter2")
	v, err := r.Seal(rand.Reader, "db", "password", plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(v.Sealed, plain) {
		t.Fatalf("sealed value holds the plain text")
	}
	if len(v.Hash) != api.SecretHashLength || v.KeyID != r.PrimaryID() {
		t.Fatalf("hash %q key id %q", v.Hash, v.KeyID)
	}
	got, err := r.Open("db", "password", v)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Same value, same key: same hash; new nonce: different ciphertext.
	v2, _ := r.Seal(rand.Reader, "db", "password", plain)
	if v2.Hash != v.Hash || bytes.Equal(v2.Sealed, v.Sealed) {
		t.Fatalf("reseal: hash %q vs %q, sealed equal %v", v2.Hash, v.Hash, bytes.Equal(v2.Sealed, v.Sealed))
	}
}

func TestOpenRefuses(t *testing.T) {
	r, _ := NewRing([][]byte{key(1)})
	v, _ := r.Seal(rand.Reader, "db", "password", []byte("hunter2"))
	flipped := v
	flipped.Sealed = bytes.Clone(v.Sealed)
	flipped.Sealed[len(flipped.Sealed)-1] ^= 1
	other, _ := NewRing([][]byte{key(2)})
	for _, tc := range []struct {
		name, secret, key string
		ring              *Ring
		v                 api.SealedValue
	}{
		{"other secret", "web", "password", r, v},
		{"other key", "db", "user", r, v},
		{"changed", "db", "password", r, flipped},
		{"short", "db", "password", r, api.SealedValue{KeyID: v.KeyID, Sealed: v.Sealed[:10]}},
		{"unknown key id", "db", "password", other, v},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ring.Open(tc.secret, tc.key, tc.v)
			if !errors.Is(err, ErrOpen) || got != nil {
				t.Fatalf("Open = %q, %v; want ErrOpen", got, err)
			}
			if bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
				t.Fatalf("error holds the value: %v", err)
			}
		})
	}
}

// TestRotation: a value sealed with the old primary opens once the new key
// is primary and the old one second in the ring; new values use the new
// key; without the old key it no longer opens.
func TestRotation(t *testing.T) {
	old, _ := NewRing([][]byte{key(1)})
	v, _ := old.Seal(rand.Reader, "db", "password", []byte("hunter2"))
	rotated, _ := NewRing([][]byte{key(2), key(1)})
	if got, err := rotated.Open("db", "password", v); err != nil || string(got) != "hunter2" {
		t.Fatalf("rotated Open = %q, %v", got, err)
	}
	nv, _ := rotated.Seal(rand.Reader, "db", "password", []byte("hunter2"))
	if nv.KeyID == v.KeyID || nv.KeyID != rotated.PrimaryID() {
		t.Fatalf("new value sealed with %s, old with %s", nv.KeyID, v.KeyID)
	}
	if nv.Hash == v.Hash {
		t.Fatalf("hash does not depend on the server key")
	}
	gone, _ := NewRing([][]byte{key(2)})
	if _, err := gone.Open("db", "password", v); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open without the old key: %v", err)
	}
}

func TestNewRing(t *testing.T) {
	if _, err := NewRing(nil); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("NewRing(nil) = %v", err)
	}
	if _, err := NewRing([][]byte{[]byte("short")}); err == nil {
		t.Fatal("NewRing accepted a 5-byte key")
	}
}

func TestSealAll(t *testing.T) {
	r, _ := NewRing([][]byte{key(1)})
	req := &api.SecretRequest{Metadata: api.ObjectMeta{Name: "db", Labels: map[string]string{"app": "web"}},
		Data: map[string][]byte{"password": []byte("hunter2"), "user": []byte("web")}}
	s, err := r.SealAll(rand.Reader, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Validate(s); err != nil {
		t.Fatalf("sealed secret does not validate: %v", err)
	}
	for k, want := range req.Data {
		got, err := r.Open("db", k, s.Spec.Data[k])
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: Open = %q, %v", k, got, err)
		}
	}
}
