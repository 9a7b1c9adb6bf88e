package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

// writeFiles creates files (name -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadManifests(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"app/b.toml":       serviceTOML("web", "http"),
		"app/a.toml":       deploymentTOML("web", "") + daemonTOML("exporter"),
		"app/notes.txt":    "not a manifest",
		"app/.hidden.toml": deploymentTOML("hidden", ""),
		"app/sub/c.toml":   deploymentTOML("nested", ""),
		"single.toml":      deploymentTOML("api", ""),
		"dup.toml":         serviceTOML("web", "http"),
		"bad1.toml":        deploymentTOML("ok", "") + "[[deployment]]\nname = \"b\"\nreplica = 3\n",
		"bad2.toml":        "name\n",
		"empty/readme.md":  "",
	})
	p := func(s string) string { return filepath.Join(dir, s) }
	type obj struct{ Ref string }
	tests := []struct {
		name    string
		paths   []string
		stdin   string
		decode  func([]api.ManifestFile) ([]api.Object, error)
		want    []obj
		wantErr []string
	}{
		{name: "folder: *.toml sorted, not recursive, no hidden files",
			paths: []string{p("app")},
			want:  []obj{{"deployment/web"}, {"daemon/exporter"}, {"service/web"}}},
		{name: "files in the given order, then stdin",
			paths: []string{p("single.toml"), "-", p("app/b.toml")},
			stdin: daemonTOML("p1"),
			want:  []obj{{"deployment/api"}, {"daemon/p1"}, {"service/web"}}},
		{name: "duplicate across files",
			paths:   []string{p("app"), p("dup.toml")},
			wantErr: []string{p("dup.toml") + `:2:1: service "web": declared twice: also at ` + p("app/b.toml") + ":2:1"}},
		{name: "every decode error of every file",
			paths:   []string{p("bad1.toml"), p("bad2.toml")},
			wantErr: []string{p("bad1.toml") + `:10:1: deployment "b": unknown key "replica"`, p("bad2.toml") + ":1:5: invalid TOML: expected '.' or '='"}},
		// A stub decoder, unavoidably: package api's reports duplicates
		// itself, and this is herdctl's own check behind it.
		{name: "a decoder that misses duplicates",
			paths: []string{p("single.toml"), p("single.toml")},
			decode: func(fs []api.ManifestFile) ([]api.Object, error) {
				o, err := api.DecodeManifests(fs[:1])
				return append(o, o...), err
			},
			wantErr: []string{"deployment/api is declared twice"}},
		{name: "stdin errors are named <stdin>",
			paths:   []string{"-"},
			stdin:   "name\n",
			wantErr: []string{"<stdin>:1:5: invalid TOML"}},
		{name: "missing file",
			paths:   []string{p("nope.toml")},
			wantErr: []string{"no such file or directory"}},
		{name: "folder without manifests",
			paths:   []string{p("empty")},
			wantErr: []string{"folder has no *.toml files"}},
		{name: "stdin twice",
			paths:   []string{"-", "-"},
			wantErr: []string{"stdin can be read only once"}},
		{name: "no objects at all",
			paths:   []string{"-"},
			stdin:   "\n",
			wantErr: []string{"no objects in -"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decode := tt.decode
			if decode == nil {
				decode = api.DecodeManifests
			}
			ms, err := loadManifests(tt.paths, strings.NewReader(tt.stdin), decode)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				var got []string
				if me, ok := err.(multiError); ok {
					for _, e := range me {
						got = append(got, e.Error())
					}
				} else {
					got = []string{err.Error()}
				}
				if len(got) != len(tt.wantErr) {
					t.Fatalf("errors %q, want %q", got, tt.wantErr)
				}
				for i := range got {
					if !strings.Contains(got[i], tt.wantErr[i]) {
						t.Errorf("error %d = %q, want it to contain %q", i, got[i], tt.wantErr[i])
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []obj
			for _, m := range ms {
				got = append(got, obj{ref(m.Object.GetKind(), m.Object.GetMeta().Name)})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateManifestsNamesObjects(t *testing.T) {
	ms := []manifestObject{
		{Object: &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web"}}},
		{Object: &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "db"}}},
	}
	validate := func(o api.Object) []api.FieldError {
		if o.GetKind() == api.KindDeployment {
			return []api.FieldError{{Field: "spec.template.exec", Message: "must not be empty"}, {Object: "deployments/web", Field: "spec.replicas", Message: "must be >= 0"}}
		}
		return []api.FieldError{{Field: "spec.selector", Message: "must not be empty"}}
	}
	err := validateManifests(ms, validate)
	want := fieldErrors{
		{Object: "deployments/web", Field: "spec.template.exec", Message: "must not be empty"},
		{Object: "deployments/web", Field: "spec.replicas", Message: "must be >= 0"},
		{Object: "services/db", Field: "spec.selector", Message: "must not be empty"},
	}
	if diff := cmp.Diff(error(want), err); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadManifestsRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"deep.toml": "x = " + strings.Repeat("[", 40000) + strings.Repeat("]", 40000) + "\n",
		"big.toml":  "# " + strings.Repeat("x", api.MaxManifestSize) + "\n",
	})
	tests := []struct{ file, want string }{
		{"deep.toml", "deep.toml:1:37: nested more than 32 levels deep"},
		{"big.toml", "big.toml:1:1: manifest is over the 1048576-byte (1 MiB) limit"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.file)
		_, err := loadManifests([]string{path}, nil, api.DecodeManifests)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tt.want)) {
			t.Errorf("loadManifests(%s) = %.300v, want %q", tt.file, err, tt.want)
		}
	}
	_, err := loadManifests([]string{"-"}, strings.NewReader(strings.Repeat("#", api.MaxManifestSize+10)), api.DecodeManifests)
	if err == nil || !strings.Contains(err.Error(), "<stdin>:1:1: manifest is over") {
		t.Errorf("loadManifests(stdin over the limit) = %.300v", err)
	}
}
