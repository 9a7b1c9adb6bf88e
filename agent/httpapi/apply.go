package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// applyItem is one admitted object of an apply request.
type applyItem struct {
	obj          api.Object
	ownsReplicas bool
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	dryRun := boolParam(r, "dryRun")
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var req api.ApplyRequest
	if err := decodeStrict(bytes.NewReader(body), &req, "request body"); err != nil {
		s.writeError(w, err)
		return
	}
	if len(req.Objects) == 0 {
		s.writeError(w, badRequest("request body: objects is empty; nothing to apply"))
		return
	}
	items, errs := s.admitAll(req.Objects)
	if len(errs) > 0 {
		s.writeError(w, invalid(errs))
		return
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	if !dryRun { // a dry run writes nothing: its id, if any, is unused
		id, err := requestID(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		if id != "" {
			ctx = raftstore.WithRequestID(ctx, id)
		}
	}
	results, err := s.applyItems(ctx, items, dryRun)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ApplyResponse{Results: results})
}

// admitAll decodes every object strictly into its kind's struct, defaults
// and validates it, and returns the problems of all objects together.
func (s *Server) admitAll(objects []json.RawMessage) ([]applyItem, []api.FieldError) {
	var (
		items []applyItem
		errs  []api.FieldError
		seen  = map[string]int{}
	)
	for i, data := range objects {
		pos := fmt.Sprintf("objects[%d]", i)
		var head objectHead
		if err := json.Unmarshal(data, &head); err != nil {
			errs = append(errs, decodeFieldError(pos, err))
			continue
		}
		ref := pos
		if head.Kind != "" && head.Metadata.Name != "" {
			ref = api.ObjectRef(head.Kind, head.Metadata.Name)
		}
		o := api.New(head.Kind)
		switch {
		case head.Kind == "":
			errs = append(errs, api.FieldError{Object: ref, Field: "kind", Message: "required: deployments, daemons, services or jobs"})
			continue
		case o == nil:
			errs = append(errs, api.FieldError{Object: ref, Field: "kind",
				Message: fmt.Sprintf("unknown kind %q: want deployments, daemons, services or jobs", head.Kind)})
			continue
		case head.Kind == api.KindSecret:
			errs = append(errs, api.FieldError{Object: ref, Field: "kind",
				Message: "secrets cannot be applied: create them with herdctl create secret (POST /v1/secrets), which seals the values"})
			continue
		case managedByHerd(head.Kind):
			errs = append(errs, api.FieldError{Object: ref, Field: "kind",
				Message: fmt.Sprintf("%s are managed by herd and cannot be applied", head.Kind)})
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(o); err != nil {
			errs = append(errs, decodeFieldError(ref, err))
			continue
		}
		key := api.ObjectRef(head.Kind, o.GetMeta().Name)
		if j, dup := seen[key]; dup {
			errs = append(errs, api.FieldError{Object: key, Field: "metadata.name",
				Message: fmt.Sprintf("objects[%d] and objects[%d] are the same object", j, i)})
			continue
		}
		seen[key] = i
		owns, ferrs := s.admit(o)
		errs = append(errs, ferrs...)
		items = append(items, applyItem{obj: o, ownsReplicas: owns})
	}
	return items, errs
}

// decodeFieldError turns a JSON decoding error of one object into a field
// error naming the field where it can.
func decodeFieldError(ref string, err error) api.FieldError {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &typ):
		return api.FieldError{Object: ref, Field: typ.Field,
			Message: fmt.Sprintf("cannot use JSON %s as %s", typ.Value, typ.Type)}
	case errors.As(err, &syn):
		return api.FieldError{Object: ref, Message: fmt.Sprintf("invalid JSON at byte offset %d of the object: %v", syn.Offset, err)}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return api.FieldError{Object: ref, Field: strings.Trim(f, `"`), Message: "unknown field"}
	}
	return api.FieldError{Object: ref, Message: msg}
}

// applyItems writes items in one transaction: get every stored object,
// compute creates and updates, and commit them with compare-and-swap,
// starting over when a concurrent writer got in between.
func (s *Server) applyItems(ctx context.Context, items []applyItem, dryRun bool) ([]api.ApplyResult, error) {
	for attempt := 0; ; attempt++ {
		// Plan against the leader's state, never a lagging copy's.
		if err := s.cfg.Store.ReadBarrier(ctx); err != nil {
			return nil, err
		}
		results, ops, opIndex, err := s.planApply(items)
		if err != nil {
			return nil, err
		}
		if dryRun || len(ops) == 0 {
			return results, nil
		}
		out, err := s.cfg.Store.Txn(ctx, ops)
		if err != nil {
			if retryable(err) && attempt < maxCASRetries {
				continue
			}
			return nil, err
		}
		for j, o := range out {
			results[opIndex[j]].Object = o
		}
		return results, nil
	}
}

// retryable reports whether an apply transaction failed because the
// store changed since it was read.
func retryable(err error) bool {
	return errors.Is(err, raftstore.ErrConflict) || errors.Is(err, raftstore.ErrExists) || errors.Is(err, raftstore.ErrNotFound)
}

// planApply turns items into one create or compare-and-swap update each
// and asks the store's own rules (raftstore.Preview) what committing them
// would store: one result per item (the object as it will be stored,
// "unchanged" for a write the store would treat as a no-op) and the ops
// that change something; opIndex maps each op to its item.
func (s *Server) planApply(items []applyItem) (results []api.ApplyResult, ops []raftstore.Op, opIndex []int, err error) {
	if err := s.checkProxyPorts(items); err != nil {
		return nil, nil, nil, err
	}
	now := s.cfg.Clock.Now().UTC()
	all := make([]raftstore.Op, 0, len(items))
	stored := make(map[string]api.RawObject, len(items))
	for _, it := range items {
		kind, name := it.obj.GetKind(), it.obj.GetMeta().Name
		cur, gerr := s.cfg.Store.Get(kind, name)
		exists := gerr == nil
		if gerr != nil && !errors.Is(gerr, raftstore.ErrNotFound) {
			return nil, nil, nil, gerr
		}
		if !it.ownsReplicas {
			var prev *api.RawObject
			if exists {
				prev = &cur
			}
			if err := setReplicas(it.obj, prev); err != nil {
				return nil, nil, nil, err
			}
		}
		if err := keepRebalance(it.obj, cur, exists); err != nil {
			return nil, nil, nil, err
		}
		raw, err := specRaw(it.obj)
		if err != nil {
			return nil, nil, nil, err
		}
		op := raftstore.Op{Type: raftstore.OpCreate, Object: raw}
		if exists {
			stored[api.ObjectRef(kind, name)] = cur
			op.Type = raftstore.OpUpdate
			raw.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
			op.Object = raw
		} else {
			op.Object.Metadata.Created = now
		}
		all = append(all, op)
	}
	objs, changed, err := raftstore.Preview(all, func(kind api.Kind, name string) (api.RawObject, bool) {
		o, ok := stored[api.ObjectRef(kind, name)]
		return o, ok
	}, now)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, op := range all {
		res := api.ApplyResult{Kind: op.Object.Kind, Name: op.Object.Metadata.Name, Object: objs[i]}
		switch {
		case !changed[i]:
			res.Action = api.ApplyUnchanged
		case op.Type == raftstore.OpCreate:
			res.Action = api.ApplyCreated
		default:
			res.Action = api.ApplyConfigured
			// Not committed yet: the version it will replace.
			res.Object.Metadata.ResourceVersion = op.Object.Metadata.ResourceVersion
		}
		if changed[i] {
			ops = append(ops, op)
			opIndex = append(opIndex, i)
		}
		results = append(results, res)
	}
	return results, ops, opIndex, nil
}

// keepRebalance keeps the stored deployment's rebalance request across an
// apply (api.Deployment.KeepRebalance).
func keepRebalance(o api.Object, cur api.RawObject, exists bool) error {
	d, ok := o.(*api.Deployment)
	if !ok {
		return nil
	}
	var stored *api.Deployment
	if exists {
		so, err := api.FromRaw(cur)
		if err != nil {
			return fmt.Errorf("decoding stored %s: %w", api.ObjectRef(cur.Kind, cur.Metadata.Name), err)
		}
		stored = so.(*api.Deployment)
	}
	d.KeepRebalance(stored)
	return nil
}

// checkProxyPorts refuses services whose proxy port another service owns
// (api.ProxyConflicts), against the stored services.
func (s *Server) checkProxyPorts(items []applyItem) error {
	var applied []*api.Service
	for _, it := range items {
		if svc, ok := it.obj.(*api.Service); ok && len(svc.ProxyPorts()) > 0 {
			applied = append(applied, svc)
		}
	}
	if len(applied) == 0 {
		return nil
	}
	raws, _, err := s.cfg.Store.List(api.KindService)
	if err != nil {
		return err
	}
	if errs := api.ProxyConflicts(applied, api.FromRawList[*api.Service](api.KindService, raws)); len(errs) > 0 {
		return invalid(errs)
	}
	return nil
}
