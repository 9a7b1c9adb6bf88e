package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testSHA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestArtifactURLProblem(t *testing.T) {
	tests := []struct {
		url  string
		want string // substring of the problem; "" for none
	}{
		{"http://files.lan/sensor-arm64", ""},
		{"https://files.lan:8443/a/b?v=2", ""},
		{"http://[fd00::1]/x", ""},
		{"HTTP://files.lan/x", ""}, // url.Parse lower-cases the scheme
		{"ftp://files.lan/x", "http:// or https://"},
		{"file:///etc/shadow", "http:// or https://"},
		{"files.lan/x", "http:// or https://"},
		{"http:files.lan", "has no host"},
		{"http:///x", "has no host"},
		{"http://u:p@files.lan/x", "user name or password"},
		{"http://u@files.lan/x", "user name or password"},
		{"http://files.lan/a b", "printable ASCII"},
		{"http://files.lan/\x00", "printable ASCII"},
		{"http://files.lan/é", "printable ASCII"},
		{"http://files.lan/" + strings.Repeat("a", MaxArtifactURL), "at most"},
		{"http://%zz/", "is not a URL"},
	}
	for _, tc := range tests {
		t.Run(tc.url[:min(len(tc.url), 40)], func(t *testing.T) {
			got := ArtifactURLProblem(tc.url)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("ArtifactURLProblem(%q) = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}

func TestValidateArtifacts(t *testing.T) {
	art := func(mut func(a *Artifact)) *Deployment {
		return tmpl(func(t *PodTemplate) {
			a := Artifact{URL: "http://files.lan/sensor", SHA256: testSHA, Path: "/opt/sensor/sensor"}
			mut(&a)
			t.Artifacts = []Artifact{a}
		})
	}
	tests := []struct {
		name  string
		obj   *Deployment
		field string // "" for valid
		msg   string
	}{
		{"valid", art(func(a *Artifact) {}), "", ""},
		{"valid setuid with opt-in", art(func(a *Artifact) { a.Mode, a.AllowSetID = "4755", true }), "", ""},
		{"valid tmp without sandbox", dep(func(d *Deployment) {
			d.Spec.Template.Sandbox = SandboxNone
			d.Spec.Template.Artifacts = []Artifact{{URL: "http://f/x", SHA256: testSHA, Path: "/tmp/x"}}
		}), "", ""},
		{"url missing", art(func(a *Artifact) { a.URL = "" }), "spec.template.artifacts[0].url", "required"},
		{"url scheme", art(func(a *Artifact) { a.URL = "ftp://f/x" }), "spec.template.artifacts[0].url", "http://"},
		{"url password redacted", art(func(a *Artifact) { a.URL = "http://u:secret@f/x" }), "spec.template.artifacts[0].url", "u:xxxxx@"},
		{"sha256 missing", art(func(a *Artifact) { a.SHA256 = "" }), "spec.template.artifacts[0].sha256", "required"},
		{"sha256 upper", art(func(a *Artifact) { a.SHA256 = strings.ToUpper(testSHA) }), "spec.template.artifacts[0].sha256", "lower-case"},
		{"sha256 long", art(func(a *Artifact) { a.SHA256 = testSHA + "0" }), "spec.template.artifacts[0].sha256", "64"},
		{"path missing", art(func(a *Artifact) { a.Path = "" }), "spec.template.artifacts[0].path", "required"},
		{"path root", art(func(a *Artifact) { a.Path = "/" }), "spec.template.artifacts[0].path", "directory"},
		{"path unclean", art(func(a *Artifact) { a.Path = "/opt//x" }), "spec.template.artifacts[0].path", "clean"},
		{"path dotdot", art(func(a *Artifact) { a.Path = "/opt/../etc/x" }), "spec.template.artifacts[0].path", `".."`},
		{"path herd etc", art(func(a *Artifact) { a.Path = "/etc/herd/agent.toml" }), "spec.template.artifacts[0].path", "herd's own"},
		{"path herd run", art(func(a *Artifact) { a.Path = "/run/herd" }), "spec.template.artifacts[0].path", "herd's own"},
		{"path herd binary", art(func(a *Artifact) { a.Path = HerdBinary }), "spec.template.artifacts[0].path", "herd's own"},
		{"path tmp sandboxed", art(func(a *Artifact) { a.Path = "/tmp/x" }), "spec.template.artifacts[0].path", "PrivateTmp"},
		{"path clashes with a file", tmpl(func(t *PodTemplate) {
			t.Files = []File{{Path: "/opt/x"}}
			t.Artifacts = []Artifact{{URL: "http://f/x", SHA256: testSHA, Path: "/opt/x"}}
		}), "spec.template.artifacts[0].path", "files[0]"},
		{"path twice", tmpl(func(t *PodTemplate) {
			a := Artifact{URL: "http://f/x", SHA256: testSHA, Path: "/opt/x"}
			t.Artifacts = []Artifact{a, a}
		}), "spec.template.artifacts[1].path", "also artifacts[0]"},
		{"mode bad", art(func(a *Artifact) { a.Mode = "rwx" }), "spec.template.artifacts[0].mode", "octal"},
		{"mode setgid", art(func(a *Artifact) { a.Mode = "2755" }), "spec.template.artifacts[0].mode", "allow_setid"},
		{"too many", tmpl(func(t *PodTemplate) {
			for i := range MaxArtifacts + 1 {
				t.Artifacts = append(t.Artifacts, Artifact{URL: "http://f/x", SHA256: testSHA, Path: "/opt/" + string(rune('a'+i))})
			}
		}), "spec.template.artifacts", "at most 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.obj)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fes FieldErrors
			if !errors.As(err, &fes) {
				t.Fatalf("Validate = %v, want FieldErrors", err)
			}
			for _, fe := range fes {
				if fe.Field == tc.field && strings.Contains(fe.Message, tc.msg) {
					return
				}
			}
			t.Errorf("Validate = %v, want %s: ...%s...", err, tc.field, tc.msg)
		})
	}
}

func TestDefaultArtifactMode(t *testing.T) {
	d := tmpl(func(t *PodTemplate) {
		t.Artifacts = []Artifact{
			{URL: "http://f/a", SHA256: testSHA, Path: "/opt/a"},
			{URL: "http://f/b", SHA256: testSHA, Path: "/opt/b", Mode: "644"},
		}
	})
	SetDefaults(d)
	var got []string
	for _, a := range d.Spec.Template.Artifacts {
		got = append(got, a.Mode)
	}
	if diff := cmp.Diff([]string{"0755", "0644"}, got); diff != "" {
		t.Errorf("modes after SetDefaults (-want +got):\n%s", diff)
	}
	if m, err := d.Spec.Template.Artifacts[0].Perm(); err != nil || m != 0o755 {
		t.Errorf("Perm = %v, %v; want 0755", m, err)
	}
}
