package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/herd-dev/herd/units/sshexec"
)

// ErrNoKeys: no SSH key could be found to log in with.
var ErrNoKeys = errors.New("bootstrap: no SSH key to log in with")

// Auth finds the user's SSH keys the way ssh does: the -i files, then the
// ssh_config IdentityFile entries of the host (or ~/.ssh/id_ed25519,
// id_ecdsa, id_rsa when neither names any), then the keys held by
// ssh-agent. A passphrase-protected file is used through the agent when the
// agent holds it. Keys are read once. Auth is safe for concurrent use.
type Auth struct {
	explicit  []string
	home      string
	agentSock string

	mu         sync.Mutex
	files      map[string]keyFile
	agentDone  bool
	agentConn  net.Conn
	agentKeys  []ssh.Signer
	agentError error
}

// keyFile is one loaded identity file.
type keyFile struct {
	signer ssh.Signer    // nil when the file needs a passphrase
	pub    ssh.PublicKey // known even for a passphrase-protected key, when readable
	err    error
}

// NewAuth returns an Auth using the explicit key files (-i), the home
// folder (for the default keys) and the ssh-agent socket ($SSH_AUTH_SOCK;
// "" for none).
func NewAuth(explicit []string, home, agentSock string) *Auth {
	return &Auth{explicit: explicit, home: home, agentSock: agentSock, files: map[string]keyFile{}}
}

// Close closes the ssh-agent connection, if one was opened. Signers
// obtained from the agent stop working.
func (a *Auth) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.agentConn != nil {
		return a.agentConn.Close()
	}
	return nil
}

// Signers returns the keys to offer when logging in to t, and the identity
// file to remember for later logins ("" when only agent keys are
// available). An explicit -i file that cannot be used is an error.
func (a *Auth) Signers(t Target) ([]ssh.Signer, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var (
		out      []ssh.Signer
		keyPath  string
		seen     = map[string]bool{}
		problems []string
	)
	add := func(s ssh.Signer) bool {
		k := string(s.PublicKey().Marshal())
		if seen[k] {
			return false
		}
		seen[k] = true
		out = append(out, s)
		return true
	}
	agentKeys, agentErr := a.agentSigners()
	fromAgent := func(pub ssh.PublicKey) ssh.Signer {
		for _, s := range agentKeys {
			if pub != nil && bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
				return s
			}
		}
		return nil
	}
	use := func(path string, must bool) error {
		kf := a.load(path)
		switch {
		case kf.signer != nil:
			add(kf.signer)
		case kf.err == nil: // passphrase-protected
			if s := fromAgent(kf.pub); s != nil {
				add(s)
			} else {
				err := fmt.Errorf("%s is passphrase-protected and not in ssh-agent (ssh-add %s)", path, path)
				if must {
					return err
				}
				problems = append(problems, err.Error())
				return nil
			}
		case must:
			return kf.err
		case !errors.Is(kf.err, os.ErrNotExist):
			problems = append(problems, kf.err.Error())
			return nil
		default:
			return nil
		}
		if keyPath == "" {
			keyPath = path
		}
		return nil
	}
	for _, p := range a.explicit {
		if err := use(p, true); err != nil {
			return nil, "", fmt.Errorf("bootstrap: -i %w", err)
		}
	}
	files := t.IdentityFiles
	if len(files) == 0 && len(a.explicit) == 0 && a.home != "" {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			files = append(files, filepath.Join(a.home, ".ssh", n))
		}
	}
	for _, p := range files {
		use(p, false)
	}
	for _, s := range agentKeys {
		add(s)
	}
	if len(out) == 0 {
		var why []string
		if agentErr != nil {
			why = append(why, agentErr.Error())
		}
		why = append(why, problems...)
		msg := "use -i KEY, an IdentityFile in ~/.ssh/config, ~/.ssh/id_ed25519, or ssh-agent"
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		return nil, "", fmt.Errorf("%w for %s: %s", ErrNoKeys, t.Arg, msg)
	}
	if keyPath != "" {
		if abs, err := filepath.Abs(keyPath); err == nil {
			keyPath = abs
		}
	}
	return out, keyPath, nil
}

// load reads an identity file once. A passphrase-protected key has a nil
// signer, its public key when known, and no error.
func (a *Auth) load(path string) keyFile {
	if kf, ok := a.files[path]; ok {
		return kf
	}
	var kf keyFile
	data, err := os.ReadFile(path)
	if err != nil {
		kf.err = fmt.Errorf("key %w", err)
	} else if s, err := ssh.ParsePrivateKey(data); err == nil {
		kf.signer, kf.pub = s, s.PublicKey()
	} else {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			kf.pub = pm.PublicKey
			if kf.pub == nil {
				if b, err := os.ReadFile(path + ".pub"); err == nil {
					kf.pub, _, _, _, _ = ssh.ParseAuthorizedKey(b)
				}
			}
		} else {
			kf.err = fmt.Errorf("key %s: %w", path, err)
		}
	}
	a.files[path] = kf
	return kf
}

// agentSigners connects to ssh-agent once.
func (a *Auth) agentSigners() ([]ssh.Signer, error) {
	if a.agentDone {
		return a.agentKeys, a.agentError
	}
	a.agentDone = true
	if a.agentSock == "" {
		a.agentError = errors.New("no ssh-agent (SSH_AUTH_SOCK is not set)")
		return nil, a.agentError
	}
	conn, err := net.Dial("unix", a.agentSock)
	if err != nil {
		a.agentError = fmt.Errorf("ssh-agent at %s: %w", a.agentSock, err)
		return nil, a.agentError
	}
	keys, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		a.agentError = fmt.Errorf("ssh-agent at %s: %w", a.agentSock, err)
		return nil, a.agentError
	}
	a.agentConn, a.agentKeys = conn, keys
	return keys, nil
}

// ExistingFiles returns the files of paths that exist, in order.
func ExistingFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// KnownHosts verifies host keys against OpenSSH known_hosts files. It never
// trusts a key on first use: a host missing from the files is refused
// (sshexec.ErrUnknownHost), a different key is refused with an
// *sshexec.HostKeyMismatchError. It is read-only after LoadKnownHosts and
// safe for concurrent use.
type KnownHosts struct {
	files []string
	cb    ssh.HostKeyCallback
}

// LoadKnownHosts reads the known_hosts files that exist among files; at
// least one must.
func LoadKnownHosts(files []string) (*KnownHosts, error) {
	exist := ExistingFiles(files)
	if len(exist) == 0 {
		return nil, fmt.Errorf("bootstrap: no known_hosts file (looked for %s): log in once with ssh and check the host key, or give --known-hosts FILE", strings.Join(files, ", "))
	}
	cb, err := knownhosts.New(exist...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: known_hosts: %w", err)
	}
	return &KnownHosts{files: exist, cb: cb}, nil
}

// Files returns the files read.
func (k *KnownHosts) Files() []string { return k.files }

// ClientConfig fills in cc's host key checking for a connection to addr
// (host:port): the host key algorithms to negotiate, so that a host with
// several keys presents one the files know, and the check. A host missing
// from the files is refused before connecting.
func (k *KnownHosts) ClientConfig(name, addr string, cc *ssh.ClientConfig) error {
	check, err := sshexec.KnownHostsKey(k.cb, name, addr)
	if errors.Is(err, sshexec.ErrUnknownHost) {
		return fmt.Errorf("%w in %s: log in once with ssh and check its fingerprint", err, strings.Join(k.files, ", "))
	}
	if err != nil {
		return err
	}
	check.Apply(cc)
	return nil
}
