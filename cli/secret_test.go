package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/internal/secretbox"
	"github.com/herd-dev/herd/raftstore"
)

// TestCreateSecret: create from files and stdin, get and describe show
// keys and hashes but never a value, --overwrite replaces, bad flags are
// usage errors that send nothing.
func TestCreateSecret(t *testing.T) {
	ring, err := secretbox.NewRing([][]byte{raftstore.TestKey("cli")})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *httpapi.Config) { c.Secrets = ring })
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw.txt")
	if err := os.WriteFile(pw, []byte("s3cret-value-from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(crt, []byte("cert-bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.stdin = "s3cret-from-stdin"
	code, out, errOut := h.run("create", "secret", "db", "--from-file", "password="+pw, "--from-file", crt, "--from-file", "user=-")
	if code != 0 || !strings.HasPrefix(out, "secret/db created: keys password, tls.crt, user, version ") {
		t.Fatalf("create = %d %q %q", code, out, errOut)
	}
	code, out, _ = h.run("get", "secrets")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "db") || !strings.Contains(out, "password,tls.crt,user") {
		t.Fatalf("get secrets = %d\n%s", code, out)
	}
	code, desc, _ := h.run("describe", "secret", "db")
	if code != 0 || !strings.Contains(desc, "password") || !strings.Contains(desc, ring.PrimaryID()) {
		t.Fatalf("describe = %d\n%s", code, desc)
	}
	_, asJSON, _ := h.run("get", "secret", "db", "-o", "json")
	for _, o := range []string{out, desc, asJSON} {
		if strings.Contains(o, "s3cret") {
			t.Errorf("output shows a value:\n%s", o)
		}
	}

	code, _, errOut = h.run("create", "secret", "db", "--from-file", "password="+pw)
	if code == 0 || !strings.Contains(errOut, "--overwrite") {
		t.Errorf("create again = %d %q", code, errOut)
	}
	code, out, _ = h.run("create", "secret", "db", "--from-file", "password="+pw, "--overwrite")
	if code != 0 || !strings.HasPrefix(out, "secret/db replaced: keys password,") {
		t.Errorf("overwrite = %d %q", code, out)
	}

	calls := len(h.Calls())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "secret", "db"}, "at least one --from-file"},
		{[]string{"create", "secret", "db", "hunter2"}, "never from arguments"},
		{[]string{"create", "secret", "db", "--from-file", "a/b=" + pw}, `"a/b" is not a valid key`},
		{[]string{"create", "secret", "db", "--from-file", "pw="}, "missing PATH"},
		{[]string{"create", "secret", "db", "--from-file", "-"}, "needs a key"},
		{[]string{"create", "secret", "db", "--from-file", "a=-", "--from-file", "b=-"}, "read once"},
		{[]string{"create", "secret", "db", "--from-file", "pw=" + filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"create", "secret", "Bad_Name", "--from-file", "pw=" + pw}, "metadata.name"},
	} {
		code, _, errOut := h.run(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v = %d %q, want an error containing %q", tc.args, code, errOut, tc.want)
		}
	}
	if n := len(h.Calls()); n != calls {
		t.Errorf("refused commands sent %d requests: %v", n-calls, h.Calls()[calls:])
	}
}
