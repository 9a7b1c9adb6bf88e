package units

import (
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/herd-dev/herd/api"
)

// CredentialDir is the directory of the pods' credentials on a board: the
// values of the secrets their templates name (api.PodTemplate.Secrets),
// one file per key, root-owned 0600 in this root-owned 0700 directory. It
// is on persistent storage, so a board that reboots while cut off from
// the servers starts its units with their credentials. Flat (no directory
// per unit), so removing a unit's files leaves nothing behind.
const CredentialDir = "/var/lib/herd/credentials"

// CredentialFileMode is the permission of a credential file; systemd
// reads it as root (LoadCredential=) and hands the process its own copy
// in $CREDENTIALS_DIRECTORY, readable by the unit's user only.
const CredentialFileMode = 0o600

// Credential is one key of one secret that a pod's unit loads.
type Credential struct {
	Secret, Key string
}

// ID is the credential's systemd ID, the file name the process sees in
// $CREDENTIALS_DIRECTORY (api.CredentialID: "db_password").
func (c Credential) ID() string { return api.CredentialID(c.Secret, c.Key) }

// CredentialPath returns where the credential id of a unit lives on a
// board: CredentialDir/herd-<pod>.<id>.
func CredentialPath(unit, id string) string {
	return CredentialDir + "/" + strings.TrimSuffix(unit, api.UnitSuffix) + "." + id
}

// IsCredentialPath reports whether p is a credential file of unit (what a
// removal may delete when an old unit file names it).
func IsCredentialPath(unit, p string) bool {
	id, ok := strings.CutPrefix(p, CredentialDir+"/"+strings.TrimSuffix(unit, api.UnitSuffix)+".")
	return ok && id != "" && path.Clean(p) == p && !strings.Contains(id, "/")
}

// Credentials returns the credentials p's unit loads, sorted by ID: every
// key of every secret in p.Spec.Secrets (what its owner's controller
// found when it made the pod).
func Credentials(p *api.Pod) []Credential {
	var out []Credential
	for _, s := range p.Spec.Secrets {
		for _, k := range s.Keys {
			out = append(out, Credential{Secret: s.Name, Key: k})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return slices.CompactFunc(out, func(a, b Credential) bool { return a == b })
}
