// Package secretbox seals and opens the values of secrets (api.Secret)
// with the servers' key ring, so that Raft, its snapshots and every API
// answer only ever hold the sealed form.
//
// Every server key of the ring (the agent's server keys, the first the
// primary) gives three derived values, through HKDF-SHA256 with fixed
// context strings: a key id (8 hex digits, stored with every value), an
// XChaCha20-Poly1305 key, and an HMAC-SHA256 key for the value's keyed
// hash (api.SealedValue.Hash). A value is sealed with the primary key
// under a random 24-byte nonce; the associated data is the secret's name
// and the value's key name, so a sealed value cannot be moved to another
// secret or key. Opening picks the ring key by the stored key id, so
// values sealed before a server key rotation stay readable while the old
// key is still in the ring.
//
// The package is pure apart from the randomness it is given: no I/O, no
// logging. Errors never carry a value.
package secretbox
