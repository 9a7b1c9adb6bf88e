package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestUpgradeAndRemoveUsage(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bootstrap", "--remove"}, "want the boards to remove"},
		{[]string{"bootstrap", "--force", "b1"}, "--force only applies with --remove"},
		{[]string{"bootstrap", "--remove", "--add", "b1"}, "--remove cannot be combined"},
		{[]string{"bootstrap", "--remove", "--rotate", "ssh"}, "--remove cannot be combined"},
		{[]string{"upgrade", "b1"}, "too many arguments"},
		{[]string{"upgrade", "--herd-binary", "a", "--dist", "b"}, "not both"},
		{[]string{"upgrade", "--gate-timeout", "0s"}, "--gate-timeout 0s: must be > 0"},
	} {
		_, errOut := h.mustRun(2, tt.args...)
		if !strings.Contains(errOut, tt.want) {
			t.Errorf("herdctl %s: stderr %q lacks %q", strings.Join(tt.args, " "), errOut, tt.want)
		}
	}
	// Without a state folder there is nothing to upgrade or remove.
	for _, args := range [][]string{{"upgrade", "--cluster", "none"}, {"bootstrap", "--cluster", "none", "--remove", "b1"}} {
		_, errOut := h.mustRun(1, args...)
		if !strings.Contains(errOut, "no cluster") {
			t.Errorf("herdctl %s: stderr %q does not say there is no cluster", strings.Join(args, " "), errOut)
		}
	}
}

func TestDropContextHosts(t *testing.T) {
	h := newHarness(t)
	if code, _, errOut := h.run("config", "set-context", "lab", "--addr", "http://127.0.0.1:1"); code != 0 {
		t.Fatal(errOut)
	}
	a := &app{env: env{getenv: func(k string) string { return h.env[k] }}}
	if err := a.writeSSHContext("lab", sshConfig{User: "root", Hosts: []string{"10.0.0.1", "pi@10.0.0.2:2222", "10.0.0.3"}}, "/tok"); err != nil {
		t.Fatal(err)
	}
	if err := a.dropContextHosts("lab", []string{"10.0.0.1:22", "10.0.0.2:2222"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.context("lab")
	if !ok || c.SSH == nil || !slices.Equal(c.SSH.Hosts, []string{"10.0.0.3"}) {
		t.Errorf("context after dropping two servers: %+v", c)
	}
}
