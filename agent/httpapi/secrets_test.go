package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/secretbox"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

// plainValue is a value no sealed form, store or answer may contain.
const plainValue = "correct-horse-battery-staple-4711"

func testRing(t *testing.T) *secretbox.Ring {
	t.Helper()
	r, err := secretbox.NewRing([][]byte{raftstore.TestKey("secrets")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func withRing(r *secretbox.Ring) func(*httpapi.Config) {
	return func(c *httpapi.Config) { c.Secrets = r }
}

func dbSecret(value string) api.SecretRequest {
	return api.SecretRequest{Metadata: api.ObjectMeta{Name: "db"},
		Data: map[string][]byte{"password": []byte(value), "user": []byte("web")}}
}

func decodeSecret(t *testing.T, raw api.RawObject) *api.Secret {
	t.Helper()
	o, err := api.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*api.Secret)
}

// TestSecretSealedOnWrite: a created secret is stored sealed (nothing in
// the store, the create's answer, get or list holds the value), opens to
// the value with the ring, and a replace with --overwrite changes it.
func TestSecretSealedOnWrite(t *testing.T) {
	ring := testRing(t)
	e := newEnv(t, withRing(ring))
	ctx := context.Background()
	out, err := e.c.PutSecret(ctx, dbSecret(plainValue), false)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	st := decodeSecret(t, out)
	got, err := ring.Open("db", "password", st.Spec.Data["password"])
	if err != nil || string(got) != plainValue {
		t.Fatalf("Open = %q, %v", got, err)
	}
	v1 := api.SecretVersion(st)
	for _, path := range []string{"/v1/secrets", "/v1/secrets/db", "/v1/watch?resourceVersion=0"} {
		if strings.Contains(path, "watch") {
			continue // a watch stream does not end; its events are the stored objects checked below
		}
		code, body := e.raw(t, http.MethodGet, path, "")
		if code != http.StatusOK || strings.Contains(body, plainValue) || !strings.Contains(body, `"keyID"`) {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
	}
	raws, _, _ := e.store.List(api.KindSecret)
	for _, r := range raws {
		if bytes.Contains(r.Spec, []byte(plainValue)) {
			t.Fatalf("the store holds the plain value: %s", r.Spec)
		}
	}

	// Creating again is "exists"; --overwrite replaces and moves the version.
	if _, err := e.c.PutSecret(ctx, dbSecret(plainValue), false); !api.IsCode(err, api.CodeExists) {
		t.Fatalf("second create: %v, want exists", err)
	}
	out, err = e.c.PutSecret(ctx, dbSecret(plainValue), true)
	if err != nil {
		t.Fatalf("overwrite, same value: %v", err)
	}
	if v := api.SecretVersion(decodeSecret(t, out)); v != v1 {
		t.Errorf("same values written again: version %s, was %s (pods would roll for nothing)", v, v1)
	}
	out, err = e.c.PutSecret(ctx, dbSecret("new-"+plainValue), true)
	if err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	st2 := decodeSecret(t, out)
	if v := api.SecretVersion(st2); v == v1 {
		t.Errorf("changed value: version stayed %s", v)
	}
	if got, _ := ring.Open("db", "password", st2.Spec.Data["password"]); string(got) != "new-"+plainValue {
		t.Errorf("after overwrite Open = %q", got)
	}
	if !st2.Metadata.Created.Equal(st.Metadata.Created) {
		t.Errorf("overwrite moved created from %v to %v", st.Metadata.Created, st2.Metadata.Created)
	}
}

// TestSecretRefusals: bad bodies, apply, sealed values from a client, an
// agent without server keys, and deleting a secret a template names.
func TestSecretRefusals(t *testing.T) {
	e := newEnv(t, withRing(testRing(t)))
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"no data", "POST", "/v1/secrets", `{"metadata":{"name":"db"}}`, 400, "data: required"},
		{"bad key", "POST", "/v1/secrets", `{"metadata":{"name":"db"},"data":{"a/b":"eA=="}}`, 400, "data[a/b]"},
		{"empty value", "POST", "/v1/secrets", `{"metadata":{"name":"db"},"data":{"pw":""}}`, 400, "empty value"},
		{"bad name", "POST", "/v1/secrets", `{"metadata":{"name":"DB"},"data":{"pw":"eA=="}}`, 400, "metadata.name"},
		{"sealed from a client", "POST", "/v1/secrets", `{"metadata":{"name":"db"},"spec":{"data":{"pw":{"keyID":"x","sealed":"eA==","hash":"0123456789abcdef"}}}}`, 400, "spec"},
		{"name mismatch", "PUT", "/v1/secrets/db", `{"metadata":{"name":"other"},"data":{"pw":"eA=="}}`, 400, "does not match"},
		{"apply", "POST", "/v1/apply", `{"objects":[{"kind":"secrets","metadata":{"name":"db"},"spec":{}}]}`, 400, "secrets cannot be applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, tc.method, tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s; want %d containing %q", tc.method, tc.path, code, body, tc.code, tc.want)
			}
		})
	}
	if raws, _, _ := e.store.List(api.KindSecret); len(raws) != 0 {
		t.Fatalf("refused writes stored %d secrets", len(raws))
	}

	t.Run("no server key", func(t *testing.T) {
		w := newEnv(t)
		code, body := w.raw(t, "POST", "/v1/secrets", `{"metadata":{"name":"db"},"data":{"pw":"eA=="}}`)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "only a server holds the server key") {
			t.Fatalf("= %d %s", code, body)
		}
	})

	t.Run("delete in use", func(t *testing.T) {
		ctx := context.Background()
		if _, err := e.c.PutSecret(ctx, dbSecret(plainValue), false); err != nil {
			t.Fatal(err)
		}
		d := &api.Deployment{Metadata: api.ObjectMeta{Name: "web"},
			Spec: api.DeploymentSpec{Template: api.PodTemplate{Exec: []string{"/bin/web"}, Secrets: []string{"db"}}}}
		if _, err := e.c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		code, body := e.raw(t, "DELETE", "/v1/secrets/db", "")
		if code != http.StatusConflict || !strings.Contains(body, "in use by deployments/web") {
			t.Fatalf("delete = %d %s", code, body)
		}
		if err := e.c.Delete(ctx, api.KindDeployment, "web"); err != nil {
			t.Fatal(err)
		}
		// A job's template counts the same.
		j := &api.Job{Metadata: api.ObjectMeta{Name: "backup"},
			Spec: api.JobSpec{Template: api.PodTemplate{Exec: []string{"/bin/backup"}, Secrets: []string{"db"}}}}
		if _, err := e.c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		code, body = e.raw(t, "DELETE", "/v1/secrets/db", "")
		if code != http.StatusConflict || !strings.Contains(body, "in use by jobs/backup") {
			t.Fatalf("delete while a job uses it = %d %s", code, body)
		}
		if err := e.c.Delete(ctx, api.KindJob, "backup"); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Delete(ctx, api.KindSecret, "db"); err != nil {
			t.Fatalf("delete once unused: %v", err)
		}
	})
}

// TestSecretNotOnDisk writes secrets through the API into a real on-disk
// store (bolt: raft.db, and snapshot files) and greps every file under
// the data directory for the plain values.
func TestSecretNotOnDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := raftstore.DefaultConfig()
	cfg.NodeID, cfg.BindAddr, cfg.ServerKey, cfg.DataDir = "s1", "127.0.0.1:0", raftstore.TestKey("disk"), dir
	cfg.LogStore = raftstore.LogStoreBolt
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 2, 50*time.Millisecond, 1
	cfg.Logger = testutil.Logger(t)
	st, err := raftstore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Bootstrap([]raftstore.Server{{ID: "s1", Address: st.Addr(), Voter: true}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withRing(testRing(t)), func(c *httpapi.Config) { c.Store = st })
	values := []string{plainValue, "second-" + plainValue, "third-" + plainValue}
	if _, err := e.c.PutSecret(ctx, dbSecret(values[0]), false); err != nil {
		t.Fatal(err)
	}
	for _, v := range values[1:] {
		if _, err := e.c.PutSecret(ctx, dbSecret(v), true); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "a snapshot after the writes", func() error {
		if s := st.Stats(); s.LastSnapshotIndex < 3 {
			return errors.New("no snapshot yet")
		}
		return nil
	})
	var files int
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a plain value", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft", "raft.db")); err != nil {
		t.Errorf("no raft.db: %v", err)
	}
	t.Logf("grepped %d files under %s", files, dir)
}
