package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/herd-dev/herd/api"
)

// replicasOf returns the stored replicas of deployment name.
func replicasOf(t *testing.T, e *env, name string) int {
	t.Helper()
	o, err := e.store.Get(api.KindDeployment, name)
	if err != nil {
		t.Fatal(err)
	}
	d := typed[*api.Deployment](t, o)
	return *d.Spec.Replicas
}

func TestRequestIDHeaderValidated(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.Create(ctxT(t), deployment("web", intp(1))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"has space", strings.Repeat("a", 65), "a/b"} {
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPut, "/v1/deployments/web/scale", `{"replicas":3}`},
			{http.MethodDelete, "/v1/deployments/web", ""},
			{http.MethodPost, "/v1/services", jsonOf(t, service("db"))},
		} {
			code, body := e.raw(t, req.method, req.path, req.body, api.HeaderRequestID, id)
			if code != http.StatusBadRequest || !strings.Contains(body, api.HeaderRequestID) {
				t.Errorf("%s %s with id %q: %d %s, want 400 naming the header", req.method, req.path, id, code, body)
			}
		}
	}
	if n := replicasOf(t, e, "web"); n != 1 {
		t.Errorf("replicas %d after rejected writes, want 1", n)
	}
	// A dry run writes nothing: its header is not looked at.
	apply := `{"objects":[` + jsonOf(t, deployment("web", intp(4))) + `]}`
	if code, body := e.raw(t, http.MethodPost, "/v1/apply?dryRun=1", apply, api.HeaderRequestID, "not valid"); code != http.StatusOK {
		t.Errorf("dry run with a bad id: %d %s", code, body)
	}
}

// TestRequestIDAppliedOnce: each write resent with its id, after another
// client's write got in between, is answered without being applied again.
func TestRequestIDAppliedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.Create(ctx, deployment("web", intp(1))); err != nil {
		t.Fatal(err)
	}
	hdr := func(id string) []string { return []string{api.HeaderRequestID, id} }

	// scale
	if code, body := e.raw(t, http.MethodPut, "/v1/deployments/web/scale", `{"replicas":5}`, hdr("scale-1")...); code != http.StatusOK {
		t.Fatalf("scale: %d %s", code, body)
	}
	if _, err := e.c.Scale(ctx, "web", 7); err != nil {
		t.Fatal(err)
	}
	code, body := e.raw(t, http.MethodPut, "/v1/deployments/web/scale", `{"replicas":5}`, hdr("scale-1")...)
	if code != http.StatusOK {
		t.Fatalf("resent scale: %d %s", code, body)
	}
	var got api.RawObject
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if r := *typed[*api.Deployment](t, got).Spec.Replicas; r != 7 {
		t.Errorf("resent scale answered replicas %d, want the current 7", r)
	}
	if n := replicasOf(t, e, "web"); n != 7 {
		t.Errorf("resent scale overwrote the other write: replicas %d, want 7", n)
	}

	// compare-and-swap update: its resend is no conflict.
	cur, err := e.c.Get(ctx, api.KindDeployment, "web")
	if err != nil {
		t.Fatal(err)
	}
	d := deployment("web", intp(2))
	d.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
	upd := jsonOf(t, d)
	if code, body := e.raw(t, http.MethodPut, "/v1/deployments/web", upd, hdr("upd-1")...); code != http.StatusOK {
		t.Fatalf("update: %d %s", code, body)
	}
	if _, err := e.c.Scale(ctx, "web", 9); err != nil {
		t.Fatal(err)
	}
	if code, body := e.raw(t, http.MethodPut, "/v1/deployments/web", upd, hdr("upd-1")...); code != http.StatusOK {
		t.Errorf("resent CAS update: %d %s, want 200", code, body)
	}
	if code, _ := e.raw(t, http.MethodPut, "/v1/deployments/web", upd, hdr("upd-2")...); code != http.StatusConflict {
		t.Errorf("stale CAS update with a new id: %d, want 409", code)
	}
	if n := replicasOf(t, e, "web"); n != 9 {
		t.Errorf("replicas %d, want the other write's 9", n)
	}

	// apply
	apply := `{"objects":[` + jsonOf(t, deployment("web", intp(4))) + `]}`
	if code, body := e.raw(t, http.MethodPost, "/v1/apply", apply, hdr("apply-1")...); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	if _, err := e.c.Scale(ctx, "web", 6); err != nil {
		t.Fatal(err)
	}
	if code, body := e.raw(t, http.MethodPost, "/v1/apply", apply, hdr("apply-1")...); code != http.StatusOK {
		t.Fatalf("resent apply: %d %s", code, body)
	}
	if n := replicasOf(t, e, "web"); n != 6 {
		t.Errorf("resent apply overwrote the other write: replicas %d, want 6", n)
	}

	// create and delete: resends are not 409 exists and 404.
	svc := jsonOf(t, service("db"))
	for i := range 2 {
		if code, body := e.raw(t, http.MethodPost, "/v1/services", svc, hdr("create-db")...); code != http.StatusCreated {
			t.Errorf("create attempt %d: %d %s, want 201", i+1, code, body)
		}
	}
	for i := range 2 {
		if code, body := e.raw(t, http.MethodDelete, "/v1/services/db", "", hdr("delete-db")...); code != http.StatusOK {
			t.Errorf("delete attempt %d: %d %s, want 200", i+1, code, body)
		}
	}
	if code, _ := e.raw(t, http.MethodDelete, "/v1/services/db", "", hdr("delete-db-2")...); code != http.StatusNotFound {
		t.Errorf("delete with a new id: %d, want 404", code)
	}
	// Scale resent after the deployment was deleted: the store answers.
	if code, body := e.raw(t, http.MethodPut, "/v1/deployments/web/scale", `{"replicas":3}`, hdr("scale-2")...); code != http.StatusOK {
		t.Fatalf("scale: %d %s", code, body)
	}
	if err := e.c.Delete(ctx, api.KindDeployment, "web"); err != nil {
		t.Fatal(err)
	}
	if code, body := e.raw(t, http.MethodPut, "/v1/deployments/web/scale", `{"replicas":3}`, hdr("scale-2")...); code != http.StatusOK {
		t.Errorf("resent scale of a since deleted deployment: %d %s, want 200", code, body)
	}
	if code, _ := e.raw(t, http.MethodPut, "/v1/deployments/web/scale", `{"replicas":3}`, hdr("scale-3")...); code != http.StatusNotFound {
		t.Errorf("new scale of a deleted deployment: %d, want 404", code)
	}
}
