package cli

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/bootstrap"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// testSystemctl is a stateful fake systemctl for the boards.
const testSystemctl = `#!/bin/sh
d=$(dirname "$0")
printf '%s\n' "$*" >> "$d/systemctl.log"
case "$1" in
--version) echo "systemd 252 (252.22-1~deb12u1)" ;;
is-enabled) [ -e "$d/enabled" ] ;;
is-active) [ "$3" != systemd-resolved.service ] && [ -e "$d/active" ] ;;
enable) touch "$d/enabled" ;;
start|restart) touch "$d/active" ;;
daemon-reload) ;;
*) exit 1 ;;
esac
`

func writeTestFile(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
}

// amd64ELF is the header of an amd64 executable: enough to pass for a
// herd binary.
func amd64ELF() []byte {
	var b bytes.Buffer
	ident := [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)}
	binary.Write(&b, binary.LittleEndian, elf.Header64{Ident: ident, Type: uint16(elf.ET_EXEC),
		Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT), Ehsize: 64})
	return b.Bytes()
}

// testAccountTools stand in for what bootstrap runs to make the executor
// account (the test runs as root: the machine's users and sudoers must not
// change): sudo runs its command as is, getent and useradd keep a passwd
// file of their own, visudo accepts.
var testAccountTools = map[string]string{
	"sudo":    "#!/bin/sh\n[ \"$1\" = -n ] || exit 2\nshift\n[ \"$1\" = -- ] && shift\nexec \"$@\"\n",
	"getent":  "#!/bin/sh\ngrep \"^$2:\" \"$(dirname \"$0\")/passwd\" 2>/dev/null || exit 2\n",
	"useradd": "#!/bin/sh\nfor last; do :; done\necho \"$last:x:998:998::/var/lib/herd-exec:/bin/sh\" >> \"$(dirname \"$0\")/passwd\"\n",
	"visudo":  "#!/bin/sh\nexit 0\n",
}

func TestBootstrapCommand(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	root := t.TempDir()
	h.env["HERD_BOOTSTRAP_TEST_ROOT"] = root

	// Two boards: real sshd, fake systemctl; both accept the key of the first.
	var conf, known bytes.Buffer
	var key string
	bins := map[string]string{}
	for _, name := range []string{"b1", "b2"} {
		bin := t.TempDir()
		bins[name] = bin
		writeTestFile(t, filepath.Join(bin, "systemctl"), []byte(testSystemctl), 0o755)
		for name, script := range testAccountTools {
			writeTestFile(t, filepath.Join(bin, name), []byte(script), 0o755)
		}
		if err := os.MkdirAll(filepath.Join(root, name, "etc/sudoers.d"), 0o750); err != nil {
			t.Fatal(err)
		}
		srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{"PATH=" + bin + ":/usr/bin:/bin:/usr/sbin:/sbin"}})
		if key == "" {
			key = srv.ClientKeyFile
		}
		// Authorise the first board's client key everywhere.
		ak := filepath.Join(srv.Dir, "authorized_keys")
		old, _ := os.ReadFile(ak)
		writeTestFile(t, ak, append(old, ssh.MarshalAuthorizedKey(mustSigner(t, key).PublicKey())...), 0o600)
		writeTestFile(t, filepath.Join(root, name, "etc/ssh/ssh_host_ed25519_key.pub"), ssh.MarshalAuthorizedKey(srv.HostKey), 0o644)
		host, port, _ := strings.Cut(srv.Addr, ":")
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %s\n  User root\n\n", name, host, port)
		kh, _ := os.ReadFile(srv.KnownHostsFile)
		known.Write(kh)
	}
	sshConf := filepath.Join(dir, "ssh_config")
	writeTestFile(t, sshConf, conf.Bytes(), 0o600)
	knownHosts := filepath.Join(dir, "known_hosts")
	writeTestFile(t, knownHosts, known.Bytes(), 0o600)
	herd := filepath.Join(dir, "herd")
	writeTestFile(t, herd, amd64ELF(), 0o755)

	// The agent API of the server board b1, as the tunnel will find it.
	sock := filepath.Join(root, "b1", bootstrap.APISocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serveStatusMembers(t, l, "b1", "b1", "b2")

	args := []string{"bootstrap", "-F", sshConf, "-i", key, "--known-hosts", knownHosts, "--herd-binary", herd,
		"--cluster", "lab", "--servers", "1", "--name-from", "alias", "--label", "room=lab", "b1", "b2"}
	out, _ := h.mustRun(0, args...)
	t.Logf("first run:\n%s", out)
	for _, want := range []string{
		"b1: checking...",
		"b2: uploading herd (64 B, missing)",
		"b1: systemctl start herd.service",
		"b1: ok: server b1, 10 files written, 3 systemctl steps", // the sudoers drop-in and herd-exec's authorized_keys included
		"b2: ok: worker b2, 7 files written, 3 systemctl steps",
		`cluster "lab": new gossip key, server key, cluster SSH key and API token in ` + filepath.Join(h.env["HOME"], ".config/herd/clusters/lab"),
		`context "lab" (ssh root@127.0.0.1:`,
		`cluster "lab" formed: leader b1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	cfg, err := loadConfig(filepath.Join(h.env["HOME"], ".config/herd/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.context("lab")
	if !ok || cfg.CurrentContext != "lab" || c.SSH == nil {
		t.Fatalf("config: %+v", cfg)
	}
	if want := filepath.Join(h.env["HOME"], ".config/herd/clusters/lab/api.token"); c.TokenFile != want || c.Token != "" {
		t.Errorf("context token %q, token_file %q; want token_file %q", c.Token, c.TokenFile, want)
	}
	if c.SSH.User != "root" || c.SSH.Key != key || c.SSH.KnownHosts != knownHosts || len(c.SSH.Hosts) != 1 || !strings.HasPrefix(c.SSH.Hosts[0], "127.0.0.1:") {
		t.Errorf("context ssh table: %+v", c.SSH)
	}
	if _, err := os.Stat(filepath.Join(root, "b2", "etc/herd/agent.toml")); err != nil {
		t.Errorf("b2 has no agent.toml: %v", err)
	}

	// Again: nothing changes on the boards.
	for _, b := range bins {
		os.Remove(filepath.Join(b, "systemctl.log"))
	}
	out, _ = h.mustRun(0, args...)
	for _, want := range []string{"b1: ok: server b1, nothing changed", "b2: ok: worker b2, nothing changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("second run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "new gossip key") {
		t.Errorf("second run made new keys:\n%s", out)
	}
	for name, b := range bins {
		log, _ := os.ReadFile(filepath.Join(b, "systemctl.log"))
		if got := string(log); got != "--version\nis-active --quiet systemd-resolved.service\nis-enabled --quiet herd.service\nis-active --quiet herd.service\n" {
			t.Errorf("%s: systemctl calls on the second run:\n%s", name, got)
		}
	}

	t.Run("a failing board fails the command, the others go on", func(t *testing.T) {
		bad := append([]string{}, args[:len(args)-2]...)
		bad = append(bad, "--no-wait", "b1", "b2", "root@127.0.0.1:1")
		_, errOut := h.mustRun(1, bad...)
		if !strings.Contains(errOut, "127.0.0.1:1:") {
			t.Errorf("stderr does not name the failed board:\n%s", errOut)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"bootstrap"}, "missing arguments"},
			{[]string{"bootstrap", "--server", "b1"}, "--server only applies with --add"},
			{[]string{"bootstrap", "--label", "bad", "b1"}, "want key=value"},
			{[]string{"bootstrap", "--name-from", "mac", "b1"}, "--name-from"},
			{[]string{"bootstrap", "--advertise", "b2=10.0.0.2", "b1"}, `"b2" is not one of the boards given`},
			{[]string{"bootstrap", "--advertise", "b1=b1.local", "b1"}, "is not an IP address"},
			{[]string{"bootstrap", "--cluster", "Bad_Name", "b1"}, "cluster name"},
			{[]string{"bootstrap", "--herd-binary", herd, "--dist", dir, "b1"}, "not both"},
			{[]string{"bootstrap", "-F", sshConf, "root@host:99999"}, "want 1-65535"},
		} {
			_, errOut := h.mustRun(2, tt.args...)
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("herdctl %s: stderr %q lacks %q", strings.Join(tt.args, " "), errOut, tt.want)
			}
		}
	})
}

func mustSigner(t *testing.T, path string) ssh.Signer {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
