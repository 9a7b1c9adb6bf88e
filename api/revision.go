package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// TemplateHashLength is the number of hex digits TemplateHash returns.
const TemplateHashLength = 10

// TemplateHash returns a short, stable hash of a pod template: the first
// TemplateHashLength hex digits of the SHA-256 of its JSON encoding. JSON
// objects are written with sorted keys, so the hash does not depend on map
// order, and it is the same on every agent and every architecture. Pods carry
// it as their revision: a pod whose revision differs from its owner's current
// TemplateHash is out of date.
//
// Hash the stored (defaulted) template: a field that SetDefaults fills in
// changes the hash. Adding a field to PodTemplate changes the hash of
// templates only when the new field is set, since empty fields are omitted
// from the JSON.
func TemplateHash(t PodTemplate) string {
	b, err := json.Marshal(t)
	if err != nil {
		// PodTemplate holds only strings, ints, slices and maps of them:
		// Marshal cannot fail.
		panic("api: TemplateHash: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:TemplateHashLength]
}
