package secretbox

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/herd-dev/herd/api"
)

// Context strings of the derived keys. Changing one makes every stored
// value unreadable: never do.
const (
	infoKeyID = "herd secrets key id v1"
	infoAEAD  = "herd secrets xchacha20poly1305 v1"
	infoHash  = "herd secrets hmac-sha256 v1"
	adPrefix  = "herd secret v1"
)

// Errors. Every error of Open matches ErrOpen.
var (
	// ErrNoKeys is returned by NewRing for an empty ring.
	ErrNoKeys = errors.New("secretbox: no server keys: secrets are sealed and opened by servers only")
	// ErrOpen is matched by every failure to open a value.
	ErrOpen = errors.New("secretbox: cannot open sealed value")
)

// Ring is the servers' key ring as secretbox uses it. It is safe for
// concurrent use.
type Ring struct {
	keys []derived // first: primary
}

type derived struct {
	id   string
	aead cipher.AEAD
	mac  []byte
}

// NewRing derives the ring's keys from the server keys (the first is the
// primary, the one new values are sealed with).
func NewRing(serverKeys [][]byte) (*Ring, error) {
	if len(serverKeys) == 0 {
		return nil, ErrNoKeys
	}
	r := &Ring{}
	for i, k := range serverKeys {
		if len(k) < 16 {
			return nil, fmt.Errorf("secretbox: server key %d: %d bytes, want at least 16", i, len(k))
		}
		id, err := hkdf.Key(sha256.New, k, nil, infoKeyID, 4)
		if err != nil {
			return nil, fmt.Errorf("secretbox: derive key id: %w", err)
		}
		ek, err := hkdf.Key(sha256.New, k, nil, infoAEAD, chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("secretbox: derive key: %w", err)
		}
		mk, err := hkdf.Key(sha256.New, k, nil, infoHash, 32)
		if err != nil {
			return nil, fmt.Errorf("secretbox: derive hash key: %w", err)
		}
		aead, err := chacha20poly1305.NewX(ek)
		if err != nil {
			return nil, fmt.Errorf("secretbox: %w", err)
		}
		r.keys = append(r.keys, derived{id: hex.EncodeToString(id), aead: aead, mac: mk})
	}
	return r, nil
}

// PrimaryID returns the key id of the primary key.
func (r *Ring) PrimaryID() string { return r.keys[0].id }

// ad is the associated data of one value: it names the secret and key.
func ad(secret, key string) []byte {
	return []byte(adPrefix + "\x00" + secret + "\x00" + key)
}

// Hash returns the keyed hash of a plain value under the primary key, as
// api.SealedValue.Hash holds it.
func (r *Ring) Hash(plain []byte) string {
	m := hmac.New(sha256.New, r.keys[0].mac)
	m.Write(plain)
	return hex.EncodeToString(m.Sum(nil))[:api.SecretHashLength]
}

// Seal seals plain as the value of key in the secret called secret, with
// the primary key and a nonce read from rand.
func (r *Ring) Seal(rand io.Reader, secret, key string, plain []byte) (api.SealedValue, error) {
	k := r.keys[0]
	nonce := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+len(plain)+k.aead.Overhead())
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return api.SealedValue{}, fmt.Errorf("secretbox: nonce: %w", err)
	}
	return api.SealedValue{
		KeyID:  k.id,
		Sealed: k.aead.Seal(nonce, nonce, plain, ad(secret, key)),
		Hash:   r.Hash(plain),
	}, nil
}

// SealAll seals every value of a secret create or replace request, which
// the caller has validated (api.ValidateSecretRequest), into a stored
// secret with the request's name and labels.
func (r *Ring) SealAll(rand io.Reader, req *api.SecretRequest) (*api.Secret, error) {
	s := &api.Secret{Kind: api.KindSecret, Metadata: api.ObjectMeta{Name: req.Metadata.Name, Labels: req.Metadata.Labels},
		Spec: api.SecretSpec{Data: make(map[string]api.SealedValue, len(req.Data))}}
	for k, v := range req.Data {
		sv, err := r.Seal(rand, s.Metadata.Name, k, v)
		if err != nil {
			return nil, err
		}
		s.Spec.Data[k] = sv
	}
	return s, nil
}

// Open returns the plain value of key in the secret called secret. It
// fails (ErrOpen) when no key of the ring has the value's key id, or when
// the value does not authenticate: changed, or sealed for another secret
// or key.
func (r *Ring) Open(secret, key string, v api.SealedValue) ([]byte, error) {
	for _, k := range r.keys {
		if k.id != v.KeyID {
			continue
		}
		if len(v.Sealed) < chacha20poly1305.NonceSizeX+k.aead.Overhead() {
			return nil, fmt.Errorf("%w: %s key %q: too short", ErrOpen, secret, key)
		}
		nonce, ct := v.Sealed[:chacha20poly1305.NonceSizeX], v.Sealed[chacha20poly1305.NonceSizeX:]
		plain, err := k.aead.Open(nil, nonce, ct, ad(secret, key))
		if err != nil {
			return nil, fmt.Errorf("%w: %s key %q: it does not authenticate (changed, or sealed for another secret or key)", ErrOpen, secret, key)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("%w: %s key %q: sealed with server key %s, which is not in this server's key ring (rotated out?)", ErrOpen, secret, key, v.KeyID)
}
