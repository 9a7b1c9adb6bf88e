package httpapi

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"strings"

	"github.com/herd-dev/herd/api"
)

// Secrets (api.Secret) have their own write path: the body is an
// api.SecretRequest with plain values, which this server seals with
// Config.Secrets before anything goes to the store, so no plain value
// reaches Raft, a log or an answer. A create is POST /v1/secrets; a
// replace (every key, as herdctl create secret --overwrite sends it) is
// PUT /v1/secrets/{name}, compare-and-swap on metadata.resourceVersion
// when the body carries one. Reads answer with the sealed form. A secret
// is not deleted while a template or a live pod names it (409), and never
// applied (apply refuses the kind).

// maxSecretsUsersShown bounds the users a refused delete names.
const maxSecretUsersShown = 5

// decodeSecret reads and checks a secret's create or replace body; name is
// the path's ("" for a create).
func (s *Server) decodeSecret(w http.ResponseWriter, r *http.Request, name string) (*api.SecretRequest, error) {
	if s.cfg.Secrets == nil {
		return nil, newError(http.StatusServiceUnavailable, api.CodeNoLeader,
			"this agent cannot seal secrets: only a server holds the server key; point herdctl at a server")
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	var req api.SecretRequest
	if err := decodeStrict(bytes.NewReader(body), &req, "request body"); err != nil {
		return nil, err
	}
	if name != "" {
		if req.Metadata.Name == "" {
			req.Metadata.Name = name
		} else if req.Metadata.Name != name {
			return nil, badRequest("request body: metadata.name %q does not match the path's %q", req.Metadata.Name, name)
		}
	}
	if errs := api.ValidateSecretRequest(&req); len(errs) > 0 {
		return nil, invalid(errs)
	}
	return &req, nil
}

// sealedSecret reads a secret's create or replace body (decodeSecret) and
// seals it into the raw object the write stores.
func (s *Server) sealedSecret(w http.ResponseWriter, r *http.Request, name string) (*api.SecretRequest, api.RawObject, error) {
	req, err := s.decodeSecret(w, r, name)
	if err != nil {
		return nil, api.RawObject{}, err
	}
	sec, err := s.cfg.Secrets.SealAll(rand.Reader, req)
	if err != nil {
		return nil, api.RawObject{}, err
	}
	if errs := s.cfg.Admission.Validate(sec); len(errs) > 0 {
		return nil, api.RawObject{}, invalid(errs)
	}
	raw, err := specRaw(sec)
	return req, raw, err
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	_, raw, err := s.sealedSecret(w, r, "")
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.createRaw(w, r, raw)
}

func (s *Server) replaceSecret(w http.ResponseWriter, r *http.Request, name string) {
	req, raw, err := s.sealedSecret(w, r, name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	ctx, cancel, err := s.writeCtxID(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer cancel()
	out, err := s.casUpdate(ctx, api.KindSecret, name, req.Metadata.ResourceVersion, func(api.RawObject) (api.RawObject, error) {
		return raw, nil
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// secretInUse refuses the delete of a secret that a template or a live pod
// names (api.SecretUsers), read after a ReadBarrier. A template applied
// between this check and the delete is not seen: its pods then stay
// Pending, naming the missing secret.
func (s *Server) secretInUse(r *http.Request, name string) error {
	if err := s.readBarrier(r); err != nil {
		return err
	}
	var objs []api.Object
	for _, k := range []api.Kind{api.KindDeployment, api.KindDaemon, api.KindJob, api.KindPod} {
		raws, _, err := s.cfg.Store.List(k)
		if err != nil {
			return err
		}
		for _, raw := range raws {
			raw.Kind = k
			if o, err := api.FromRaw(raw); err == nil {
				objs = append(objs, o)
			}
		}
	}
	users := api.SecretUsers(name, objs)
	if len(users) == 0 {
		return nil
	}
	shown := users[:min(len(users), maxSecretUsersShown)]
	more := ""
	if len(users) > len(shown) {
		more = " and more"
	}
	return newError(http.StatusConflict, api.CodeConflict,
		"secret %s is in use by %s%s: remove it from their templates first (the pods would not start again after a reboot or a move)",
		name, strings.Join(shown, ", "), more)
}
