package gossip

import "testing"

func TestParseMemberlistLine(t *testing.T) {
	for _, tc := range []struct{ in, msg, level string }{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", "Stream connection from=127.0.0.1:1", "DEBUG"},
		{"[WARN] memberlist: Refuting a suspect message (from: b)", "Refuting a suspect message (from: b)", "WARN"},
		{"plain text\n", "plain text", ""},
		{"[ERR", "[ERR", ""},
		{"", "", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			msg, level := parseMemberlistLine(tc.in)
			if msg != tc.msg || level != tc.level {
				t.Errorf("parse(%q) = %q, %q; want %q, %q", tc.in, msg, level, tc.msg, tc.level)
			}
		})
	}
}
