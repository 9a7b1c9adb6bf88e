package placer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

const credValue = "hunter2-credential"

// credentials stands in for the agent's Config.Credentials: the value of
// every key is its ID and credValue.
func credentials(_ context.Context, creds []units.Credential) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, c := range creds {
		out[c.ID()] = []byte(c.ID() + "=" + credValue)
	}
	return out, nil
}

func secretPod(name, node string) *api.Pod {
	p := webPod(name, node)
	p.Spec.Template.Secrets = []string{"db"}
	p.Spec.Secrets = []api.PodSecret{{Name: "db", Version: "0123456789", Keys: []string{"password", "user"}}}
	return p
}

// TestPassWritesCredentials: a pod that loads secrets gets each key's value
// in a 0600 file under the credential directory before its unit file, the
// unit names the files only, and removing the unit removes them.
func TestPassWritesCredentials(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Credentials = credentials })
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(secretPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	w := h.p.newWorker("n1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	pw := "/var/lib/herd/credentials/herd-web-1.db_password"
	wantCalls(t, b,
		"ShowUnits",
		"PutFile /etc/herd/env/herd-web-1.env",
		"PutFile "+pw,
		"PutFile /var/lib/herd/credentials/herd-web-1.db_user",
		"PutFile /etc/web/web-1.conf",
		"PutFile "+unitDir+"herd-web-1.service",
		"systemctl enable-now herd-web-1.service",
		"ShowUnits",
	)
	if got, _ := b.File(pw); string(got) != "db_password="+credValue {
		t.Errorf("credential file = %q", got)
	}
	if m, _ := b.FileMode(pw); m != 0o600 {
		t.Errorf("credential file mode = %v, want 0600", m)
	}
	if m, _ := b.DirMode(units.CredentialDir); m != 0o700 {
		t.Errorf("credential directory mode = %v, want 0700", m)
	}
	unit, _ := b.File(unitDir + "herd-web-1.service")
	if strings.Contains(string(unit), credValue) || !strings.Contains(string(unit), "LoadCredential=db_password:"+pw) {
		t.Errorf("unit file:\n%s", unit)
	}

	// Unbound: the unit goes, and its credentials with it.
	h.st.deletePod("web-1")
	if res := h.pass(w); res.err != nil {
		t.Fatalf("pass: %v", res.err)
	}
	for _, f := range b.Files() {
		if strings.HasPrefix(f, units.CredentialDir+"/") {
			t.Errorf("%s left on the board", f)
		}
	}
}

// TestPassCredentialsUnavailable: when the values cannot be read, nothing
// of the unit is written and the pass fails (to be retried).
func TestPassCredentialsUnavailable(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Credentials = func(context.Context, []units.Credential) (map[string][]byte, error) {
			return nil, errors.New("secret db: no such secret")
		}
	})
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	h.st.putPod(secretPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	res := h.pass(h.p.newWorker("n1"))
	if res.err == nil || !strings.Contains(res.err.Error(), "no such secret") {
		t.Fatalf("pass = %+v, want the secrets' error", res)
	}
	if _, ok := b.File(unitDir + "herd-web-1.service"); ok {
		t.Errorf("unit file written without its credentials")
	}
}

// TestPassSkipsPodWithMissingSecret: a pod bound to the board (a daemon's
// pod is, from the start) whose secret did not exist gets no unit, and the
// board's other pods are placed.
func TestPassSkipsPodWithMissingSecret(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Credentials = credentials })
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	p := secretPod("mon-1", "n1")
	p.Spec.Secrets[0].Version, p.Spec.Secrets[0].Keys = "", nil
	h.st.putPod(p)
	h.st.putPod(webPod("web-1", "n1"))
	b := h.fleet.Board("n1")
	_ = h.pass(h.p.newWorker("n1"))
	if _, ok := b.File(unitDir + "herd-mon-1.service"); ok {
		t.Errorf("a unit was written for a pod whose secret is missing")
	}
	if _, ok := b.File(unitDir + "herd-web-1.service"); !ok {
		t.Errorf("the board's other pod was not placed")
	}
}
