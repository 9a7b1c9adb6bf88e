package api

import (
	"regexp"
	"testing"
)

func TestTemplateHash(t *testing.T) {
	build := func(order []string) PodTemplate {
		tm := PodTemplate{Exec: []string{"/bin/web"}, Labels: map[string]string{}, Env: map[string]string{}}
		for _, k := range order {
			tm.Labels[k] = "v" + k
			tm.Env[k] = "e" + k
		}
		return tm
	}
	a := TemplateHash(build([]string{"a", "b", "c", "d", "e", "f"}))
	for i := 0; i < 20; i++ {
		if b := TemplateHash(build([]string{"f", "e", "d", "c", "b", "a"})); b != a {
			t.Fatalf("hash depends on map insertion order: %s != %s", a, b)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{10}$`).MatchString(a) {
		t.Errorf("hash %q is not 10 hex digits", a)
	}
	// Pinned, so that an accidental change to the hash (which would roll
	// every pod in every cluster on upgrade) fails a test.
	if got, want := TemplateHash(PodTemplate{Exec: []string{"/bin/true"}}), "2ee73e3271"; got != want {
		t.Errorf("TemplateHash(minimal) = %s, want %s: changing it restarts every pod on upgrade", got, want)
	}
	base := build([]string{"a"})
	changes := map[string]func(*PodTemplate){
		"exec":      func(t *PodTemplate) { t.Exec = append(t.Exec, "-v") },
		"env":       func(t *PodTemplate) { t.Env["a"] = "other" },
		"label":     func(t *PodTemplate) { t.Labels["z"] = "z" },
		"port":      func(t *PodTemplate) { t.Ports = []Port{{Name: "http"}} },
		"resources": func(t *PodTemplate) { t.Resources.MemoryLimit = "1M" },
		"probe":     func(t *PodTemplate) { t.Readiness = &Probe{TCP: "80"} },
	}
	for name, change := range changes {
		c := base.DeepCopy()
		change(&c)
		if TemplateHash(c) == TemplateHash(base) {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
}
