package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
)

// TestSecretsReachBoards runs the whole path in process: a secret written
// through a server's API is stored sealed, the leader opens it and writes
// it to the board of each pod that loads it (fake boards), and a new value
// rolls the pods, whose boards then hold the new value.
func TestSecretsReachBoards(t *testing.T) {
	f := newFleet(t, 3, 3)
	lead := f.leader()
	ctx := context.Background()
	c := f.client((lead + 1) % 3) // a follower seals and forwards
	put := func(v string, overwrite bool) {
		t.Helper()
		req := api.SecretRequest{Metadata: api.ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte(v)}}
		if _, err := c.PutSecret(ctx, req, overwrite); err != nil {
			t.Fatalf("put secret: %v", err)
		}
	}
	put("in-process-value-1", false)
	raw, err := f.agents[lead].a.store.Get(api.KindSecret, "db")
	if err != nil || bytes.Contains(raw.Spec, []byte("in-process-value-1")) {
		t.Fatalf("stored secret: %v %s", err, raw.Spec)
	}
	d := webDeployment(2).(*api.Deployment)
	d.Spec.Template.Secrets = []string{"db"}
	if _, err := f.client(lead).Apply(ctx, []api.Object{d}, false); err != nil {
		t.Fatal(err)
	}
	onBoards := func(want string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, "two running pods with "+want, func() error {
			n := 0
			for _, p := range f.pods(lead) {
				if p.Status.Phase != api.PodRunning {
					return fmt.Errorf("pod %s is %s", p.Metadata.Name, p.Status.Phase)
				}
				path := units.CredentialPath(api.UnitName(p.Metadata.Name), "db_password")
				got, ok := f.boards.Board(p.Spec.Node).File(path)
				if !ok || string(got) != want {
					return fmt.Errorf("%s on %s: %q", path, p.Spec.Node, got)
				}
				unit, _ := f.boards.Board(p.Spec.Node).File("/etc/systemd/system/" + api.UnitName(p.Metadata.Name))
				if strings.Contains(string(unit), want) {
					return fmt.Errorf("the unit of %s holds the value", p.Metadata.Name)
				}
				n++
			}
			if n != 2 {
				return fmt.Errorf("%d pods", n)
			}
			return nil
		})
	}
	onBoards("in-process-value-1")
	put("in-process-value-2", true)
	onBoards("in-process-value-2")
}
