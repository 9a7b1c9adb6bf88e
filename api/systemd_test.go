package api

import "testing"

func TestParseSystemdVersion(t *testing.T) {
	tests := []struct{ out, want string }{
		{"systemd 252 (252.30-1~deb12u2)\n+PAM +AUDIT default-hierarchy=unified\n", "252.30"},
		{"systemd 241 (241)\n+PAM\n", "241"},
		{"systemd 247 (247.3-7+rpi1+deb11u6)\n", "247.3"},
		{"systemd 255 (255.4-1ubuntu8.4)\n", "255.4"},
		{"systemd 256 (256~rc3-2)\n", "256"},
		{"systemd 257 (257.1)", "257.1"},
		{"systemd 252", "252"},
		{"systemd 252 (something-else)", "252"},
		{"systemd abc (1)", ""},
		{"bash: systemctl: command not found", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ParseSystemdVersion([]byte(tt.out)); got != tt.want {
			t.Errorf("ParseSystemdVersion(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

func TestSystemdMajor(t *testing.T) {
	for v, want := range map[string]int{"252.30": 252, "241": 241, "": -1, "abc": -1} {
		n, ok := SystemdMajor(v)
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("SystemdMajor(%q) = %d, %v; want %d", v, n, ok, want)
		}
	}
}
