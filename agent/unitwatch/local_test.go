package unitwatch

import "testing"

// TestIsHerdUnitOrRun: the DBus source reports changes of pods' units and
// of the runs of overlapping jobs, and of nothing else.
func TestIsHerdUnitOrRun(t *testing.T) {
	for unit, want := range map[string]bool{
		"herd-web-abcde.service":                                   true,
		"herd-tick-abcde@509dc5d2fdb04954a6eaff4ef7fe0587.service": true,
		"herd-tick-abcde@.service":                                 false, // the template
		"herd-tick-abcde_kick.service":                             false,
		"herd-tick-abcde.timer":                                    false,
		"sshd.service":                                             false,
		"getty@tty1.service":                                       false,
	} {
		if got := isHerdUnitOrRun(unit); got != want {
			t.Errorf("isHerdUnitOrRun(%q) = %v, want %v", unit, got, want)
		}
	}
}
