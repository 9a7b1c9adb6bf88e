package agent

import (
	"bytes"
	"strings"
	"testing"
)

// TestMainUsage: herd's command line answers help on stdout with status 0
// and mistakes on stderr with status 2, naming what is wrong.
func TestMainUsage(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		out, err string // substrings of stdout and stderr, when set
	}{
		{nil, 2, "", "Commands:"},
		{[]string{"--help"}, 0, "keygen", ""},
		{[]string{"agent", "--help"}, 0, "--data-dir", ""},
		{[]string{"agent", "-help"}, 0, "--bootstrap-expect", ""},
		{[]string{"frob"}, 2, "", `unknown command "frob"`},
		{[]string{"agent", "-bogus"}, 2, "", "unknown flag: --bogus"},
		{[]string{"agent", "extra"}, 2, "", `takes no arguments, got ["extra"]`},
		{[]string{"agent", "--bootstrap-expect", "many"}, 2, "", "bootstrap-expect"},
		{[]string{"agent", "-name", "Bad_Name"}, 2, "", `name "Bad_Name"`},
		{[]string{"version", "-o", "yaml"}, 2, "", `-o "yaml": want json`},
		{[]string{"keygen", "x"}, 2, "", "takes no arguments"},
	} {
		var out, errOut bytes.Buffer
		code := Main(c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("herd %q: status %d, stdout %q, stderr %q; want status %d, stdout with %q, stderr with %q",
				c.args, code, out.String(), errOut.String(), c.code, c.out, c.err)
		}
	}
}
