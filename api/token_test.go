package api_test

import (
	"strings"
	"testing"

	"github.com/herd-dev/herd/api"
)

func TestCheckToken(t *testing.T) {
	for tok, want := range map[string]string{
		"0123456789abcdef":     "",
		"":                     "empty",
		"short":                "too short",
		"0123456789abcdef é":   "printable ASCII",
		"0123456789abcdef\x7f": "printable ASCII",
	} {
		err := api.CheckToken(tok)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckToken(%q) = %v, want %q", tok, err, want)
		}
	}
}
