package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// TestRealStore runs the main flows against a one-server raftstore, to
// catch any drift between the fake and the real store.
func TestRealStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raft server")
	}
	rc := raftstore.NewTestCluster(t, 1)
	cfg := httpapi.DefaultConfig()
	cfg.Store = rc.Stores[rc.Leader()]
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, _ := client.New([]string{srv.URL}, client.Options{Token: testToken, Retries: -1}) // the server's own answers
	ctx := ctxT(t)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := c.Watch(wctx, api.KindDeployment, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Apply(ctx, []api.Object{deployment("web", nil), service("web")}, false)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	diff(t, "apply", []string{"deployments/web=created", "services/web=created"}, actions(res))
	if _, err := c.Scale(ctx, "web", 3); err != nil {
		t.Fatal(err)
	}
	res, err = c.Apply(ctx, []api.Object{deployment("web", nil), service("web")}, false)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "re-apply", []string{"deployments/web=unchanged", "services/web=unchanged"}, actions(res))
	if r := typed[*api.Deployment](t, res[0].Object).Spec.Replicas; *r != 3 {
		t.Errorf("replicas after re-apply = %d, want the scaled 3", *r)
	}
	stale := typed[*api.Deployment](t, res[0].Object)
	stale.Metadata.ResourceVersion = 1
	_, err = c.Update(ctx, stale)
	apiErr(t, err, http.StatusConflict, "conflict")
	_, err = c.Create(ctx, deployment("web", nil))
	apiErr(t, err, http.StatusConflict, "exists")

	evs, _ := next(t, ch, 2)
	diff(t, "events", []event{{api.EventAdded, api.KindDeployment, "web"}, {api.EventModified, api.KindDeployment, "web"}}, evs)
}
