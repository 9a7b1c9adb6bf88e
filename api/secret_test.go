package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateSecretRequest(t *testing.T) {
	big := make([]byte, MaxSecretValueBytes+1)
	many := map[string][]byte{}
	for i := range MaxSecretKeys + 1 {
		many[strings.Repeat("k", i+1)] = []byte("v")
	}
	for _, tc := range []struct {
		name string
		req  SecretRequest
		want string // "" = valid
	}{
		{"ok", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte("x"), "tls.crt": []byte("y"), "DB_USER": []byte("z")}}, ""},
		{"no name", SecretRequest{Data: map[string][]byte{"pw": []byte("x")}}, "metadata.name: required"},
		{"wrong kind", SecretRequest{Kind: KindPod, Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{"pw": []byte("x")}}, `kind: is "pods" but the object is a secrets`},
		{"no data", SecretRequest{Metadata: ObjectMeta{Name: "db"}}, "data: required"},
		{"slash", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{"a/b": []byte("x")}}, `data[a/b]: "a/b" is not a valid key: only letters`},
		{"dot first", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{".env": []byte("x")}}, "must start with a letter or digit"},
		{"empty value", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{"pw": nil}}, "empty value"},
		{"big value", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: map[string][]byte{"pw": big}}, "a value holds at most 32768"},
		{"many keys", SecretRequest{Metadata: ObjectMeta{Name: "db"}, Data: many}, "33 keys; a secret holds at most 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateSecretRequest(&tc.req)
			switch {
			case tc.want == "" && errs != nil:
				t.Fatalf("unexpected errors: %v", errs)
			case tc.want != "" && !strings.Contains(errs.Error(), tc.want):
				t.Fatalf("errors %q, want one containing %q", errs, tc.want)
			}
		})
	}
}

func TestPodRevision(t *testing.T) {
	tmpl := PodTemplate{Exec: []string{"/bin/web"}}
	if rev, refs := PodRevision(tmpl, nil); rev != TemplateHash(tmpl) || refs != nil {
		t.Fatalf("no secrets: %s %v, want the template hash", rev, refs)
	}
	tmpl.Secrets = []string{"db", "tls"}
	db := &Secret{Metadata: ObjectMeta{Name: "db"}, Spec: SecretSpec{Data: map[string]SealedValue{
		"user": {Hash: "aaaaaaaaaaaaaaaa"}, "password": {Hash: "bbbbbbbbbbbbbbbb"}}}}
	missing, refs := PodRevision(tmpl, nil)
	want := []PodSecret{{Name: "db"}, {Name: "tls"}}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	rev1, refs := PodRevision(tmpl, map[string]*Secret{"db": db})
	if rev1 == missing || refs[0].Version != SecretVersion(db) || !cmp.Equal(refs[0].Keys, []string{"password", "user"}) {
		t.Errorf("with db: %s %+v", rev1, refs)
	}
	db2 := &Secret{Metadata: db.Metadata, Spec: SecretSpec{Data: map[string]SealedValue{
		"user": {Hash: "aaaaaaaaaaaaaaaa"}, "password": {Hash: "cccccccccccccccc"}}}}
	if rev2, _ := PodRevision(tmpl, map[string]*Secret{"db": db2}); rev2 == rev1 {
		t.Errorf("a changed value kept revision %s", rev1)
	}
	same := &Secret{Metadata: db.Metadata, Spec: SecretSpec{Data: map[string]SealedValue{
		"password": {Hash: "bbbbbbbbbbbbbbbb", Sealed: []byte("other nonce")}, "user": {Hash: "aaaaaaaaaaaaaaaa"}}}}
	if rev, _ := PodRevision(tmpl, map[string]*Secret{"db": same}); rev != rev1 {
		t.Errorf("the same values sealed again moved the revision")
	}
}

func TestSecretUsers(t *testing.T) {
	web := &Deployment{Kind: KindDeployment, Metadata: ObjectMeta{Name: "web"}, Spec: DeploymentSpec{Template: PodTemplate{Secrets: []string{"db"}}}}
	mon := &Daemon{Kind: KindDaemon, Metadata: ObjectMeta{Name: "mon"}, Spec: DaemonSpec{Template: PodTemplate{Secrets: []string{"tls"}}}}
	pod := func(name, owner string, ph PodPhase) *Pod {
		return &Pod{Kind: KindPod, Metadata: ObjectMeta{Name: name}, Status: PodStatus{Phase: ph},
			Spec: PodSpec{Owner: OwnerRef{Kind: KindDeployment, Name: owner}, Secrets: []PodSecret{{Name: "db"}}}}
	}
	backup := &Job{Kind: KindJob, Metadata: ObjectMeta{Name: "backup"}, Spec: JobSpec{Template: PodTemplate{Secrets: []string{"db"}}}}
	objs := []Object{web, mon, backup, pod("web-1", "web", PodRunning), pod("old-1", "old", PodRunning), pod("old-2", "old", PodFailed)}
	if diff := cmp.Diff([]string{"deployments/web", "jobs/backup", "pods/old-1"}, SecretUsers("db", objs)); diff != "" {
		t.Errorf("db (-want +got):\n%s", diff)
	}
	if got := SecretUsers("other", objs); len(got) != 0 {
		t.Errorf("other: %v", got)
	}
}
