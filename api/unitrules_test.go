package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateRenderableAndBindable(t *testing.T) {
	pod := func() *Pod {
		return &Pod{Kind: KindPod, Metadata: ObjectMeta{Name: "web-1"}, Spec: PodSpec{
			Owner:    OwnerRef{Kind: KindDeployment, Name: "web"},
			Template: PodTemplate{Exec: []string{"/bin/web", "${PORT}"}, Ports: []Port{{Name: "http"}}},
		}}
	}
	// Pending: bindable, not yet renderable (no host port).
	p := pod()
	if err := ValidateBindable(p); err != nil {
		t.Errorf("ValidateBindable(pending pod) = %v", err)
	}
	err := ValidateRenderable(p)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `spec.hostPorts[http]: no host port assigned to dynamic port "http"`) {
		t.Errorf("ValidateRenderable(pending pod) = %v, want the missing host port", err)
	}
	// Bound: renderable. The argument is not modified (defaults go to a copy).
	p.Spec.HostPorts = map[string]int{"http": 31000}
	if err := ValidateRenderable(p); err != nil {
		t.Errorf("ValidateRenderable(bound pod) = %v", err)
	}
	if p.Spec.Template.Sandbox != "" || p.Spec.Template.RestartPolicy != "" {
		t.Errorf("ValidateRenderable modified its argument: %+v", p.Spec.Template)
	}
	// Rules that do not reach the unit (node selector labels, percentage
	// memory requests the scheduler supports) are left to Validate.
	p.Spec.Template.NodeSelector = map[string]string{LabelModel: "Pi 4"}
	p.Spec.Template.Resources.MemoryRequest = "10%"
	if err := ValidateBindable(p); err != nil {
		t.Errorf("ValidateBindable checks more than the unit: %v", err)
	}
	// The budget is the bind's, not the render's.
	p = pod()
	p.Spec.Template.Files = []File{{Path: "/srv/a", Content: strings.Repeat("x", MaxTemplateBytes)}}
	if err := ValidateBindable(p); err == nil || !strings.Contains(err.Error(), "Raft transaction") {
		t.Errorf("ValidateBindable(over budget) = %v", err)
	}
	if ValidateRenderable(nil) == nil || ValidateBindable(nil) == nil {
		t.Error("a nil pod validates")
	}
}

func TestExecVars(t *testing.T) {
	tm := &PodTemplate{Env: map[string]string{"A": "1"}, Ports: []Port{{}, {Name: "metrics-http"}}}
	want := map[string]bool{"A": true, "PORT": true, "PORT_P0": true, "PORT_METRICS_HTTP": true}
	if diff := cmp.Diff(want, ExecVars(tm)); diff != "" {
		t.Errorf("ExecVars (-want +got):\n%s", diff)
	}
	if got := ExecVars(&PodTemplate{}); len(got) != 0 {
		t.Errorf("ExecVars(no env, no ports) = %v, want none (no PORT)", got)
	}
	q := ExecQuoting(tm)
	for in, want := range map[string]string{
		"${A}":        `"${A}"`,
		"${PORT}":     `"${PORT}"`,
		"${HOME}":     `"$${HOME}"`,
		"$A 100%":     `"$$A 100%%"`,
		"a\"b\\c\x01": `"a\"b\\c\x01"`,
	} {
		if got := QuoteUnitWord(in, q); got != want {
			t.Errorf("QuoteUnitWord(%q) = %s, want %s", in, got, want)
		}
	}
}
