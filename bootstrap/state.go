package bootstrap

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/atomicfile"
	"golang.org/x/crypto/ssh"
)

// Files of a state directory. The key files hold base64 32-byte keys, one
// per line: the first is the primary key (gossip encrypts with it, a server
// presents it), every line is accepted, which is how a key is rotated.
const (
	stateGossipKeyFile = "gossip.key"
	stateServerKeyFile = "server.key"
	stateSSHKeyFile    = "cluster_ssh_key"
	stateSSHPubFile    = "cluster_ssh_key.pub"
	stateTokenFile     = "api.token"
	// stateMetricsTokenFile is the metrics token (GET /metrics only),
	// which every board gets and Prometheus uses.
	stateMetricsTokenFile = "metrics.token"
	stateBoardsFile       = "boards.toml"
	// stateLegacyKeyFile is the single cluster key of clusters made
	// before the keys were split; LoadState migrates it.
	stateLegacyKeyFile = "cluster.key"
	// stateRotateOld and stateRotateNew hold the old and the new key of a
	// rotation in progress (a key line, a token, or an SSH private key).
	stateRotateOld = "rotate.old"
	stateRotateNew = "rotate.new"
)

// ErrState: the state directory is damaged or inconsistent.
var ErrState = errors.New("bootstrap: state")

// ErrNoCluster: the state directory holds no cluster yet (LoadState with
// create false). It matches ErrState too.
var ErrNoCluster = fmt.Errorf("%w: no cluster", ErrState)

// ValidClusterName reports whether name can name a cluster (a DNS label).
func ValidClusterName(name string) error {
	if err := api.ValidateName(name); err != nil {
		return fmt.Errorf("bootstrap: cluster name %q: want 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit: %w", name, err)
	}
	return nil
}

// DefaultStateDir is ~/.config/herd/clusters/<cluster> (or under
// $XDG_CONFIG_HOME when set).
func DefaultStateDir(getenv func(string) string, cluster string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "herd", "clusters", cluster), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "herd", "clusters", cluster), nil
	}
	return "", errors.New("bootstrap: cannot find a state folder: neither $XDG_CONFIG_HOME nor $HOME is set (use --state-dir)")
}

// Secrets are a cluster's secrets, each with one purpose. Which board gets
// which is BoardFiles' decision: every member the gossip key; servers the
// server key, the cluster SSH private key and the API token.
type Secrets struct {
	// GossipKey is the content of gossip.key: memberlist encryption.
	GossipKey []byte
	// ServerKey is the content of server.key: the Raft and forwarding TLS
	// identity.
	ServerKey []byte
	// SSHPrivateKey is the cluster SSH key (ed25519, OpenSSH PEM) the
	// leader logs in to boards with.
	SSHPrivateKey []byte
	// SSHPublicKey is cluster_ssh_key.pub: the public keys authorised on
	// the boards, in authorized_keys format, one per line. Normally the
	// one of SSHPrivateKey; two while the SSH key is rotated.
	SSHPublicKey []byte
	// APIToken is api.token: the API bearer token, one line.
	APIToken []byte
	// MetricsToken is metrics.token: the bearer token that grants GET
	// /metrics only, on every board (Prometheus's credential), one line.
	MetricsToken []byte
}

// PublicKey parses the first key of SSHPublicKey.
func (s Secrets) PublicKey() (ssh.PublicKey, error) {
	keys, err := s.PublicKeys()
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// PublicKeys parses every key of SSHPublicKey.
func (s Secrets) PublicKeys() ([]ssh.PublicKey, error) {
	var out []ssh.PublicKey
	rest := s.SSHPublicKey
	for len(bytes.TrimSpace(rest)) > 0 {
		k, _, _, r, err := ssh.ParseAuthorizedKey(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
		rest = r
	}
	if len(out) == 0 {
		return nil, errors.New("no public key")
	}
	return out, nil
}

// NewKeyLine returns a new random 32-byte key in base64 with a newline.
func NewKeyLine() ([]byte, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("bootstrap: new key: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(key[:]) + "\n"), nil
}

// NewToken returns a new random API token (32 bytes, base64url) with a
// newline.
func NewToken() ([]byte, error) {
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("bootstrap: new token: %w", err)
	}
	return []byte(base64.RawURLEncoding.EncodeToString(tok[:]) + "\n"), nil
}

// NewSSHKey makes a cluster SSH key pair: the private key (OpenSSH PEM)
// and the authorized_keys line with the comment "herd-cluster-<cluster>".
func NewSSHKey(cluster string) (priv, pubLine []byte, err error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	comment := sshKeyComment(cluster)
	block, err := ssh.MarshalPrivateKey(key, comment)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	line := bytes.TrimSuffix(ssh.MarshalAuthorizedKey(spub), []byte("\n"))
	return pem.EncodeToMemory(block), append(append(line, ' '), comment+"\n"...), nil
}

// sshKeyComment is the comment of the cluster SSH key: authorized_keys
// lines with it are bootstrap's to rewrite.
func sshKeyComment(cluster string) string { return "herd-cluster-" + cluster }

// GenerateSecrets makes a new cluster's secrets.
func GenerateSecrets(cluster string) (Secrets, error) {
	var s Secrets
	var err error
	if s.GossipKey, err = NewKeyLine(); err != nil {
		return Secrets{}, err
	}
	if s.ServerKey, err = NewKeyLine(); err != nil {
		return Secrets{}, err
	}
	if s.SSHPrivateKey, s.SSHPublicKey, err = NewSSHKey(cluster); err != nil {
		return Secrets{}, err
	}
	if s.APIToken, err = NewToken(); err != nil {
		return Secrets{}, err
	}
	if s.MetricsToken, err = NewToken(); err != nil {
		return Secrets{}, err
	}
	return s, nil
}

// ParseKeyFile parses key file content: base64 32-byte keys, one per
// line, at least one (blank lines and '#' comments skipped).
func ParseKeyFile(data []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("line %d: want 32 bytes in base64", i+1)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}

// check verifies that the secrets parse and belong together.
func (s Secrets) check() error {
	for _, f := range []struct {
		name string
		data []byte
	}{{stateGossipKeyFile, s.GossipKey}, {stateServerKeyFile, s.ServerKey}} {
		if _, err := ParseKeyFile(f.data); err != nil {
			return fmt.Errorf("%s: %v", f.name, err)
		}
	}
	signer, err := ssh.ParsePrivateKey(s.SSHPrivateKey)
	if err != nil {
		return fmt.Errorf("%s: %v", stateSSHKeyFile, err)
	}
	pubs, err := s.PublicKeys()
	if err != nil {
		return fmt.Errorf("%s: %v", stateSSHPubFile, err)
	}
	if !slices.ContainsFunc(pubs, func(k ssh.PublicKey) bool { return bytes.Equal(k.Marshal(), signer.PublicKey().Marshal()) }) {
		return fmt.Errorf("%s does not list the key of %s", stateSSHPubFile, stateSSHKeyFile)
	}
	if tok := strings.TrimSpace(string(s.APIToken)); tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return fmt.Errorf("%s: want one token on one line", stateTokenFile)
	}
	if tok := strings.TrimSpace(string(s.MetricsToken)); tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return fmt.Errorf("%s: want one token on one line", stateMetricsTokenFile)
	}
	return nil
}

// StateBoard is one bootstrapped board as remembered in boards.toml.
type StateBoard struct {
	// Name is the board's agent name.
	Name string `toml:"name"`
	// Target is the SSH address bootstrap used (host:port).
	Target string `toml:"target"`
	// User is the login user bootstrap used.
	User string `toml:"user"`
	// Arg is the board as it was given ([user@]host[:port] or an
	// ssh_config alias): what a rotation or --add --server run resolves
	// to reach the board again.
	Arg string `toml:"arg,omitempty"`
	// Address is the board's IP address, used for gossip and Raft.
	Address string `toml:"address"`
	// Server says whether the board is a Raft server.
	Server bool `toml:"server"`
	// BootstrapExpect is set on the founding servers: the number of
	// servers the cluster was founded with.
	BootstrapExpect int `toml:"bootstrap_expect,omitzero"`
}

// State is a cluster's local state directory: its secrets and the boards
// bootstrapped so far.
type State struct {
	// Dir is the state directory.
	Dir string
	// Cluster is the cluster's name.
	Cluster string
	// Secrets are the cluster's secrets.
	Secrets Secrets
	// Boards are the boards bootstrapped so far, servers first, in the
	// order they were added.
	Boards []StateBoard
	// Rotation is the key rotation in progress, nil when none.
	Rotation *Rotation
	// Migrated is set when LoadState found an older folder with one
	// cluster.key and made it gossip.key and server.key.
	Migrated bool
}

type boardsFile struct {
	Cluster  string       `toml:"cluster"`
	Rotation *Rotation    `toml:"rotation,omitempty"`
	Boards   []StateBoard `toml:"board"`
}

// LoadState reads the state directory dir of cluster. When it holds no
// secrets yet and create is true, new secrets are generated and written
// (the folder is created with mode 0700, every file 0600); created reports
// that. A folder of an older herdctl, with one cluster.key, is migrated:
// cluster.key becomes both gossip.key and server.key (so that the boards,
// which hold it, keep working; rotate both to split them) and an API token
// is made; Migrated says so. A directory with only some of the secret
// files, secrets that do not parse, or boards.toml naming another cluster
// is an ErrState.
func LoadState(dir, cluster string, create bool) (st *State, created bool, err error) {
	if err := ValidClusterName(cluster); err != nil {
		return nil, false, err
	}
	st = &State{Dir: dir, Cluster: cluster}
	contents, err := readSecretFiles(dir)
	if err != nil {
		return nil, false, err
	}
	created, write, err := st.loadSecrets(contents, create)
	if err != nil {
		return nil, false, err
	}
	if len(write) > 0 {
		if err := st.writeSecrets(write...); err != nil {
			return nil, false, err
		}
	}
	if err := st.readBoards(); err != nil {
		return nil, false, err
	}
	return st, created, nil
}

// readSecretFiles reads the secret files of the state folder dir that
// exist, by file name.
func readSecretFiles(dir string) (map[string][]byte, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrState, err)
		}
		return b, nil
	}
	names := []string{stateGossipKeyFile, stateServerKeyFile, stateSSHKeyFile, stateSSHPubFile, stateTokenFile, stateMetricsTokenFile, stateLegacyKeyFile}
	contents := map[string][]byte{}
	for _, n := range names {
		b, err := read(n)
		if err != nil {
			return nil, err
		}
		if b != nil {
			contents[n] = b
		}
	}
	return contents, nil
}

// loadSecrets sets s.Secrets from the secret files read (contents):
// generated when there are none and create is true, migrated from an older
// herdctl's cluster.key, or as they are. It says whether they were
// created and which files must be (re)written from s.Secrets.
func (s *State) loadSecrets(contents map[string][]byte, create bool) (created bool, write []string, err error) {
	dir := s.Dir
	has := func(n string) bool { _, ok := contents[n]; return ok }
	switch {
	case len(contents) == 0:
		if !create {
			return false, nil, fmt.Errorf("%w in %s (bootstrap it first, without --add)", ErrNoCluster, dir)
		}
		if _, err := os.Stat(filepath.Join(dir, stateBoardsFile)); err == nil {
			return false, nil, fmt.Errorf("%w: %s has %s but no secrets: restore them or remove the folder", ErrState, dir, stateBoardsFile)
		}
		sec, err := GenerateSecrets(s.Cluster)
		if err != nil {
			return false, nil, err
		}
		s.Secrets = sec
		created = true
		write = []string{stateSSHKeyFile, stateSSHPubFile, stateGossipKeyFile, stateServerKeyFile, stateTokenFile, stateMetricsTokenFile}
	case has(stateSSHKeyFile) && has(stateSSHPubFile) && (has(stateGossipKeyFile) && has(stateServerKeyFile) || has(stateLegacyKeyFile) && !has(stateGossipKeyFile) && !has(stateServerKeyFile)):
		s.Secrets = Secrets{
			GossipKey: contents[stateGossipKeyFile], ServerKey: contents[stateServerKeyFile],
			SSHPrivateKey: contents[stateSSHKeyFile], SSHPublicKey: contents[stateSSHPubFile],
			APIToken: contents[stateTokenFile], MetricsToken: contents[stateMetricsTokenFile],
		}
		if !has(stateGossipKeyFile) {
			// An older herdctl's folder: one key for both purposes.
			s.Secrets.GossipKey, s.Secrets.ServerKey = contents[stateLegacyKeyFile], contents[stateLegacyKeyFile]
			s.Migrated = true
			write = append(write, stateGossipKeyFile, stateServerKeyFile)
		}
		if !has(stateTokenFile) {
			if s.Secrets.APIToken, err = NewToken(); err != nil {
				return false, nil, err
			}
			write = append(write, stateTokenFile)
		}
		if !has(stateMetricsTokenFile) {
			// A folder of a herdctl before metrics: the next run gives
			// every board the new token.
			if s.Secrets.MetricsToken, err = NewToken(); err != nil {
				return false, nil, err
			}
			write = append(write, stateMetricsTokenFile)
		}
		if err := s.Secrets.check(); err != nil {
			return false, nil, fmt.Errorf("%w: %s: %v", ErrState, dir, err)
		}
		if !create {
			write = nil // read only: nothing is written until a run needs it
		} else {
			// Older folders had a 0644 public key: every file is 0600 now.
			for n := range contents {
				if err := os.Chmod(filepath.Join(dir, n), 0o600); err != nil {
					return false, nil, fmt.Errorf("%w: %v", ErrState, err)
				}
			}
		}
	default:
		var missing []string
		for _, n := range []string{stateGossipKeyFile, stateServerKeyFile, stateSSHKeyFile, stateSSHPubFile} {
			if !has(n) {
				missing = append(missing, n)
			}
		}
		return false, nil, fmt.Errorf("%w: %s lacks %s: restore it, or remove the folder if no board was bootstrapped with it", ErrState, dir, strings.Join(missing, ", "))
	}
	return created, write, nil
}

// readBoards reads the boards and the rotation in progress from
// boards.toml, which must be of s's cluster; none is fine.
func (s *State) readBoards() error {
	p := filepath.Join(s.Dir, stateBoardsFile)
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %v", ErrState, err)
	default:
		var bf boardsFile
		md, err := toml.Decode(string(data), &bf)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrState, p, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return fmt.Errorf("%w: %s: unknown key %s", ErrState, p, und[0])
		}
		if bf.Cluster != s.Cluster {
			return fmt.Errorf("%w: %s belongs to cluster %q, not %q", ErrState, s.Dir, bf.Cluster, s.Cluster)
		}
		s.Boards = bf.Boards
		s.Rotation = bf.Rotation
	}
	return nil
}

// writeSecrets writes the named secret files from s.Secrets (mode 0600, the
// folder 0700); a nil secret removes its file.
func (s *State) writeSecrets(names ...string) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	for _, n := range names {
		var c []byte
		switch n {
		case stateGossipKeyFile:
			c = s.Secrets.GossipKey
		case stateServerKeyFile:
			c = s.Secrets.ServerKey
		case stateSSHKeyFile:
			c = s.Secrets.SSHPrivateKey
		case stateSSHPubFile:
			c = s.Secrets.SSHPublicKey
		case stateTokenFile:
			c = s.Secrets.APIToken
		case stateMetricsTokenFile:
			c = s.Secrets.MetricsToken
		default:
			return fmt.Errorf("%w: no secret file %s", ErrState, n)
		}
		p := filepath.Join(s.Dir, n)
		if c == nil {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w: %v", ErrState, err)
			}
			continue
		}
		if err := atomicfile.WriteFile(p, c, 0o600); err != nil {
			return fmt.Errorf("%w: %v", ErrState, err)
		}
	}
	return nil
}

// TokenFile is the path of the API token file in the state folder.
func (s *State) TokenFile() string { return filepath.Join(s.Dir, stateTokenFile) }

// MetricsTokenFile is the path of the metrics token file in the state
// folder: Prometheus's credentials_file.
func (s *State) MetricsTokenFile() string { return filepath.Join(s.Dir, stateMetricsTokenFile) }

// BoardArg is how to reach b again: the argument it was given, else
// user@host:port.
func (b StateBoard) BoardArg() string {
	if b.Arg != "" {
		return b.Arg
	}
	return b.User + "@" + b.Target
}

// Servers returns the boards that are Raft servers.
func (s *State) Servers() []StateBoard {
	var out []StateBoard
	for _, b := range s.Boards {
		if b.Server {
			out = append(out, b)
		}
	}
	return out
}

// Board returns the remembered board with the SSH target addr.
func (s *State) Board(target string) (StateBoard, bool) {
	for _, b := range s.Boards {
		if b.Target == target {
			return b, true
		}
	}
	return StateBoard{}, false
}

// Record adds or updates b (matched by Target), keeping servers first.
func (s *State) Record(b StateBoard) {
	i := slices.IndexFunc(s.Boards, func(x StateBoard) bool { return x.Target == b.Target })
	if i >= 0 {
		s.Boards[i] = b
	} else {
		s.Boards = append(s.Boards, b)
	}
	sort.SliceStable(s.Boards, func(i, j int) bool { return s.Boards[i].Server && !s.Boards[j].Server })
}

// Save writes boards.toml atomically.
func (s *State) Save() error {
	var buf bytes.Buffer
	buf.WriteString("# Boards bootstrapped into this cluster (herdctl bootstrap).\n")
	if err := toml.NewEncoder(&buf).Encode(boardsFile{Cluster: s.Cluster, Rotation: s.Rotation, Boards: s.Boards}); err != nil {
		return fmt.Errorf("%w: encode: %v", ErrState, err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.Dir, stateBoardsFile), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	return nil
}
