package sshdtest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Server is a running sshd. Its fields are read-only.
type Server struct {
	// Addr is "127.0.0.1:PORT"; the port stays the same across Restart.
	Addr string
	// User is the login user (the user running the test).
	User string
	// HostKey is the server's ed25519 host key.
	HostKey ssh.PublicKey
	// ClientSigner is authorised to log in as User.
	ClientSigner ssh.Signer
	// ClientKeyFile holds ClientSigner's private key (OpenSSH PEM, 0600).
	ClientKeyFile string
	// KnownHostsFile lists HostKey for Addr in known_hosts format.
	KnownHostsFile string
	// Dir is the server's private directory (config, keys, log).
	Dir string

	t       testing.TB
	sshd    string
	conf    string
	logFile string
	setEnv  []string
	home    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Path returns the sshd binary to use, or "" if none is installed.
func Path() string {
	if _, err := os.Stat("/usr/sbin/sshd"); err == nil {
		return "/usr/sbin/sshd"
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return ""
}

// Options tune StartWith.
type Options struct {
	// SetEnv are NAME=VALUE pairs set in every session (sshd_config
	// SetEnv); "PATH=..." overrides the session's default PATH, which lets
	// a test put fake commands (systemctl, journalctl) first. HOME is
	// always set to an empty directory under Dir (so that the test user's
	// ~/.bashrc, which bash sources when run by sshd, stays out of the
	// way); a HOME here overrides that.
	SetEnv []string
}

// Start starts sshd and stops it when the test ends. It skips the test if
// sshd is not installed and fails it if sshd does not come up.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	for _, kv := range opts.SetEnv {
		if !strings.Contains(kv, "=") || strings.ContainsAny(kv, "\"\n\\") {
			t.Fatalf("sshdtest: SetEnv %q: want NAME=VALUE without quotes, backslashes or newlines", kv)
		}
	}
	sshd := Path()
	if sshd == "" {
		t.Skip("sshdtest: OpenSSH sshd not installed (apt-get install openssh-server); skipping real-SSH test")
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("sshdtest: current user: %v", err)
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start as root without its privilege separation dir.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshdtest: %v", err)
		}
	}
	dir := t.TempDir()
	s := &Server{User: u.Username, Dir: dir, t: t, sshd: sshd, setEnv: opts.SetEnv,
		conf: filepath.Join(dir, "sshd_config"), logFile: filepath.Join(dir, "sshd.log")}

	s.home = filepath.Join(dir, "home")
	if err := os.Mkdir(s.home, 0o700); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
	hostKeyFile := filepath.Join(dir, "host_ed25519")
	s.HostKey = writeKey(t, hostKeyFile).PublicKey()
	s.ClientKeyFile = filepath.Join(dir, "client_ed25519")
	s.ClientSigner = writeKey(t, s.ClientKeyFile)
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, ssh.MarshalAuthorizedKey(s.ClientSigner.PublicKey()), 0o600); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}

	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(s.logFile); err == nil && len(b) > 0 {
				t.Logf("sshdtest: sshd log:\n%s", b)
			}
		}
	})

	var lastErr error
	for range 5 { // the free port may be taken by someone else before sshd binds it
		port := freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.writeConfig(port, hostKeyFile, authKeys)
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("sshdtest: %v", lastErr)
	}
	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{s.Addr}, s.HostKey) + "\n"
	if err := os.WriteFile(s.KnownHostsFile, []byte(line), 0o600); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
	return s
}

func writeKey(t testing.TB, path string) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("sshdtest: generate key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "sshdtest")
	if err != nil {
		t.Fatalf("sshdtest: marshal key: %v", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("sshdtest: signer: %v", err)
	}
	return signer
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshdtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) writeConfig(port int, hostKey, authKeys string) {
	s.t.Helper()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxSessions 10
Subsystem sftp internal-sftp
`, port, hostKey, authKeys, filepath.Join(s.Dir, "sshd.pid"))
	// Sessions get an empty private HOME: bash run by sshd sources
	// ~/.bashrc, and the test user's may be slow or print things.
	// Only the first SetEnv line counts: put every pair on it.
	conf += fmt.Sprintf("SetEnv \"HOME=%s\"", s.home)
	for _, kv := range s.setEnv {
		conf += fmt.Sprintf(" \"%s\"", kv)
	}
	conf += "\n"
	// OpenSSH 9.8+ penalises addresses whose connections end before
	// authentication (as host key refusals do); tests must not be slowed
	// down by that. Older versions do not know the option.
	if err := os.WriteFile(s.conf, []byte(conf+"PerSourcePenalties no\n"), 0o600); err != nil {
		s.t.Fatalf("sshdtest: %v", err)
	}
	if exec.Command(s.sshd, "-t", "-f", s.conf).Run() != nil {
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			s.t.Fatalf("sshdtest: %v", err)
		}
	}
}

// start runs sshd and waits until it greets on Addr.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.sshd, "-D", "-e", "-f", s.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.sshd, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			b, _ := os.ReadFile(s.logFile)
			return fmt.Errorf("sshd exited during startup: %s", bytes.TrimSpace(b))
		default:
		}
		if greets(s.Addr) {
			return nil
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("sshd did not accept connections on %s within 15s", s.Addr)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// greets reports whether an SSH server answers on addr.
func greets(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}

// Kill stops sshd and every process it started (connections and their
// commands), so established connections break. Safe to call repeatedly.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, pid := range descendants(cmd.Process.Pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	cmd.Process.Kill()
	<-done
}

// Restart kills sshd (breaking every connection) and starts it again on
// the same address with the same keys.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for range 3 {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("sshdtest: restart: %v", err)
}

// PauseConnections stops (SIGSTOP) the processes serving established
// connections: their peers see a silent, hung host. New connections are
// still served. ResumeConnections undoes it; Kill cleans up either way.
func (s *Server) PauseConnections() { s.signalConnections(syscall.SIGSTOP) }

// ResumeConnections continues processes stopped by PauseConnections.
func (s *Server) ResumeConnections() { s.signalConnections(syscall.SIGCONT) }

func (s *Server) signalConnections(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, pid := range descendants(cmd.Process.Pid) {
		syscall.Kill(pid, sig)
	}
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := parentOf(p); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(f[1])
}
