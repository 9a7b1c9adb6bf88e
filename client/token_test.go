package client_test

import (
	"strings"
	"testing"

	"github.com/herd-dev/herd/client"
)

func TestDevTokenPath(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/herd/dev.token"},
		{map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"}, "/h/.config/herd/dev.token"},
		{map[string]string{"HOME": "/h"}, "/h/.config/herd/dev.token"},
		{nil, ""},
	}
	for _, tc := range tests {
		got, err := client.DevTokenPath(func(k string) string { return tc.env[k] })
		if tc.want == "" {
			if err == nil {
				t.Errorf("DevTokenPath(%v) = %q, want an error", tc.env, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DevTokenPath(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

func TestCheckToken(t *testing.T) {
	for tok, want := range map[string]string{
		"0123456789abcdef":     "",
		"":                     "empty",
		"short":                "too short",
		"0123456789abcdef é":   "printable ASCII",
		"0123456789abcdef\x7f": "printable ASCII",
	} {
		err := client.CheckToken(tok)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckToken(%q) = %v, want %q", tok, err, want)
		}
	}
}
