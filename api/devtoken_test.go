package api_test

import (
	"testing"

	"github.com/herd-dev/herd/api"
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
		got, err := api.DevTokenPath(func(k string) string { return tc.env[k] })
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
