package cli

import (
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
