package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/placer/fakeboard"
	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// hostKey writes an SSH host key pair the way sshd keeps one and returns
// the signer and the public file's path (ssh_host_key_file).
func hostKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := ssh.MarshalPrivateKey(priv, "") // the file sshd would read
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub := filepath.Join(dir, "ssh_host_ed25519_key.pub")
	if err := os.WriteFile(filepath.Join(dir, "ssh_host_ed25519_key"), pem.Bytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	return s, pub
}

// TestUnitReportsReachThePlacer: a worker's signed report crosses gossip
// to the server, and the leader folds a crash it reports into pod status
// without listing the board over SSH. A report signed with another key
// changes nothing.
func TestUnitReportsReachThePlacer(t *testing.T) {
	f := newFleet(t, 1, 1)
	lead := f.leader()
	signer, pub := hostKey(t)
	wcfg := workerConfig(t, "w1", f.agents[0].cfg.GossipBind)
	wcfg.SSHHostKeyFile = pub
	wcfg.Labels = map[string]string{"role": "worker"}
	worker := f.start(wcfg)

	dep := webDeployment(1).(*api.Deployment)
	dep.Spec.Template.NodeSelector = map[string]string{"role": "worker"}
	if _, err := f.client(lead).Apply(context.Background(), []api.Object{dep}, false); err != nil {
		t.Fatal(err)
	}
	placed := f.runningPods(lead, 1, "")
	var pod string
	for p, n := range placed {
		if n != "w1" {
			t.Fatalf("pod %s on %s, want w1", p, n)
		}
		pod = p
	}
	unit := api.UnitName(pod)
	board := f.boards.Board("w1")
	send := func(s ssh.Signer) {
		t.Helper()
		m, us := board.Report()
		body, err := unitreport.Sign(unitreport.Report{Node: "w1", Mark: m, Units: us}, s, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		worker.a.sendReport(context.Background(), body)
	}
	listings := func() int {
		return len(slices.DeleteFunc(board.Calls(), func(c fakeboardCall) bool { return c.Op != "ShowUnits" }))
	}

	// The first report makes the board a reporting one.
	send(signer)
	testutil.Eventually(t, 10*time.Second, "the first report kept", func() error {
		if n := testMetric(t, f.agents[lead].a, "herd_unit_reports_total", "result", "kept"); n < 1 {
			return fmt.Errorf("kept = %v", n)
		}
		return nil
	})

	// A crash reported by a forged report is not believed.
	forger, _ := hostKey(t)
	if err := board.Crash(unit, 137); err != nil {
		t.Fatal(err)
	}
	board.ResetCalls()
	send(forger)
	testutil.Eventually(t, 10*time.Second, "the forged report refused", func() error {
		if n := testMetric(t, f.agents[lead].a, "herd_unit_reports_total", "result", "refused"); n < 1 {
			return fmt.Errorf("refused = %v", n)
		}
		return nil
	})
	if p := podNamed(f.pods(lead), pod); p.Status.Restarts != 0 {
		t.Fatalf("a forged report moved the pod's restarts to %d", p.Status.Restarts)
	}

	// The board's own report of the same crash is.
	send(signer)
	testutil.Eventually(t, 10*time.Second, "the reported restart in pod status", func() error {
		if p := podNamed(f.pods(lead), pod); p.Status.Restarts != 1 {
			return fmt.Errorf("restarts = %d", p.Status.Restarts)
		}
		return nil
	})
	if n := listings(); n != 0 {
		t.Errorf("the leader listed w1 over SSH %d times to learn of the crash, want 0: %v", n, board.Calls())
	}
}

func podNamed(pods []*api.Pod, name string) *api.Pod {
	for _, p := range pods {
		if p.Metadata.Name == name {
			return p
		}
	}
	return &api.Pod{}
}

type fakeboardCall = fakeboard.Call

// testMetric reads the first sample named name of a's registry, from its
// text exposition, whose label has value (0 when none has).
func testMetric(t *testing.T, a *Agent, name, label, value string) float64 {
	t.Helper()
	var b bytes.Buffer
	if err := a.metrics.Write(&b); err != nil {
		t.Fatal(err)
	}
	v, _, err := testutil.MetricValue(b.String(), name, label, value)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
