package agent

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func keyLine(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
func key(b byte) []byte     { return bytes.Repeat([]byte{b}, 32) }

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadKeyFile(write("two", "# rotating\n"+keyLine(1)+"\n\n"+keyLine(2)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{key(1), key(2)}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	for name, content := range map[string]string{
		"empty":  "# nothing\n",
		"short":  keyLine(1) + "\nAAAA\n",
		"base64": "not base64!\n",
	} {
		p := write(name, content)
		if _, err := ReadKeyFile(p); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
	if _, err := ReadKeyFile(write("short2", keyLine(1)+"\nAAAA\n")); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("bad second line: error %v, want the line number", err)
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	gossip := filepath.Join(dir, "gossip.key")
	server := filepath.Join(dir, "server.key")
	legacy := filepath.Join(dir, "cluster.key")
	missing := filepath.Join(dir, "missing.key")
	os.WriteFile(gossip, []byte(keyLine(1)+"\n"+keyLine(2)+"\n"), 0o600)
	os.WriteFile(server, []byte(keyLine(3)+"\n"), 0o600)
	os.WriteFile(legacy, []byte(keyLine(9)+"\n"), 0o600)
	for _, tc := range []struct {
		name                   string
		server                 bool
		gossipF, serverF, legF string
		want                   keys
		wantErr                string
	}{
		{name: "server", server: true, gossipF: gossip, serverF: server, want: keys{gossip: [][]byte{key(1), key(2)}, server: [][]byte{key(3)}}},
		{name: "worker ignores a server key", gossipF: gossip, serverF: server, want: keys{gossip: [][]byte{key(1), key(2)}}},
		{name: "worker without a server key file", gossipF: gossip, serverF: missing, want: keys{gossip: [][]byte{key(1), key(2)}}},
		{name: "legacy key for both", server: true, gossipF: missing, serverF: missing, legF: legacy, want: keys{gossip: [][]byte{key(9)}, server: [][]byte{key(9)}}},
		{name: "split files win over legacy", server: true, gossipF: gossip, serverF: server, legF: legacy, want: keys{gossip: [][]byte{key(1), key(2)}, server: [][]byte{key(3)}}},
		{name: "server without a server key", server: true, gossipF: gossip, serverF: missing, wantErr: "server_key_file"},
		{name: "server without a server key nor the legacy one", server: true, gossipF: gossip, serverF: missing, legF: missing, wantErr: "server_key_file: agent: key file: open " + missing},
		{name: "server key not set", server: true, gossipF: gossip, wantErr: "server_key_file is not set"},
		{name: "no gossip key", gossipF: missing, wantErr: "gossip_key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Server: tc.server, GossipKeyFile: tc.gossipF, ServerKeyFile: tc.serverF, ClusterKeyFile: tc.legF}
			got, err := loadKeys(cfg, Options{}, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(keys{})); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}
