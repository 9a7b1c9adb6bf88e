package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/internal/atomicfile"
)

// Keys a rotation replaces (herdctl bootstrap --rotate KEY).
const (
	RotateGossip = "gossip"
	RotateServer = "server"
	RotateSSH    = "ssh"
	RotateToken  = "token"
	// RotateMetrics is the metrics token (GET /metrics only).
	RotateMetrics = "metrics"
)

// RotateKeys are the keys Rotate knows.
var RotateKeys = []string{RotateGossip, RotateServer, RotateSSH, RotateToken, RotateMetrics}

// Phases of a rotation. Each phase's secrets are written to the state
// folder and then to every board; the next phase starts only once every
// board has the current one:
//
//   - add: holders accept the new key beside the old one and still use
//     the old (gossip and server key files: [old, new]; SSH: the new
//     public key is authorised on every board too);
//   - switch: holders use the new key and still accept the old ([new,
//     old]; SSH: servers log in with the new private key);
//   - drop: only the new key is left ([new]; SSH: the old public key is
//     no longer authorised anywhere).
//
// The API token has only a switch phase: the servers answer to the new
// token, and the state folder's api.token (the herdctl context's
// token_file) holds it. So has the metrics token: every board answers to
// the new one, which the state folder's metrics.token holds (copy it to
// the Prometheus server).
const (
	PhaseAdd    = "add"
	PhaseSwitch = "switch"
	PhaseDrop   = "drop"
)

// ErrRotation: a rotation cannot start or go on.
var ErrRotation = errors.New("bootstrap: rotation")

// Rotation is a key rotation in progress, recorded in boards.toml. Phase
// is the phase whose secrets the state folder holds; the boards hold them
// once a run over all of them has succeeded. The old and the new key are
// kept in the state folder (rotate.old, rotate.new) until it ends, so
// every phase's secrets are a function of (old, new, phase) and a stopped
// rotation goes on exactly where it stopped.
type Rotation struct {
	Key   string `toml:"key"`
	Phase string `toml:"phase"`
}

// phases returns the phases of rotating key.
func phases(key string) []string {
	if key == RotateToken || key == RotateMetrics {
		return []string{PhaseSwitch}
	}
	return []string{PhaseAdd, PhaseSwitch, PhaseDrop}
}

// RotationKeys returns the old and the new key of rotating key in sec: the
// current one (a key line, the SSH private key, the token) and a new one.
func RotationKeys(sec Secrets, cluster, key string) (oldKey, newKey []byte, err error) {
	switch key {
	case RotateGossip, RotateServer:
		lines := keyLines(*keyFileOf(&sec, key))
		if len(lines) != 1 {
			return nil, nil, fmt.Errorf("%w: %s.key lists %d keys, want 1 before a rotation", ErrRotation, key, len(lines))
		}
		newKey, err = NewKeyLine()
		return []byte(lines[0] + "\n"), newKey, err
	case RotateSSH:
		if n := len(keyLines(sec.SSHPublicKey)); n != 1 {
			return nil, nil, fmt.Errorf("%w: cluster_ssh_key.pub lists %d keys, want 1 before a rotation", ErrRotation, n)
		}
		newKey, _, err = NewSSHKey(cluster)
		return sec.SSHPrivateKey, newKey, err
	case RotateToken:
		newKey, err = NewToken()
		return sec.APIToken, newKey, err
	case RotateMetrics:
		newKey, err = NewToken()
		return sec.MetricsToken, newKey, err
	}
	return nil, nil, fmt.Errorf("%w: --rotate %q: want one of %s", ErrRotation, key, strings.Join(RotateKeys, ", "))
}

// PhaseSecrets returns sec with the secrets of phase of rotating key from
// old to new (as RotationKeys made them).
func PhaseSecrets(sec Secrets, cluster, key, phase string, oldKey, newKey []byte) (Secrets, error) {
	switch key {
	case RotateGossip, RotateServer:
		o, n := strings.TrimSpace(string(oldKey)), strings.TrimSpace(string(newKey))
		f := keyFileOf(&sec, key)
		switch phase {
		case PhaseAdd:
			*f = joinLines(o, n)
		case PhaseSwitch:
			*f = joinLines(n, o)
		case PhaseDrop:
			*f = joinLines(n)
		default:
			return Secrets{}, fmt.Errorf("%w: phase %q", ErrRotation, phase)
		}
		return sec, nil
	case RotateSSH:
		op, err := sshPubLine(oldKey, cluster)
		if err != nil {
			return Secrets{}, fmt.Errorf("%w: old ssh key: %v", ErrRotation, err)
		}
		np, err := sshPubLine(newKey, cluster)
		if err != nil {
			return Secrets{}, fmt.Errorf("%w: new ssh key: %v", ErrRotation, err)
		}
		switch phase {
		case PhaseAdd:
			sec.SSHPrivateKey, sec.SSHPublicKey = oldKey, joinLines(op, np)
		case PhaseSwitch:
			sec.SSHPrivateKey, sec.SSHPublicKey = newKey, joinLines(np, op)
		case PhaseDrop:
			sec.SSHPrivateKey, sec.SSHPublicKey = newKey, joinLines(np)
		default:
			return Secrets{}, fmt.Errorf("%w: phase %q", ErrRotation, phase)
		}
		return sec, nil
	case RotateToken:
		if phase != PhaseSwitch {
			return Secrets{}, fmt.Errorf("%w: phase %q", ErrRotation, phase)
		}
		sec.APIToken = newKey
		return sec, nil
	case RotateMetrics:
		if phase != PhaseSwitch {
			return Secrets{}, fmt.Errorf("%w: phase %q", ErrRotation, phase)
		}
		sec.MetricsToken = newKey
		return sec, nil
	}
	return Secrets{}, fmt.Errorf("%w: --rotate %q: want one of %s", ErrRotation, key, strings.Join(RotateKeys, ", "))
}

// sshPubLine is the authorized_keys line of an SSH private key.
func sshPubLine(priv []byte, cluster string) (string, error) {
	signer, err := ssh.ParsePrivateKey(priv)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + sshKeyComment(cluster), nil
}

func keyFileOf(sec *Secrets, key string) *[]byte {
	if key == RotateGossip {
		return &sec.GossipKey
	}
	return &sec.ServerKey
}

// keyLines returns the non-blank, non-comment lines of a key file.
func keyLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func joinLines(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(strings.TrimSpace(l))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// RotateOptions configure Rotate.
type RotateOptions struct {
	// Key is what to rotate: RotateGossip, RotateServer, RotateSSH,
	// RotateToken or RotateMetrics.
	Key string
	// AfterPhase, when set, runs once every board has a phase's secrets,
	// before the next phase starts (herdctl waits there for the cluster
	// to be whole again). An error stops the rotation at that phase.
	AfterPhase func(ctx context.Context, phase string, res *Result) error
}

// Rotate replaces one key across the fleet: o.Boards is ignored and every
// recorded board is bootstrapped again (as with --add, one board at a
// time) once per phase. A
// rotation that stops (a board unreachable, AfterPhase failing) stays
// recorded in the state folder; Rotate with the same key goes on from the
// recorded phase. It returns the last phase's Result.
func Rotate(ctx context.Context, o Options, ro RotateOptions) (*Result, error) {
	st, _, err := LoadState(o.StateDir, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	if len(st.Boards) == 0 {
		return nil, fmt.Errorf("%w: cluster %q has no boards recorded in %s", ErrRotation, o.Cluster, o.StateDir)
	}
	oldPath, newPath := filepath.Join(st.Dir, stateRotateOld), filepath.Join(st.Dir, stateRotateNew)
	oldKey, newKey, err := startRotation(st, ro.Key, oldPath, newPath)
	if err != nil {
		return nil, err
	}
	ps := phases(ro.Key)
	i := slices.Index(ps, st.Rotation.Phase)
	if i < 0 {
		return nil, fmt.Errorf("%w: recorded phase %q of the %s rotation is unknown", ErrState, st.Rotation.Phase, ro.Key)
	}
	// One board at a time: agents restart where a key file changed, and
	// restarting them all at once would leave the cluster without a
	// leader and make every node NotReady together.
	o.Add, o.AddServers, o.Parallel = true, false, 1
	var res *Result
	for ; i < len(ps); i++ {
		phase := ps[i]
		// Record the phase, then write its secrets: both steps can be
		// repeated, so a crash anywhere is healed by running again.
		st.Rotation = &Rotation{Key: ro.Key, Phase: phase}
		if err := st.Save(); err != nil {
			return res, err
		}
		sec, err := PhaseSecrets(st.Secrets, o.Cluster, ro.Key, phase, oldKey, newKey)
		if err != nil {
			return res, err
		}
		if err := sec.check(); err != nil {
			return res, fmt.Errorf("%w: %v", ErrRotation, err)
		}
		st.Secrets = sec
		if err := st.writeSecrets(stateGossipKeyFile, stateServerKeyFile, stateSSHKeyFile, stateSSHPubFile, stateTokenFile, stateMetricsTokenFile); err != nil {
			return res, err
		}
		o.Boards = nil
		for _, b := range st.Boards {
			o.Boards = append(o.Boards, b.BoardArg())
		}
		if o.Progress != nil {
			o.Progress("rotate", fmt.Sprintf("%s key: phase %s (%d/%d) on %d boards", ro.Key, phase, i+1, len(ps), len(o.Boards)))
		}
		if res, err = Run(ctx, o); err != nil {
			return res, err
		}
		if f := res.Failed(); len(f) > 0 {
			return res, fmt.Errorf("%w: %s key, phase %s: %d board(s) failed (%s: %v); fix them and run --rotate %s again to go on", ErrRotation, ro.Key, phase, len(f), f[0].Label, f[0].Err, ro.Key)
		}
		if ro.AfterPhase != nil {
			if err := ro.AfterPhase(ctx, phase, res); err != nil {
				return res, fmt.Errorf("%w: %s key, after phase %s: %v; run --rotate %s again to go on", ErrRotation, ro.Key, phase, err, ro.Key)
			}
		}
		if st, _, err = LoadState(o.StateDir, o.Cluster, false); err != nil {
			return res, err
		}
	}
	st.Rotation = nil
	if err := st.Save(); err != nil {
		return res, err
	}
	for _, p := range []string{oldPath, newPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("%w: %v", ErrState, err)
		}
	}
	res.State = st
	return res, nil
}

// startRotation returns the old and new key of the rotation of key: made,
// written to oldPath and newPath and recorded in st when no rotation is in
// progress, or read back when this one is. A rotation of another key in
// progress is an ErrRotation.
func startRotation(st *State, key, oldPath, newPath string) (oldKey, newKey []byte, err error) {
	switch {
	case st.Rotation == nil:
		if oldKey, newKey, err = RotationKeys(st.Secrets, st.Cluster, key); err != nil {
			return nil, nil, err
		}
		// The keys first, then the record: a crash in between leaves
		// unrecorded key files that the next start overwrites.
		for _, f := range []struct {
			p string
			c []byte
		}{{oldPath, oldKey}, {newPath, newKey}} {
			if err := atomicfile.WriteFile(f.p, f.c, 0o600); err != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrState, err)
			}
		}
		st.Rotation = &Rotation{Key: key, Phase: phases(key)[0]}
		if err := st.Save(); err != nil {
			return nil, nil, err
		}
	case st.Rotation.Key != key:
		return nil, nil, fmt.Errorf("%w: a rotation of the %s key is in progress (phase %s): finish it first with --rotate %s", ErrRotation, st.Rotation.Key, st.Rotation.Phase, st.Rotation.Key)
	default:
		if oldKey, err = os.ReadFile(oldPath); err == nil {
			newKey, err = os.ReadFile(newPath)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: the %s rotation in progress lost its keys: %v", ErrState, key, err)
		}
	}
	return oldKey, newKey, nil
}
