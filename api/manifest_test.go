package api

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./api -run %s -update to create it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func intp(i int) *int { return &i }

// TestBadManifests decodes every testdata/bad/*.toml and compares the error
// with the golden testdata/bad/*.err. Every line of every error must start
// with file:line:col.
func TestBadManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("want at least 20 bad manifests, found %d", len(files))
	}
	for _, path := range files {
		base := filepath.Base(path)
		t.Run(strings.TrimSuffix(base, ".toml"), func(t *testing.T) {
			objs, err := DecodeManifest(base, readFile(t, path))
			if err == nil {
				t.Fatalf("decoded without error: %v", objs)
			}
			if objs != nil {
				t.Errorf("objects returned with an error: %v", objs)
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Errorf("errors.Is(err, ErrInvalidManifest) = false for %T", err)
			}
			var merrs ManifestErrors
			if !errors.As(err, &merrs) || len(merrs) == 0 {
				t.Fatalf("error is %T, want non-empty ManifestErrors", err)
			}
			loc := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `:[1-9][0-9]*:[1-9][0-9]*: `)
			for _, line := range strings.Split(err.Error(), "\n") {
				if !loc.MatchString(line) {
					t.Errorf("error line without file:line:col: %q", line)
				}
			}
			golden(t, strings.TrimSuffix(path, ".toml")+".err", err.Error()+"\n")
		})
	}
}

// TestGoodManifests decodes every testdata/good/*.toml, compares the objects
// (as JSON) and their re-encoding with golden files, and checks that the
// encoding decodes to the same objects.
func TestGoodManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		base := filepath.Base(path)
		t.Run(strings.TrimSuffix(base, ".toml"), func(t *testing.T) {
			objs, err := DecodeManifest(base, readFile(t, path))
			if err != nil {
				t.Fatalf("DecodeManifest: %v", err)
			}
			js, err := json.MarshalIndent(objs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			stem := strings.TrimSuffix(path, ".toml")
			golden(t, stem+".json", string(js)+"\n")
			out, err := EncodeManifest(objs)
			if err != nil {
				t.Fatalf("EncodeManifest: %v", err)
			}
			golden(t, stem+".encoded", string(out))
			again, err := DecodeManifest("encoded.toml", out)
			if err != nil {
				t.Fatalf("decoding the encoding: %v\n%s", err, out)
			}
			if diff := cmp.Diff(objs, again); diff != "" {
				t.Errorf("decode(encode(objs)) differs (-want +got):\n%s", diff)
			}
			for _, o := range objs {
				if err := Validate(o); err != nil {
					t.Errorf("Validate(%s): %v", o.GetMeta().Name, err)
				}
				d := cloneObject(o)
				SetDefaults(d)
				if err := Validate(d); err != nil {
					t.Errorf("Validate(SetDefaults(%s)): %v", o.GetMeta().Name, err)
				}
			}
		})
	}
}

func TestDecodeManifestWeb(t *testing.T) {
	objs, err := DecodeManifest("web.toml", readFile(t, "testdata/good/web.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Object{
		&Deployment{
			Kind:     KindDeployment,
			Metadata: ObjectMeta{Name: "web", Labels: map[string]string{"tier": "front"}},
			Spec: DeploymentSpec{
				Replicas: intp(3),
				Selector: map[string]string{"app": "web"},
				Strategy: RolloutStrategy{MaxSurge: intp(1), MaxUnavailable: intp(0)},
				Template: PodTemplate{
					Labels:        map[string]string{"app": "web"},
					Exec:          []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
					Env:           map[string]string{"GREETING": "hi"},
					RestartPolicy: RestartAlways,
					Ports:         []Port{{Name: "http", Port: 0}},
					Resources:     Resources{MemoryLimit: "64M", CPULimit: "50%"},
					Readiness:     &Probe{TCP: "http"},
				},
			},
		},
		&Daemon{
			Kind:     KindDaemon,
			Metadata: ObjectMeta{Name: "node-exporter"},
			Spec: DaemonSpec{Template: PodTemplate{
				Exec:         []string{"/usr/bin/prometheus-node-exporter", "--web.listen-address=:9100"},
				NodeSelector: map[string]string{"arch": "arm64"},
				Ports:        []Port{{Name: "metrics", Port: 9100}},
			}},
		},
		&Service{
			Kind:     KindService,
			Metadata: ObjectMeta{Name: "web"},
			Spec: ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []ServicePort{{Name: "http", Target: "http"}},
			},
		},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("objects differ (-want +got):\n%s", diff)
	}
}

func TestDecodeManifestReplicasOmitted(t *testing.T) {
	objs, err := DecodeManifest("m.toml", readFile(t, "testdata/good/minimal.toml"))
	if err != nil {
		t.Fatal(err)
	}
	d := objs[0].(*Deployment)
	if d.Spec.Replicas != nil {
		t.Errorf("Replicas = %d, want nil when the manifest leaves it out", *d.Spec.Replicas)
	}
	if d.Spec.Selector != nil || d.Spec.Template.Labels != nil || d.Spec.Template.RestartPolicy != "" {
		t.Errorf("DecodeManifest applied defaults: %+v", d.Spec)
	}
}

func TestDecodeManifestKeepsFileOrder(t *testing.T) {
	src := `
[[service]]
name = "b"
selector = { app = "b" }
ports = [{ target = "http" }]

[[deployment]]
name = "z"
template.exec = ["/bin/true"]

[[daemon]]
name = "m"
template.exec = ["/bin/true"]

[[deployment]]
name = "a"
template.exec = ["/bin/true"]

[[service]]
name = "a"
selector = { app = "a" }
ports = [{ target = "http" }]
`
	objs, err := DecodeManifest("order.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, string(o.GetKind())+"/"+o.GetMeta().Name)
	}
	want := []string{"services/b", "deployments/z", "daemons/m", "deployments/a", "services/a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// The encoding keeps the order too.
	out, err := EncodeManifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeManifest("again.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(objs, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeManifestsDuplicateAcrossFiles(t *testing.T) {
	a := []byte("[[deployment]]\nname = \"web\"\ntemplate.exec = [\"/bin/true\"]\n")
	b := []byte("# b\n[[daemon]]\nname = \"web\"\ntemplate.exec = [\"/bin/true\"]\n\n[[deployment]]\nname = \"web\"\ntemplate.exec = [\"/bin/true\"]\n")
	_, err := DecodeManifests([]ManifestFile{{Name: "a.toml", Data: a}, {Name: "b.toml", Data: b}})
	want := `b.toml:7:1: deployment "web": declared twice: also at a.toml:2:1`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	// The same name in different kinds is fine.
	objs, err := DecodeManifests([]ManifestFile{{Name: "a.toml", Data: a}, {Name: "b.toml", Data: b[:strings.Index(string(b), "\n\n")]}})
	if err != nil || len(objs) != 2 {
		t.Errorf("got %d objects, err %v; want 2, nil", len(objs), err)
	}
}

// TestDecodeManifestErrors checks single problems by substring, next to
// the golden files that pin whole messages.
func TestDecodeManifestErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown key with suggestion", "[[deployment]]\nname = \"web\"\nreplica = 3\n", `x.toml:3:1: deployment "web": unknown key "replica" (did you mean "replicas"?)`},
		{"unknown nested key in inline table", "[[deployment]]\nname = \"web\"\ntemplate = { exec = [\"/bin/true\"], resources = { memory_limt = \"1M\" } }\n", `x.toml:3:50: deployment "web": unknown key "template.resources.memory_limt" (did you mean "memory_limit"?)`},
		{"unknown key in second element", "[[deployment]]\nname = \"a\"\ntemplate.exec = [\"/bin/true\"]\n[[deployment]]\nname = \"b\"\ntemplate.exec = [\"/bin/true\"]\ntemplate.restrt = \"never\"\n", `x.toml:7:10: deployment "b": unknown key "template.restrt" (did you mean "restart"?)`},
		{"wrong type in array element", "[[deployment]]\nname = \"web\"\ntemplate.exec = [\"/bin/echo\", 3]\n", `x.toml:3:31: deployment "web": template.exec[1]: want a string, got integer 3`},
		{"quoted integer", "[[deployment]]\nname = \"web\"\nreplicas = \"3\"\n", `want an integer, got string "3" (write 3 without quotes)`},
		{"huge integer", "[[deployment]]\nname = \"web\"\nreplicas = 99999999999\n", `replicas: 99999999999 is out of range`},
		{"boolean for string", "[[deployment]]\nname = true\n", `x.toml:2:1: deployment #1: name: want a string, got boolean true`},
		{"datetime", "[[deployment]]\nname = 1979-05-27\n", `want a string, got a date/time`},
		{"syntax error has position", "[[deployment]]\nname = \"web\"\nreplicas = = 3\n", `x.toml:3:12: invalid TOML:`},
		{"object not a table", "deployment = [\"web\"]\n", `x.toml:1:15: deployment #1: want a table, got string "web"`},
		{"kind as plain value", "deployment = 3\n", `x.toml:1:1: deployment must be an array of tables ([[deployment]]), got integer 3`},
		{"validation error points at key", "[[deployment]]\nname = \"web\"\n[deployment.template]\nexec = [\"/bin/true\"]\nuser = \"Root\"\n", `x.toml:5:1: deployment "web": template.user: "Root" is not a valid user name`},
		{"missing field points at table", "[[deployment]]\nname = \"web\"\n[deployment.template]\nuser = \"web\"\n", `x.toml:3:1: deployment "web": template.exec: required`},
		{"map key path is quoted", "[[deployment]]\nname = \"web\"\ntemplate.exec = [\"/bin/true\"]\ntemplate.node_selector = { \"herd.dev/arch\" = \"arm 64\" }\n", `x.toml:4:28: deployment "web": template.node_selector."herd.dev/arch": invalid label value "arm 64"`},
		{"spec table hint", "[[service]]\nname = \"web\"\n[service.spec]\nselector = {}\n", `unknown key "spec": metadata and spec fields sit directly in [[service]]`},
		{"kind key hint", "[[service]]\nkind = \"service\"\n", `unknown key "kind": the table name gives the kind`},
		{"service port hint", "[[service]]\nname = \"web\"\ntarget = \"http\"\n", `service ports go in [[service.ports]] tables`},
		{"daemon selector hint", "[[daemon]]\nname = \"x\"\nselector = { a = \"b\" }\n", `a daemon picks nodes with template.node_selector`},
		{"unknown key lists known keys", "[[service]]\nname = \"web\"\nzzz = 1\n", `unknown key "zzz" (known keys: labels, name, ports, selector)`},
		{"upper case key", "[[deployment]]\nName = \"web\"\n", `unknown key "Name" (did you mean "name"?)`},
		{"plural kind", "[[deployments]]\nname = \"web\"\n", `x.toml:1:1: unknown kind "deployments" (did you mean "deployment"?)`},
		{"pods", "[[pods]]\nname = \"web\"\n", `pods are made by deployments and daemons`},
		{"CRLF line endings", "[[deployment]]\r\nname = \"web\"\r\nreplica = 3\r\n", `x.toml:3:1: deployment "web": unknown key "replica"`},
		{"invalid UTF-8", "[[deployment]]\nname = \"w\xffb\"\n", `x.toml:2:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeManifest("x.toml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

func TestEncodeManifestRejects(t *testing.T) {
	for _, o := range []Object{&Pod{Metadata: ObjectMeta{Name: "p"}}, &Node{Metadata: ObjectMeta{Name: "n"}}} {
		if _, err := EncodeManifest([]Object{o}); err == nil {
			t.Errorf("EncodeManifest(%s) succeeded", o.GetKind())
		}
	}
	bad := &Deployment{Metadata: ObjectMeta{Name: "x"}, Spec: DeploymentSpec{Template: PodTemplate{Exec: []string{"\xff"}}}}
	if _, err := EncodeManifest([]Object{bad}); err == nil {
		t.Error("EncodeManifest accepted invalid UTF-8")
	}
}

// TestEncodeManifestStored checks that a stored (defaulted, with status and
// server metadata) object encodes to a manifest that decodes and validates.
func TestEncodeManifestStored(t *testing.T) {
	objs, err := DecodeManifest("full.toml", readFile(t, "testdata/good/full.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		SetDefaults(o)
		o.GetMeta().Generation = 7
		o.GetMeta().ResourceVersion = 42
	}
	out, err := EncodeManifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeManifest("stored.toml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, o := range again {
		o.GetMeta().Generation = 7
		o.GetMeta().ResourceVersion = 42
		if diff := cmp.Diff(objs[i], o); diff != "" {
			t.Errorf("object %d (-want +got):\n%s", i, diff)
		}
	}
}

// FuzzDecodeManifest checks that decoding never panics and that whatever
// decodes (and so validates) re-encodes and re-decodes to the same objects,
// validates after defaulting, and defaults idempotently.
func FuzzDecodeManifest(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
		for _, path := range files {
			b, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := DecodeManifest("fuzz.toml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("error %T does not match ErrInvalidManifest: %v", err, err)
			}
			var merrs ManifestErrors
			if !errors.As(err, &merrs) {
				t.Fatalf("error is %T, want ManifestErrors", err)
			}
			for _, me := range merrs {
				if me.Line < 1 || me.Col < 1 {
					t.Fatalf("error without a position: %v", me)
				}
			}
			return
		}
		out, err := EncodeManifest(objs)
		if err != nil {
			t.Fatalf("EncodeManifest: %v", err)
		}
		again, err := DecodeManifest("again.toml", out)
		if err != nil {
			t.Fatalf("re-decoding failed: %v\nencoded:\n%s", err, out)
		}
		if diff := cmp.Diff(objs, again); diff != "" {
			t.Fatalf("decode(encode(objs)) differs (-want +got):\n%s\nencoded:\n%s", diff, out)
		}
		for _, o := range objs {
			SetDefaults(o)
			if err := Validate(o); err != nil {
				t.Fatalf("decoded object invalid after SetDefaults: %v", err)
			}
			twice := cloneObject(o)
			SetDefaults(twice)
			if diff := cmp.Diff(o, twice); diff != "" {
				t.Fatalf("SetDefaults not idempotent (-once +twice):\n%s", diff)
			}
			_ = TemplateHash(templateOf(o))
		}
	})
}

func templateOf(o Object) PodTemplate {
	switch v := o.(type) {
	case *Deployment:
		return v.Spec.Template
	case *Daemon:
		return v.Spec.Template
	case *Pod:
		return v.Spec.Template
	}
	return PodTemplate{}
}

// FuzzManifestStrings checks that any string that passes Validate survives
// EncodeManifest and DecodeManifest unchanged, wherever it sits.
func FuzzManifestStrings(f *testing.F) {
	for _, s := range []string{"", "a\nb", `"""`, `''''`, `\\`, "x\r\n", "\t\u00e9\x7f", `"\"`, "end\"", "\\\n", "\"\"\n\"\"\"\"\"", "\u2028\ufeff"} {
		f.Add(s, s+"\n")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		d := &Deployment{
			Kind:     KindDeployment,
			Metadata: ObjectMeta{Name: "web"},
			Spec: DeploymentSpec{Template: PodTemplate{
				Exec:  []string{"/bin/x", a, b},
				Env:   map[string]string{"A": a, "B": b},
				Files: []File{{Path: "/a", Content: a}, {Path: "/b", Content: b}},
			}},
		}
		if Validate(d) != nil {
			return
		}
		out, err := EncodeManifest([]Object{d})
		if err != nil {
			t.Fatalf("EncodeManifest: %v", err)
		}
		got, err := DecodeManifest("s.toml", out)
		if err != nil {
			t.Fatalf("DecodeManifest: %v\n%s", err, out)
		}
		if diff := cmp.Diff([]Object{d}, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s\n%s", diff, out)
		}
	})
}

// TestExamples decodes every manifest under examples/: what the
// documentation tells users to apply must be admitted.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			objs, err := DecodeManifest(filepath.Base(path), readFile(t, path))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				SetDefaults(o)
				if err := Validate(o); err != nil {
					t.Errorf("Validate(SetDefaults(%s)): %v", o.GetMeta().Name, err)
				}
			}
		})
	}
}
