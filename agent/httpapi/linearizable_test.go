package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// apiOn serves the API of cluster server i and returns a client of it.
func apiOn(t *testing.T, rc *raftstore.TestCluster, i int, writeTimeout time.Duration) *client.Client {
	t.Helper()
	cfg := httpapi.DefaultConfig()
	cfg.Store = rc.Stores[i]
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	cfg.WriteTimeout = writeTimeout
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.URL}, client.Options{Token: testToken, Retries: -1}) // the server's own answers
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLaggingFollowerServesLeaderState: through a follower that missed
// the writes (cut off while they happened, then healed), gets, scale,
// update and apply see the leader's state at once: an existing object is
// never 404 and a conflict is never decided on the stale copy.
func TestLaggingFollowerServesLeaderState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raft cluster")
	}
	rc := raftstore.NewTestCluster(t, 3)
	leader := rc.Leader()
	f := (leader + 1) % 3
	lc, fc := apiOn(t, rc, leader, 15*time.Second), apiOn(t, rc, f, 15*time.Second)
	ctx := ctxT(t)

	steps := []struct {
		name string
		do   func(t *testing.T, name string) error
	}{
		{"get", func(t *testing.T, name string) error {
			_, err := fc.Get(ctx, api.KindDeployment, name)
			return err
		}},
		{"list", func(t *testing.T, name string) error {
			objs, _, err := fc.List(ctx, api.KindDeployment)
			for _, o := range objs {
				if o.Metadata.Name == name {
					return err
				}
			}
			if err == nil {
				t.Errorf("list through the follower lacks %s", name)
			}
			return err
		}},
		{"scale", func(t *testing.T, name string) error {
			_, err := fc.Scale(ctx, name, 4)
			return err
		}},
		{"update", func(t *testing.T, name string) error {
			cur, err := lc.Get(ctx, api.KindDeployment, name)
			if err != nil {
				return err
			}
			d := typed[*api.Deployment](t, cur)
			d.Metadata.Labels = map[string]string{"tier": "front"}
			_, err = fc.Update(ctx, d) // CAS on the leader's resourceVersion
			return err
		}},
		{"apply", func(t *testing.T, name string) error {
			res, err := fc.Apply(ctx, []api.Object{deployment(name, nil)}, false)
			if err == nil && res[0].Action == "created" {
				t.Errorf("apply through the follower created %s, which exists", name)
			}
			return err
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			name := "web-" + st.name
			rc.Isolate(f)
			if _, err := lc.Create(ctx, deployment(name, nil)); err != nil {
				t.Fatal(err)
			}
			// Move the resourceVersion past the follower's copy.
			if _, err := lc.Scale(ctx, name, 2); err != nil {
				t.Fatal(err)
			}
			rc.Heal(f)
			if err := st.do(t, name); err != nil {
				t.Errorf("%s through the healed follower: %v", st.name, err)
			}
		})
	}
}

// TestDeposedLeaderRefusesReads: an agent whose server was the leader and
// is cut off answers reads with 503 instead of its old state; ?stale
// still reads its copy.
func TestDeposedLeaderRefusesReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raft cluster")
	}
	rc := raftstore.NewTestCluster(t, 3)
	old := rc.Leader()
	oc := apiOn(t, rc, old, 2*time.Second)
	ctx := ctxT(t)
	if _, err := oc.Create(ctx, deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	rc.Isolate(old)
	// A read the cut-off leader answers before anything newer commits
	// elsewhere is still linearizable; once the others have elected a
	// leader and committed a newer write, it must refuse.
	nc := apiOn(t, rc, (old+1)%3, 2*time.Second)
	testutil.Until(t, 20*time.Second, "a write committed by the others", func() bool {
		_, err := nc.Create(ctx, deployment("newer", nil))
		return err == nil
	})
	_, err := oc.Get(ctx, api.KindDeployment, "web")
	apiErr(t, err, http.StatusServiceUnavailable, "no_leader")
	if _, err := oc.Get(client.WithStale(ctx), api.KindDeployment, "web"); err != nil {
		t.Errorf("stale get on the cut-off old leader: %v", err)
	}
	rc.Heal(old)
	rc.Leader()
}

// TestScaleRetriesStatusConflicts: scale succeeds every time while status
// writes (as the controllers make them, here far more often: every 10 ms)
// keep moving the deployment's resourceVersion.
func TestScaleRetriesStatusConflicts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raft cluster")
	}
	rc := raftstore.NewTestCluster(t, 3)
	leader := rc.Leader()
	fc := apiOn(t, rc, (leader+1)%3, 15*time.Second)
	ctx := ctxT(t)
	if _, err := fc.Create(ctx, deployment("web", nil)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() { // status writes on the leader
		n := 0
		defer func() { done <- n }()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			raw := api.RawObject{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web"},
				Status: []byte(fmt.Sprintf(`{"observedGeneration":%d}`, n))}
			if _, err := rc.Stores[leader].Txn(ctx, []raftstore.Op{{Type: raftstore.OpUpdateStatus, Object: raw}}); err != nil {
				t.Errorf("status write: %v", err)
				return
			}
			n++
		}
	}()
	for i := range 20 {
		if _, err := fc.Scale(ctx, "web", i%5+1); err != nil {
			t.Errorf("scale %d: %v", i, err)
		}
	}
	close(stop)
	t.Logf("20 scales through a follower against %d status writes", <-done)
}
