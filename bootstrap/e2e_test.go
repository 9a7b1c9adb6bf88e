package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// fakeSystemctl is a stateful systemctl: it logs its argv (NUL-separated,
// one line per call) and remembers enable/start in files next to it;
// systemd-resolved runs when the file "resolved" is there.
const fakeSystemctl = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/systemctl.log"
printf '\n' >> "$d/systemctl.log"
case "$1" in
--version) echo "systemd 252 (252.22-1~deb12u1)"; echo "+PAM +AUDIT" ;;
is-enabled) [ -e "$d/enabled" ] ;;
is-active) if [ "$3" = systemd-resolved.service ]; then [ -e "$d/resolved" ]; else [ -e "$d/active" ]; fi ;;
enable) touch "$d/enabled" ;;
start|restart) touch "$d/active" ;;
daemon-reload) ;;
reload-or-restart) [ "$2" = systemd-resolved.service ] && [ -e "$d/resolved" ] ;;
*) echo "fake systemctl: unexpected $*" >&2; exit 1 ;;
esac
`

// Fakes of what bootstrap runs to make the executor account, so that a
// test never changes the machine's users or sudoers. The fake sudo logs
// its argv and runs it as the login user (root in these tests); the fake
// id says uid 1000 outside sudo when the file "nonroot" exists, so that a
// board can pretend its login user is not root.
const (
	fakeSudo = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/sudo.log"
printf '\n' >> "$d/sudo.log"
[ "$1" = -n ] || { echo "fake sudo: want -n" >&2; exit 2; }
shift
[ "$1" = -- ] && shift
[ -e "$d/password" ] && { echo "sudo: a password is required" >&2; exit 1; }
HERD_FAKE_SUDO=1 exec "$@"
`
	fakeID = `#!/bin/sh
d=$(dirname "$0")
if [ "$1" = -u ] && [ -e "$d/nonroot" ] && [ -z "$HERD_FAKE_SUDO" ]; then echo 1000; exit 0; fi
exec /usr/bin/id "$@"
`
	fakeGetent = `#!/bin/sh
d=$(dirname "$0")
[ "$1" = passwd ] || exit 1
grep "^$2:" "$d/passwd" 2>/dev/null || exit 2
`
	fakeUseradd = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/useradd.log"
printf '\n' >> "$d/useradd.log"
for last; do :; done
echo "$last:x:998:998:herd executor:/var/lib/herd-exec:/bin/sh" >> "$d/passwd"
`
	fakePkill = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/pkill.log"
printf '\n' >> "$d/pkill.log"
exit 1
`
	fakeUserdel = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/userdel.log"
printf '\n' >> "$d/userdel.log"
for last; do :; done
grep -v "^$last:" "$d/passwd" > "$d/passwd.new"; mv "$d/passwd.new" "$d/passwd"
`
	fakeVisudo = `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" >> "$d/visudo.log"
printf '\n' >> "$d/visudo.log"
[ "$1 $2 $3" = "-c -q -f" ] && grep -q "^herd-exec ALL=(root) NOPASSWD: " "$4"
`
)

// labBoard is one "board": a real sshd on 127.0.0.1 with a fake systemctl
// first on its PATH, and its files under root.
type labBoard struct {
	name string
	srv  *sshdtest.Server
	bin  string // fake systemctl's folder
	root string // Options.Root/<name>
}

// systemctlCalls returns the calls logged by b's fake systemctl since the
// log was last cleared.
func (b *labBoard) systemctlCalls(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.bin, "systemctl.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		out = append(out, strings.Split(strings.TrimSuffix(line, "\x00"), "\x00"))
	}
	return out
}

func (b *labBoard) clearLog(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(b.bin, "systemctl.log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// lab is several boards, an ssh_config naming them, a known_hosts file
// listing their keys, and a herd binary.
type lab struct {
	dir        string
	root       string
	boards     map[string]*labBoard
	sshConfig  string
	knownHosts string
	binary     string
	stateDir   string
}

func newLab(t *testing.T, names ...string) *lab {
	t.Helper()
	l := &lab{dir: t.TempDir(), root: t.TempDir(), boards: map[string]*labBoard{}}
	l.stateDir = filepath.Join(l.dir, "state")
	var conf, known bytes.Buffer
	for _, n := range names {
		l.addBoard(t, n, &conf, &known)
	}
	l.sshConfig = writeFile(t, l.dir, "ssh_config", conf.Bytes(), 0o600)
	l.knownHosts = writeFile(t, l.dir, "known_hosts", known.Bytes(), 0o600)
	// A fake amd64 herd binary of 1 MB.
	bin := fakeELF(elf.EM_X86_64, elf.ELFCLASS64)
	pad := make([]byte, 1<<20)
	rand.Read(pad)
	l.binary = writeFile(t, l.dir, "herd", append(bin, pad...), 0o755)
	return l
}

func (l *lab) addBoard(t *testing.T, name string, conf, known *bytes.Buffer) *labBoard {
	t.Helper()
	bin := t.TempDir()
	writeFile(t, bin, "systemctl", []byte(fakeSystemctl), 0o755)
	for name, script := range map[string]string{"sudo": fakeSudo, "id": fakeID, "getent": fakeGetent, "useradd": fakeUseradd, "visudo": fakeVisudo, "pkill": fakePkill, "userdel": fakeUserdel} {
		writeFile(t, bin, name, []byte(script), 0o755)
	}
	srv := sshdtest.StartWith(t, sshdtest.Options{SetEnv: []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}})
	b := &labBoard{name: name, srv: srv, bin: bin, root: filepath.Join(l.root, name)}
	writeFile(t, b.root, "etc/ssh/ssh_host_ed25519_key.pub", ssh.MarshalAuthorizedKey(srv.HostKey), 0o644)
	// sudo's drop-in folder, as the sudo package makes it.
	if err := os.MkdirAll(filepath.Join(b.root, "etc/sudoers.d"), 0o750); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(srv.Addr, ":")
	fmt.Fprintf(conf, "Host %s\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n\n", name, port, srv.User, srv.ClientKeyFile)
	kh, err := os.ReadFile(srv.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	known.Write(kh)
	l.boards[name] = b
	return b
}

// counting wraps a Remote and records every call that can change a board.
type counting struct {
	Remote
	mu     sync.Mutex
	writes []string
}

func (c *counting) PutFile(ctx context.Context, node, p string, content []byte, mode os.FileMode, opts ...sshexec.PutFileOptions) error {
	c.mu.Lock()
	c.writes = append(c.writes, "put "+p)
	c.mu.Unlock()
	return c.Remote.PutFile(ctx, node, p, content, mode, opts...)
}

func (c *counting) Run(ctx context.Context, node string, argv []string) (sshexec.Result, error) {
	readOnly := map[string]bool{"id": true, "uname": true, "sha256sum": true, "stat": true, "getent": true, "visudo": true}
	if slices.Equal(argv, []string{"sudo", "-n", "true"}) {
		readOnly["sudo"] = true
	}
	a := argv
	if len(a) > 3 && slices.Equal(a[:3], []string{"sudo", "-n", "--"}) { // a sudo user's command
		a = a[3:]
	}
	if !readOnly[a[0]] && !(a[0] == "systemctl" && slices.Contains([]string{"--version", "is-enabled", "is-active"}, a[1])) {
		c.mu.Lock()
		c.writes = append(c.writes, "run "+strings.Join(argv, " "))
		c.mu.Unlock()
	}
	return c.Remote.Run(ctx, node, argv)
}

func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// options returns Options for the lab's boards; remotes collects the
// counting wrappers by board.
func (l *lab) options(t *testing.T, remotes map[string]*counting, boards ...string) Options {
	t.Helper()
	sc, err := LoadSSHConfig([]string{l.sshConfig}, nil, l.dir, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	o := DefaultOptions()
	o.Cluster = "lab"
	o.StateDir = l.stateDir
	o.Boards = boards
	o.SSHConfig = sc
	o.Auth = NewAuth(nil, l.dir, "")
	o.KnownHostsFiles = []string{l.knownHosts}
	o.Servers = 2
	o.NameFrom = NameFromAlias
	o.Labels = map[string]string{"room": "lab"}
	o.Binaries = Binaries{Single: l.binary}
	o.Root, o.RootPerBoard = l.root, true
	o.Logger = testutil.Logger(t)
	o.Progress = func(board, msg string) { t.Logf("%s: %s", board, msg) }
	o.wrap = func(board string, r Remote) Remote {
		mu.Lock()
		defer mu.Unlock()
		c := &counting{Remote: r}
		remotes[board] = c
		return c
	}
	return o
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func readMode(t *testing.T, p string) ([]byte, os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return data, fi.Mode().Perm()
}

func TestBootstrapEndToEnd(t *testing.T) {
	l := newLab(t, "b1", "b2", "b3")
	ctx := runCtx(t)

	// b1 already has an authorized key (mode 0640); b2 and b3 have none.
	userKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(l.boards["b1"].srv.ClientSigner.PublicKey()))) + " me@laptop\n"
	writeFile(t, l.boards["b1"].root, "root/.ssh/authorized_keys", []byte(userKey), 0o640)

	// systemd-resolved runs on b2 only.
	writeFile(t, l.boards["b2"].bin, "resolved", nil, 0o644)

	remotes := map[string]*counting{}
	o := l.options(t, remotes, "b1", "b2", "b3")
	var progressMu sync.Mutex
	progress := map[string][]string{}
	o.Progress = func(board, msg string) {
		t.Logf("%s: %s", board, msg)
		progressMu.Lock()
		progress[board] = append(progress[board], msg)
		progressMu.Unlock()
	}
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Boards {
		if b.Err != nil {
			t.Fatalf("%s: %v", b.Label, b.Err)
		}
	}
	// Where resolved does not run, one line says how to wire herd. names.
	for name, want := range map[string]int{"b1": 1, "b2": 0, "b3": 1} {
		n := 0
		for _, m := range progress[name] {
			if strings.HasPrefix(m, "systemd-resolved is not running: ") && strings.Contains(m, "server=/herd/127.0.0.1#8600") {
				n++
			}
		}
		if n != want {
			t.Errorf("%s: %d lines about systemd-resolved not running, want %d: %q", name, n, want, progress[name])
		}
	}
	if !res.Created {
		t.Error("Result.Created = false on the first run")
	}
	sec := res.State.Secrets
	bin, err := os.ReadFile(l.binary)
	if err != nil {
		t.Fatal(err)
	}

	port := func(name string) string { _, p, _ := strings.Cut(l.boards[name].srv.Addr, ":"); return p }
	wantConfig := func(name string, server bool, expect int, join []string) []byte {
		ac := AgentConfig{
			Name: name, DataDir: "/var/lib/herd", Server: server, BootstrapExpect: expect, Join: join,
			GossipKeyFile: "/etc/herd/gossip.key", GossipBind: "0.0.0.0:7946", GossipAdvertise: "auto",
			RaftBind: "0.0.0.0:7947", RaftAdvertise: "auto",
			APIListen:  []string{"127.0.0.1:7948", "unix:///run/herd/api.sock"},
			SSHAddress: "auto:" + port(name), SSHHostKeyFile: "/etc/ssh/ssh_host_ed25519_key.pub",
			SSHUser: "herd-exec", Labels: map[string]string{"room": "lab"},
			MetricsListen: MetricsListen, MetricsTokenFile: MetricsTokenPath,
		}
		if server {
			ac.ServerKeyFile, ac.APITokenFile, ac.SSHKeyFile = "/etc/herd/server.key", "/etc/herd/api.token", "/etc/herd/cluster_ssh_key"
		}
		c, err := RenderAgentConfig(ac)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	configs := map[string][]byte{
		"b1": wantConfig("b1", true, 2, []string{"127.0.0.1:7946"}),
		"b2": wantConfig("b2", true, 2, []string{"127.0.0.1:7946"}),
		"b3": wantConfig("b3", false, 0, []string{"127.0.0.1:7946", "127.0.0.1:7946"}),
	}
	clusterLine := `restrict,from="127.0.0.1",command="/usr/local/bin/herd ssh-gate" ` + string(sec.SSHPublicKey)
	for _, name := range []string{"b1", "b2", "b3"} {
		b := l.boards[name]
		t.Run("first run/"+name, func(t *testing.T) {
			authKeys, authMode := []byte(clusterLine), os.FileMode(0o644)
			type file struct {
				path    string
				content []byte
				mode    os.FileMode
			}
			files := []file{
				{"/usr/local/bin/herd", bin, 0o755},
				{"/etc/herd/gossip.key", sec.GossipKey, 0o600},
				{"/etc/herd/metrics.token", sec.MetricsToken, 0o600},
			}
			if name != "b3" {
				files = append(files,
					file{"/etc/herd/server.key", sec.ServerKey, 0o600},
					file{"/etc/herd/cluster_ssh_key", sec.SSHPrivateKey, 0o600},
					file{"/etc/herd/api.token", sec.APIToken, 0o600})
			}
			files = append(files,
				file{"/etc/sudoers.d/herd", RenderSudoers(), 0o440},
				file{"/etc/herd/agent.toml", configs[name], 0o644},
				file{"/etc/systemd/system/herd.service", RenderUnit(), 0o644},
				file{"/var/lib/herd-exec/.ssh/authorized_keys", authKeys, authMode})
			if name == "b2" {
				files = append(files, file{"/etc/systemd/resolved.conf.d/herd.conf", RenderResolvedDropIn(), 0o644})
			} else if _, err := os.Stat(filepath.Join(b.root, "etc/systemd/resolved.conf.d")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("resolved.conf.d made on %s, where resolved does not run (%v)", name, err)
			}
			if name == "b1" {
				// The user's own root login is left alone.
				files = append(files, file{"/root/.ssh/authorized_keys", []byte(userKey), 0o640})
			} else if _, err := os.Stat(filepath.Join(b.root, "root/.ssh")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("root/.ssh made on %s (%v)", name, err)
			}
			if name == "b3" {
				// A worker holds no server secret.
				for _, p := range []string{"etc/herd/server.key", "etc/herd/cluster_ssh_key", "etc/herd/api.token", "etc/herd/cluster.key"} {
					if _, err := os.Stat(filepath.Join(b.root, p)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("worker has /%s (%v)", p, err)
					}
				}
			}
			for _, f := range files {
				got, mode := readMode(t, filepath.Join(b.root, f.path))
				if !bytes.Equal(got, f.content) {
					t.Errorf("%s: content differs:\n%s", f.path, cmp.Diff(string(f.content), string(got)))
				}
				if mode != f.mode {
					t.Errorf("%s: mode %04o, want %04o", f.path, mode, f.mode)
				}
			}
			if fi, err := os.Stat(filepath.Join(b.root, "var/lib/herd-exec/.ssh")); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("~herd-exec/.ssh: %v, %v; want mode 0755", fi.Mode(), err)
			}
			if got := string(mustRead(t, filepath.Join(b.bin, "useradd.log"))); got != strings.Join(AccountArgv()[1:], "\x00")+"\x00\n" {
				t.Errorf("useradd calls %q, want one of %q", got, AccountArgv())
			}
			stage := filepath.Join(b.root, "etc/herd/sudoers.new")
			if got := string(mustRead(t, filepath.Join(b.bin, "visudo.log"))); got != "-c\x00-q\x00-f\x00"+stage+"\x00\n" {
				t.Errorf("visudo calls %q, want one check of %s", got, stage)
			}
			leftovers, _ := filepath.Glob(filepath.Join(b.root, "etc/herd/*herd-tmp*"))
			if len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
			want := [][]string{
				{"--version"},
				{"is-active", "--quiet", "systemd-resolved.service"},
				{"is-enabled", "--quiet", "herd.service"},
				{"is-active", "--quiet", "herd.service"},
				{"daemon-reload"},
				{"enable", "herd.service"},
				{"start", "herd.service"},
			}
			if name == "b2" {
				want = append(want, []string{"reload-or-restart", "systemd-resolved.service"})
			}
			if diff := cmp.Diff(want, b.systemctlCalls(t)); diff != "" {
				t.Errorf("systemctl calls (-want +got):\n%s", diff)
			}
			var wantWrites []string
			for _, f := range files {
				switch f.path {
				case "/etc/sudoers.d/herd":
					wantWrites = append(wantWrites, "put "+stage, "run mv -f -- "+stage+" "+filepath.Join(b.root, f.path))
				case "/var/lib/herd-exec/.ssh/authorized_keys", "/root/.ssh/authorized_keys", "/etc/systemd/resolved.conf.d/herd.conf":
				default:
					wantWrites = append(wantWrites, "put "+filepath.Join(b.root, f.path))
				}
			}
			wantWrites = append(wantWrites, "run "+strings.Join(AccountArgv(), " "),
				"run mkdir -p -m 755 -- "+filepath.Join(b.root, "var/lib/herd-exec/.ssh"),
				"put "+filepath.Join(b.root, "var/lib/herd-exec/.ssh/authorized_keys"),
				"run systemctl daemon-reload", "run systemctl enable herd.service", "run systemctl start herd.service")
			if name == "b2" {
				wantWrites = append(wantWrites, "put "+filepath.Join(b.root, "etc/systemd/resolved.conf.d/herd.conf"),
					"run systemctl reload-or-restart systemd-resolved.service")
			}
			if diff := cmp.Diff(wantWrites, remotes[name].take()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			b.clearLog(t)
		})
	}

	state, _, err := LoadState(l.stateDir, "lab", false)
	if err != nil {
		t.Fatal(err)
	}
	wantBoards := []StateBoard{
		{Name: "b1", Target: l.boards["b1"].srv.Addr, User: "root", Arg: "b1", Address: "127.0.0.1", Server: true, BootstrapExpect: 2},
		{Name: "b2", Target: l.boards["b2"].srv.Addr, User: "root", Arg: "b2", Address: "127.0.0.1", Server: true, BootstrapExpect: 2},
		{Name: "b3", Target: l.boards["b3"].srv.Addr, User: "root", Arg: "b3", Address: "127.0.0.1"},
	}
	if diff := cmp.Diff(wantBoards, state.Boards); diff != "" {
		t.Errorf("state boards (-want +got):\n%s", diff)
	}

	t.Run("second run writes nothing", func(t *testing.T) {
		remotes := map[string]*counting{}
		res, err := Run(ctx, l.options(t, remotes, "b1", "b2", "b3"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Created {
			t.Error("secrets generated again")
		}
		for _, b := range res.Boards {
			if b.Err != nil {
				t.Fatalf("%s: %v", b.Label, b.Err)
			}
			if len(b.Written) > 0 || len(b.Steps) > 0 {
				t.Errorf("%s: written %q, steps %q; want nothing", b.Label, b.Written, b.Steps)
			}
			if w := remotes[b.Label].take(); len(w) > 0 {
				t.Errorf("%s: %d writes on a second run: %q", b.Label, len(w), w)
			}
			want := [][]string{{"--version"}, {"is-active", "--quiet", "systemd-resolved.service"}, {"is-enabled", "--quiet", "herd.service"}, {"is-active", "--quiet", "herd.service"}}
			if diff := cmp.Diff(want, l.boards[b.Label].systemctlCalls(t)); diff != "" {
				t.Errorf("%s: systemctl calls (-want +got):\n%s", b.Label, diff)
			}
			l.boards[b.Label].clearLog(t)
		}
		got, _ := readMode(t, filepath.Join(l.boards["b1"].root, ExecAuthKeysPath))
		if strings.Count(string(got), strings.Fields(string(sec.SSHPublicKey))[1]) != 1 {
			t.Errorf("cluster key appears more than once:\n%s", got)
		}
	})

	t.Run("third run repairs only what changed", func(t *testing.T) {
		if err := os.Chmod(filepath.Join(l.boards["b3"].root, "etc/herd/agent.toml"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(l.boards["b2"].bin, "active")); err != nil { // herd stopped on b2
			t.Fatal(err)
		}
		remotes := map[string]*counting{}
		res, err := Run(ctx, l.options(t, remotes, "b1", "b2", "b3"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{
			"b1": nil,
			"b2": {"run systemctl start herd.service"},
			"b3": {"put " + filepath.Join(l.boards["b3"].root, "etc/herd/agent.toml"), "run systemctl restart herd.service"},
		}
		for _, b := range res.Boards {
			if b.Err != nil {
				t.Fatalf("%s: %v", b.Label, b.Err)
			}
			if diff := cmp.Diff(want[b.Label], remotes[b.Label].take()); diff != "" {
				t.Errorf("%s: writes (-want +got):\n%s", b.Label, diff)
			}
			l.boards[b.Label].clearLog(t)
		}
		if _, mode := readMode(t, filepath.Join(l.boards["b3"].root, "etc/herd/agent.toml")); mode != 0o644 {
			t.Errorf("agent.toml mode %04o after repair", mode)
		}
	})

	t.Run("add a worker", func(t *testing.T) {
		var conf, known bytes.Buffer
		c0, _ := os.ReadFile(l.sshConfig)
		k0, _ := os.ReadFile(l.knownHosts)
		conf.Write(c0)
		known.Write(k0)
		b4 := l.addBoard(t, "b4", &conf, &known)
		writeFile(t, l.dir, "ssh_config", conf.Bytes(), 0o600)
		writeFile(t, l.dir, "known_hosts", known.Bytes(), 0o600)

		remotes := map[string]*counting{}
		o := l.options(t, remotes, "b4")
		o.Add = true
		res, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Boards[0].Err; err != nil {
			t.Fatal(err)
		}
		got, _ := readMode(t, filepath.Join(b4.root, "etc/herd/agent.toml"))
		if diff := cmp.Diff(string(wantConfig("b4", false, 0, []string{"127.0.0.1:7946", "127.0.0.1:7946"})), string(got)); diff != "" {
			t.Errorf("b4 agent.toml (-want +got):\n%s", diff)
		}
		st, _, err := LoadState(l.stateDir, "lab", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Boards) != 4 || st.Boards[3].Name != "b4" || st.Boards[3].Server {
			t.Errorf("state after --add: %+v", st.Boards)
		}
		// The same run again changes nothing.
		res, err = Run(ctx, o)
		if err != nil || res.Boards[0].Err != nil {
			t.Fatal(err, res.Boards[0].Err)
		}
		if w := remotes["b4"].take(); len(w) > 0 {
			t.Errorf("second --add run wrote %q", w)
		}
	})
}

func TestBootstrapRefusesUnverifiedHosts(t *testing.T) {
	l := newLab(t, "b1", "b2", "b3")
	ctx := runCtx(t)
	// known_hosts: b1 listed with b3's key, b2 missing, b3 right.
	var kh bytes.Buffer
	kh.WriteString(strings.Replace(mustRead(t, l.boards["b3"].srv.KnownHostsFile),
		knownhosts.Normalize(l.boards["b3"].srv.Addr), knownhosts.Normalize(l.boards["b1"].srv.Addr), 1))
	kh.WriteString(mustRead(t, l.boards["b3"].srv.KnownHostsFile))
	writeFile(t, l.dir, "known_hosts", kh.Bytes(), 0o600)

	remotes := map[string]*counting{}
	o := l.options(t, remotes, "b1", "b2", "b3")
	o.Servers = 1
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Boards[0].Err; !errors.Is(err, sshexec.ErrHostKeyMismatch) {
		t.Errorf("b1: err = %v, want host key mismatch", err)
	}
	if err := res.Boards[1].Err; !errors.Is(err, sshexec.ErrUnknownHost) {
		t.Errorf("b2: err = %v, want unknown host", err)
	}
	if err := res.Boards[2].Err; err != nil {
		t.Errorf("b3: %v", err)
	}
	if len(res.Failed()) != 2 {
		t.Errorf("Failed() = %d boards, want 2", len(res.Failed()))
	}
	for _, n := range []string{"b1", "b2"} {
		if _, err := os.Stat(filepath.Join(l.boards[n].root, "etc/herd")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: /etc/herd exists after a refused host key", n)
		}
	}
	// b3 is a worker whose join list names the founding server b1, as
	// far as known: b1 was never probed, so nothing.
	st, _, err := LoadState(l.stateDir, "lab", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Boards) != 1 || st.Boards[0].Name != "b3" {
		t.Errorf("state records %+v, want only b3", st.Boards)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
