package agent

import (
	"context"
	"fmt"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/secretbox"
	"github.com/herd-dev/herd/units"
)

// credentials returns the plain values of creds, by credential ID, from
// the stored secrets opened with the server key ring: what the leader's
// placer writes to a board for a pod that loads them
// (placer.Config.Credentials). A key the secret no longer has is left out
// (the placer names it); a missing secret or a value that does not open is
// an error, which never carries a value.
func credentials(store interface {
	Get(api.Kind, string) (api.RawObject, error)
}, ring *secretbox.Ring) func(context.Context, []units.Credential) (map[string][]byte, error) {
	return func(ctx context.Context, creds []units.Credential) (map[string][]byte, error) {
		out := make(map[string][]byte, len(creds))
		secrets := map[string]*api.Secret{}
		for _, c := range creds {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s, ok := secrets[c.Secret]
			if !ok {
				raw, err := store.Get(api.KindSecret, c.Secret)
				if err != nil {
					return nil, fmt.Errorf("secret %s: %w", c.Secret, err)
				}
				o, err := api.FromRaw(raw)
				if err != nil {
					return nil, fmt.Errorf("stored secret %s: %w", c.Secret, err)
				}
				s = o.(*api.Secret)
				secrets[c.Secret] = s
			}
			sv, ok := s.Spec.Data[c.Key]
			if !ok {
				continue
			}
			v, err := ring.Open(c.Secret, c.Key, sv)
			if err != nil {
				return nil, err
			}
			out[c.ID()] = v
		}
		return out, nil
	}
}
