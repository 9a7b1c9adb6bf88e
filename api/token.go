package api

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// MaxTokenFileBytes bounds a token file.
const MaxTokenFileBytes = 64 << 10

// CheckToken reports what is wrong with an API token: at least 16
// characters, printable ASCII without blanks.
func CheckToken(tok string) error {
	switch {
	case tok == "":
		return errors.New("api: empty token")
	case len(tok) < 16:
		return fmt.Errorf("api: token of %d characters is too short (want at least 16; herd makes 43)", len(tok))
	case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f || r > 0x7e }):
		return errors.New("api: a token is printable ASCII without blanks")
	}
	return nil
}

// ParseTokens parses a token file: one token per line; blank lines and
// lines starting with # are skipped. The first token is the one clients
// should use; every listed token is accepted. name is used in errors.
func ParseTokens(name string, data []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxTokenFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := CheckToken(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, strings.TrimPrefix(err.Error(), "api: "))
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in the file", name)
	}
	return out, nil
}

// ReadTokenFile reads and parses a token file of at most MaxTokenFileBytes.
func ReadTokenFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api: token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("api: token file %s: %w", path, err)
	}
	if len(data) > MaxTokenFileBytes {
		return nil, fmt.Errorf("api: token file %s is larger than %d bytes", path, MaxTokenFileBytes)
	}
	toks, err := ParseTokens(path, data)
	if err != nil {
		return nil, fmt.Errorf("api: token file %w", err)
	}
	return toks, nil
}

// DevTokenPath is where `herd agent -dev` writes the token of its API and
// where herdctl looks for it when it falls back to DefaultAddr with no
// other token: $XDG_CONFIG_HOME/herd/dev.token, or
// $HOME/.config/herd/dev.token.
func DevTokenPath(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && strings.HasPrefix(x, "/") {
		return path.Join(x, "herd", "dev.token"), nil
	}
	if h := getenv("HOME"); h != "" {
		return path.Join(h, ".config", "herd", "dev.token"), nil
	}
	return "", errors.New("api: neither $XDG_CONFIG_HOME nor $HOME is set: no place for the dev token")
}
