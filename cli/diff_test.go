package cli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func TestDiffObjects(t *testing.T) {
	raw := func(labels map[string]string, spec string) *api.RawObject {
		return &api.RawObject{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web", Labels: labels}, Spec: json.RawMessage(spec)}
	}
	tests := []struct {
		name       string
		live, want *api.RawObject
		lines      []string
	}{
		{name: "identical",
			live:  raw(map[string]string{"a": "b"}, `{"replicas":3,"template":{"exec":["/bin/web"]}}`),
			want:  raw(map[string]string{"a": "b"}, `{"template":{"exec":["/bin/web"]},"replicas":3}`),
			lines: nil},
		{name: "changed, added and removed fields",
			live: raw(map[string]string{"app": "web", "herd.dev/arch": "arm"}, `{"replicas":3,"template":{"exec":["/bin/web","-v"],"env":{"A":"1"}}}`),
			want: raw(map[string]string{"app": "web"}, `{"replicas":5,"template":{"exec":["/bin/web"],"env":{"A":"1","B":"2"},"ports":[{"name":"http","port":8080}]}}`),
			lines: []string{
				`- metadata.labels["herd.dev/arch"]: "arm"`,
				`~ spec.replicas: 3 -> 5`,
				`+ spec.template.env.B: "2"`,
				`- spec.template.exec[1]: "-v"`,
				`+ spec.template.ports[0].name: "http"`,
				`+ spec.template.ports[0].port: 8080`,
			}},
		{name: "created: everything is added",
			live: nil,
			want: raw(nil, `{"replicas":1,"selector":{"app":"web"}}`),
			lines: []string{
				`+ spec.replicas: 1`,
				`+ spec.selector.app: "web"`,
			}},
		{name: "type change is a change",
			live:  raw(nil, `{"x":{"a":1}}`),
			want:  raw(nil, `{"x":"flat"}`),
			lines: []string{`~ spec.x: {"a":1} -> "flat"`}},
		{name: "large numbers stay exact",
			live:  raw(nil, `{"n":9007199254740993}`),
			want:  raw(nil, `{"n":9007199254740992}`),
			lines: []string{`~ spec.n: 9007199254740993 -> 9007199254740992`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := diffObjects(tt.live, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.lines, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
