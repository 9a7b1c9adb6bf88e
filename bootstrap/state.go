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
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/crypto/ssh"
)

// Files of a state directory.
const (
	stateKeyFile    = "cluster.key"
	stateSSHKeyFile = "cluster_ssh_key"
	stateSSHPubFile = "cluster_ssh_key.pub"
	stateBoardsFile = "boards.toml"
)

// ErrState: the state directory is damaged or inconsistent.
var ErrState = errors.New("bootstrap: state")

// ErrNoCluster: the state directory holds no cluster yet (LoadState with
// create false). It matches ErrState too.
var ErrNoCluster = fmt.Errorf("%w: no cluster", ErrState)

var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidClusterName reports whether name can name a cluster (a DNS label).
func ValidClusterName(name string) error {
	if !clusterNameRE.MatchString(name) {
		return fmt.Errorf("bootstrap: cluster name %q: want 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit", name)
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

// Secrets are a cluster's shared secrets, the same on every board.
type Secrets struct {
	// ClusterKey is the file content of cluster.key: 32 random bytes,
	// base64, and a newline.
	ClusterKey []byte
	// SSHPrivateKey is the cluster SSH key (ed25519, OpenSSH PEM) the
	// leader logs in to boards with.
	SSHPrivateKey []byte
	// SSHPublicKey is its public half in authorized_keys format, with a
	// newline.
	SSHPublicKey []byte
}

// PublicKey parses SSHPublicKey.
func (s Secrets) PublicKey() (ssh.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey(s.SSHPublicKey)
	return k, err
}

// GenerateSecrets makes a new cluster key and cluster SSH key pair; the
// public key's comment is "herd-cluster-<cluster>".
func GenerateSecrets(cluster string) (Secrets, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return Secrets{}, fmt.Errorf("bootstrap: cluster key: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Secrets{}, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	comment := "herd-cluster-" + cluster
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return Secrets{}, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return Secrets{}, fmt.Errorf("bootstrap: cluster ssh key: %w", err)
	}
	line := bytes.TrimSuffix(ssh.MarshalAuthorizedKey(spub), []byte("\n"))
	return Secrets{
		ClusterKey:    []byte(base64.StdEncoding.EncodeToString(key[:]) + "\n"),
		SSHPrivateKey: pem.EncodeToMemory(block),
		SSHPublicKey:  append(append(line, ' '), comment+"\n"...),
	}, nil
}

// check verifies that the secrets parse and belong together.
func (s Secrets) check() error {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(s.ClusterKey)))
	if err != nil || len(k) != 32 {
		return fmt.Errorf("%s: want 32 bytes in base64", stateKeyFile)
	}
	signer, err := ssh.ParsePrivateKey(s.SSHPrivateKey)
	if err != nil {
		return fmt.Errorf("%s: %v", stateSSHKeyFile, err)
	}
	pub, err := s.PublicKey()
	if err != nil {
		return fmt.Errorf("%s: %v", stateSSHPubFile, err)
	}
	if !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		return fmt.Errorf("%s does not match %s", stateSSHPubFile, stateSSHKeyFile)
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
}

type boardsFile struct {
	Cluster string       `toml:"cluster"`
	Boards  []StateBoard `toml:"board"`
}

// LoadState reads the state directory dir of cluster. When it holds no
// secrets yet and create is true, new secrets are generated and written
// (the folder is created with mode 0700, secret files 0600); created
// reports that. A directory with only some of the secret files, secrets
// that do not parse, or boards.toml naming another cluster is an ErrState.
func LoadState(dir, cluster string, create bool) (st *State, created bool, err error) {
	if err := ValidClusterName(cluster); err != nil {
		return nil, false, err
	}
	st = &State{Dir: dir, Cluster: cluster}
	names := []string{stateKeyFile, stateSSHKeyFile, stateSSHPubFile}
	var contents [3][]byte
	present := 0
	for i, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		switch {
		case err == nil:
			contents[i] = b
			present++
		case !errors.Is(err, os.ErrNotExist):
			return nil, false, fmt.Errorf("%w: %v", ErrState, err)
		}
	}
	switch present {
	case 0:
		if !create {
			return nil, false, fmt.Errorf("%w in %s (bootstrap it first, without --add)", ErrNoCluster, dir)
		}
		if _, err := os.Stat(filepath.Join(dir, stateBoardsFile)); err == nil {
			return nil, false, fmt.Errorf("%w: %s has %s but no secrets: restore them or remove the folder", ErrState, dir, stateBoardsFile)
		}
		sec, err := GenerateSecrets(cluster)
		if err != nil {
			return nil, false, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, false, fmt.Errorf("%w: %v", ErrState, err)
		}
		for i, c := range [][]byte{sec.SSHPrivateKey, sec.SSHPublicKey, sec.ClusterKey} {
			name := []string{stateSSHKeyFile, stateSSHPubFile, stateKeyFile}[i]
			mode := os.FileMode(0o600)
			if name == stateSSHPubFile {
				mode = 0o644
			}
			if err := writeFileAtomic(filepath.Join(dir, name), c, mode); err != nil {
				return nil, false, fmt.Errorf("%w: %v", ErrState, err)
			}
		}
		st.Secrets = sec
		created = true
	case len(names):
		st.Secrets = Secrets{ClusterKey: contents[0], SSHPrivateKey: contents[1], SSHPublicKey: contents[2]}
		if err := st.Secrets.check(); err != nil {
			return nil, false, fmt.Errorf("%w: %s: %v", ErrState, dir, err)
		}
	default:
		var missing []string
		for i, n := range names {
			if contents[i] == nil {
				missing = append(missing, n)
			}
		}
		return nil, false, fmt.Errorf("%w: %s lacks %s: restore it, or remove the folder if no board was bootstrapped with it", ErrState, dir, strings.Join(missing, ", "))
	}
	data, err := os.ReadFile(filepath.Join(dir, stateBoardsFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, false, fmt.Errorf("%w: %v", ErrState, err)
	default:
		var bf boardsFile
		md, err := toml.Decode(string(data), &bf)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %s: %v", ErrState, filepath.Join(dir, stateBoardsFile), err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return nil, false, fmt.Errorf("%w: %s: unknown key %s", ErrState, filepath.Join(dir, stateBoardsFile), und[0])
		}
		if bf.Cluster != cluster {
			return nil, false, fmt.Errorf("%w: %s belongs to cluster %q, not %q", ErrState, dir, bf.Cluster, cluster)
		}
		st.Boards = bf.Boards
	}
	return st, created, nil
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
	slices.SortStableFunc(s.Boards, func(a, b StateBoard) int {
		switch {
		case a.Server == b.Server:
			return 0
		case a.Server:
			return -1
		}
		return 1
	})
}

// Save writes boards.toml atomically.
func (s *State) Save() error {
	var buf bytes.Buffer
	buf.WriteString("# Boards bootstrapped into this cluster (herdctl bootstrap).\n")
	if err := toml.NewEncoder(&buf).Encode(boardsFile{Cluster: s.Cluster, Boards: s.Boards}); err != nil {
		return fmt.Errorf("%w: encode: %v", ErrState, err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	if err := writeFileAtomic(filepath.Join(s.Dir, stateBoardsFile), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	return nil
}

// writeFileAtomic writes a temporary file, syncs it and renames it over
// path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
