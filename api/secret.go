package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Limits of a secret. A secret travels whole through one Raft entry and is
// written to every board that runs a pod using it: small things
// (passwords, tokens, keys, certificates), not files.
const (
	// MaxSecretKeys is the most keys one secret holds.
	MaxSecretKeys = 32
	// MaxSecretKeyLength is the longest key name.
	MaxSecretKeyLength = 63
	// MaxSecretValueBytes is the largest value of one key.
	MaxSecretValueBytes = 32 << 10
	// MaxSecretBytes is the most bytes of values one secret holds.
	MaxSecretBytes = 64 << 10
	// MaxTemplateSecrets is the most secrets one pod template names.
	MaxTemplateSecrets = 8
)

// Secret is a named set of values (a password, a token, a key file),
// created only through the API (herdctl create secret), never in a
// manifest. The server that receives the write seals every value
// (authenticated encryption under a key derived from the servers' key,
// package internal/secretbox) before it reaches Raft: the store, its
// snapshots, get, describe and watch hold only the sealed form. Pods get
// the values as systemd credentials (see PodTemplate.Secrets).
type Secret struct {
	Kind     Kind       `json:"kind"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     SecretSpec `json:"spec"`
}

// SecretSpec is a secret's sealed values, by key.
type SecretSpec struct {
	// Data maps each key ([A-Za-z0-9._-], see SecretKeyProblem) to its
	// sealed value.
	Data map[string]SealedValue `json:"data"`
}

// SealedValue is one value of a secret as the store holds it.
type SealedValue struct {
	// KeyID names the server key the value was sealed with (the first
	// hex digits of a hash derived from it), so that a value sealed
	// before a rotation is opened with the older key of the ring.
	KeyID string `json:"keyID"`
	// Sealed is the nonce followed by the ciphertext and its tag. The
	// associated data binds it to the secret's name and the key's, so it
	// cannot be moved to another secret or key.
	Sealed []byte `json:"sealed"`
	// Hash is a keyed hash of the plain value (HMAC-SHA256 under another
	// key derived from the server key, truncated to SecretHashLength hex
	// digits): equal values sealed under the same server key have equal
	// hashes, so describe can show whether a value changed without
	// showing it, and a short password cannot be found by hashing
	// guesses without the server key.
	Hash string `json:"hash"`
}

// CredentialsDirVar is the variable systemd sets to the directory of a
// unit's credentials; exec may name it as ${CREDENTIALS_DIRECTORY} when the
// template names secrets.
const CredentialsDirVar = "CREDENTIALS_DIRECTORY"

// SecretHashLength is the number of hex digits of SealedValue.Hash.
const SecretHashLength = 16

// SecretRequest is the body of a secret's create (POST /v1/secrets) and
// replace (PUT /v1/secrets/{name}): the plain values, which the server
// seals before anything is written. The API answers with the stored
// Secret (sealed).
type SecretRequest struct {
	Kind     Kind              `json:"kind,omitempty"`
	Metadata ObjectMeta        `json:"metadata"`
	Data     map[string][]byte `json:"data"`
}

// GetKind implements Object.
func (*Secret) GetKind() Kind { return KindSecret }

// GetMeta implements Object.
func (s *Secret) GetMeta() *ObjectMeta { return &s.Metadata }

// Keys returns the secret's keys, sorted.
func (s *Secret) Keys() []string { return slices.Sorted(maps.Keys(s.Spec.Data)) }

// SecretKeyProblem returns what is wrong with a secret's key name, or "".
// A key is 1 to MaxSecretKeyLength letters, digits, '.', '_' or '-',
// starting with a letter or digit: a file name on every board, and with
// the secret's name the ID of a systemd credential (CredentialID).
func SecretKeyProblem(k string) string {
	switch {
	case k == "":
		return "empty"
	case len(k) > MaxSecretKeyLength:
		return fmt.Sprintf("at most %d characters, got %d", MaxSecretKeyLength, len(k))
	case !isAlnum(k[0]):
		return "must start with a letter or digit"
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return "only letters, digits, '.', '_' and '-' are allowed"
		}
	}
	return ""
}

// CredentialID is the systemd credential ID of one key of a secret, as a
// pod sees it in $CREDENTIALS_DIRECTORY: "<secret>_<key>" ("db_password").
// systemd IDs cannot hold '/'; secret names cannot hold '_', so the first
// '_' always splits the ID back into secret and key.
func CredentialID(secret, key string) string { return secret + "_" + key }

// ValidateSecretRequest checks a secret's create or replace body: a valid
// name and labels, 1 to MaxSecretKeys keys with valid names, each value
// 1 to MaxSecretValueBytes bytes, MaxSecretBytes in all. Field paths are
// the body's (metadata.name, data.password).
func ValidateSecretRequest(r *SecretRequest) FieldErrors {
	v := &validator{}
	root := fieldPath(nil)
	if r.Kind != "" && r.Kind != KindSecret {
		v.addf(root.field("kind", "-"), "is %q but the object is a %s", r.Kind, KindSecret)
	}
	v.meta(root.field("metadata", ""), r.Metadata)
	dp := root.field("data", "-")
	total := 0
	switch {
	case len(r.Data) == 0:
		v.addf(dp, "required: at least one key (herdctl create secret NAME --from-file KEY=PATH)")
	case len(r.Data) > MaxSecretKeys:
		v.addf(dp, "%d keys; a secret holds at most %d", len(r.Data), MaxSecretKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Data)) {
		val := r.Data[k]
		total += len(val)
		switch {
		case SecretKeyProblem(k) != "":
			v.addf(dp.key(k), "%q is not a valid key: %s", k, SecretKeyProblem(k))
		case len(val) == 0:
			v.addf(dp.key(k), "empty value: a credential needs at least one byte")
		case len(val) > MaxSecretValueBytes:
			v.addf(dp.key(k), "%d bytes; a value holds at most %d", len(val), MaxSecretValueBytes)
		}
	}
	if total > MaxSecretBytes {
		v.addf(dp, "%d bytes of values; a secret holds at most %d", total, MaxSecretBytes)
	}
	return v.fieldErrors(ObjectRef(KindSecret, r.Metadata.Name))
}

// secret checks a stored (sealed) secret: valid keys, each with a key id,
// a sealed value and a hash, and no more than a request may carry.
func (v *validator) secret(p fieldPath, s *SecretSpec) {
	dp := p.field("data", "-")
	switch {
	case len(s.Data) == 0:
		v.addf(dp, "required: at least one key")
	case len(s.Data) > MaxSecretKeys:
		v.addf(dp, "%d keys; a secret holds at most %d", len(s.Data), MaxSecretKeys)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		sv := s.Data[k]
		total += len(sv.Sealed)
		switch {
		case SecretKeyProblem(k) != "":
			v.addf(dp.key(k), "%q is not a valid key: %s", k, SecretKeyProblem(k))
		case sv.KeyID == "" || len(sv.Sealed) == 0 || len(sv.Hash) != SecretHashLength:
			v.addf(dp.key(k), "not sealed: values are sealed by the server that receives the write (POST /v1/secrets with plain data)")
		}
	}
	// Sealing adds a nonce and a tag (40 bytes) per key.
	if total > MaxSecretBytes+64*len(s.Data) {
		v.addf(dp, "%d sealed bytes; a secret holds at most %d bytes of values", total, MaxSecretBytes)
	}
}

// templateSecrets checks a template's secrets: at most MaxTemplateSecrets
// names, each a valid name, none twice.
func (v *validator) templateSecrets(p fieldPath, names []string) {
	if len(names) > MaxTemplateSecrets {
		v.addf(p, "%d secrets; a template may name at most %d", len(names), MaxTemplateSecrets)
		return
	}
	seen := make(map[string]int, len(names))
	for i, n := range names {
		ip := p.index(i)
		if msg := nameProblem(n); msg != "" {
			if n == "" {
				v.addf(ip, "must not be empty: the name of a secret (herdctl get secrets)")
			} else {
				v.addf(ip, "%q is not a valid secret name: %s", n, msg)
			}
			continue
		}
		if j, dup := seen[n]; dup {
			v.addf(ip, "duplicate secret %q (also secrets[%d])", n, j)
			continue
		}
		seen[n] = i
	}
}

// podSecrets checks the secrets a controller resolved into a pod's spec:
// they reach the unit file (LoadCredential=) and the board's file names.
func (v *validator) podSecrets(p fieldPath, refs []PodSecret) {
	for i, r := range refs {
		ip := p.index(i)
		if msg := nameProblem(r.Name); msg != "" {
			v.addf(ip.field("name", "-"), "%q is not a valid secret name: %s", r.Name, msg)
		}
		for j, k := range r.Keys {
			if msg := SecretKeyProblem(k); msg != "" {
				v.addf(ip.field("keys", "-").index(j), "%q is not a valid key: %s", k, msg)
			}
		}
	}
}

// fieldErrors returns the validator's problems as FieldErrors of obj, nil
// when there are none.
func (v *validator) fieldErrors(obj string) FieldErrors {
	if len(v.probs) == 0 {
		return nil
	}
	errs := make(FieldErrors, len(v.probs))
	for i, p := range v.probs {
		errs[i] = FieldError{Object: obj, Field: p.path.String(), Message: p.msg}
	}
	return errs
}

// PodSecret is one secret a pod's unit loads, as the controller that
// created the pod found it: its name, its version (SecretVersion, "" when
// the secret did not exist: the pod then stays Pending) and its keys.
type PodSecret struct {
	Name    string   `json:"name"`
	Version string   `json:"version,omitempty"`
	Keys    []string `json:"keys,omitempty"`
}

// SecretVersion returns a short hash of a secret's keys and the keyed
// hashes of their values: it changes when a key is added or removed or a
// value changes, and not when the same values are written again under the
// same server key.
func SecretVersion(s *Secret) string {
	h := sha256.New()
	for _, k := range s.Keys() {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(s.Spec.Data[k].Hash))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:TemplateHashLength]
}

// PodRevision returns the revision of the pods made from t, given the
// stored secrets by name, and the secrets those pods load. For a template
// that names no secret it is TemplateHash(t); otherwise it also hashes the
// version of every secret the template names, so a changed secret is a
// new revision and rolls the pods as a template change does. A missing
// secret counts with version "".
func PodRevision(t PodTemplate, secrets map[string]*Secret) (string, []PodSecret) {
	th := TemplateHash(t)
	if len(t.Secrets) == 0 {
		return th, nil
	}
	h := sha256.New()
	h.Write([]byte(th))
	refs := make([]PodSecret, 0, len(t.Secrets))
	for _, name := range t.Secrets {
		ref := PodSecret{Name: name}
		if s := secrets[name]; s != nil {
			ref.Version = SecretVersion(s)
			ref.Keys = s.Keys()
		}
		refs = append(refs, ref)
		fmt.Fprintf(h, "\x00%s=%s", name, ref.Version)
	}
	return hex.EncodeToString(h.Sum(nil))[:TemplateHashLength], refs
}

// CurrentRevision returns the revision of the pods an owner with template
// t and status.revision statusRevision runs now: TemplateHash(t) for a
// template without secrets; for one with secrets the revision its
// controller recorded (PodRevision needs the secrets' versions, which only
// the controller reads), TemplateHash(t) until it has recorded one.
func CurrentRevision(t PodTemplate, statusRevision string) string {
	if len(t.Secrets) > 0 && statusRevision != "" {
		return statusRevision
	}
	return TemplateHash(t)
}

// MissingSecrets returns the names of a pod's secrets that did not exist
// when it was made, joined by ", " ("" when none): such a pod is not
// scheduled.
func MissingSecrets(p *Pod) string {
	var miss []string
	for _, r := range p.Spec.Secrets {
		if r.Version == "" {
			miss = append(miss, r.Name)
		}
	}
	return strings.Join(miss, ", ")
}

// SecretUsers returns the objects among objs whose template names the
// secret called name ("deployments/web"), and the pods that are not
// terminal and load it while their owner is not among those (an owner
// deleted, its pods still going), sorted. A secret is not deleted while
// it has users: their pods would fail to start again after a reboot or a
// move.
func SecretUsers(name string, objs []Object) []string {
	var users []string
	owners := map[OwnerRef]bool{}
	var pods []*Pod
	for _, o := range objs {
		var t *PodTemplate
		switch x := o.(type) {
		case *Deployment:
			t = &x.Spec.Template
		case *Daemon:
			t = &x.Spec.Template
		case *Job:
			t = &x.Spec.Template
		case *Pod:
			pods = append(pods, x)
		}
		if t != nil && slices.Contains(t.Secrets, name) {
			owners[OwnerRef{Kind: o.GetKind(), Name: o.GetMeta().Name}] = true
			users = append(users, ObjectRef(o.GetKind(), o.GetMeta().Name))
		}
	}
	for _, p := range pods {
		if !p.Status.Phase.Terminal() && !owners[p.Spec.Owner] && (slices.Contains(p.Spec.Template.Secrets, name) ||
			slices.ContainsFunc(p.Spec.Secrets, func(r PodSecret) bool { return r.Name == name })) {
			users = append(users, ObjectRef(KindPod, p.Metadata.Name))
		}
	}
	slices.Sort(users)
	return users
}
