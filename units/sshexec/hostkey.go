package sshexec

import (
	"bytes"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyCheck is how a dial verifies a host's key: the host key
// algorithms to negotiate, so that a host with several keys presents the
// one we know, and the check itself. It never trusts a key on first use: a
// different key is refused with a *HostKeyMismatchError, a host known_hosts
// does not list with ErrUnknownHost. The executor, herdctl bootstrap and
// herdctl's tunnels all verify through it.
type HostKeyCheck struct {
	Algorithms []string
	Check      func(key ssh.PublicKey) error
}

// Apply sets cc's host key algorithms and callback.
func (c HostKeyCheck) Apply(cc *ssh.ClientConfig) {
	cc.HostKeyAlgorithms = c.Algorithms
	cc.HostKeyCallback = func(_ string, _ net.Addr, key ssh.PublicKey) error { return c.Check(key) }
}

// PinnedHostKey accepts node's key at addr only if it is pinned.
func PinnedHostKey(node, addr string, pinned ssh.PublicKey) HostKeyCheck {
	want := pinned.Marshal()
	return HostKeyCheck{
		Algorithms: algorithmsFor(pinned),
		Check: func(key ssh.PublicKey) error {
			if bytes.Equal(key.Marshal(), want) {
				return nil
			}
			return &HostKeyMismatchError{Node: node, Addr: addr, Got: ssh.FingerprintSHA256(key),
				Want: []string{ssh.FingerprintSHA256(pinned)}, Source: "pinned"}
		},
	}
}

// KnownHostsKey accepts node's key at addr only if known (a callback from
// knownhosts.New) lists it for addr. A host it does not list is refused
// before anything is dialled (ErrUnknownHost).
func KnownHostsKey(known ssh.HostKeyCallback, node, addr string) (HostKeyCheck, error) {
	probe, err := probeKey()
	if err != nil {
		return HostKeyCheck{}, err
	}
	// Ask known_hosts which keys it holds for addr by checking a key that
	// cannot match: the KeyError lists them.
	var ke *knownhosts.KeyError
	err = known(addr, probeAddr(), probe)
	if !errors.As(err, &ke) {
		if err == nil {
			return HostKeyCheck{}, fmt.Errorf("sshexec: %s (%s): known_hosts accepted a probe key", node, addr)
		}
		return HostKeyCheck{}, fmt.Errorf("sshexec: %s (%s): known_hosts: %w", node, addr, err)
	}
	if len(ke.Want) == 0 {
		return HostKeyCheck{}, fmt.Errorf("%w: %s (%s) has no known_hosts entry", ErrUnknownHost, node, addr)
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		for _, a := range algorithmsFor(k.Key) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return HostKeyCheck{
		Algorithms: algos,
		Check: func(key ssh.PublicKey) error {
			err := known(addr, probeAddr(), key)
			if err == nil {
				return nil
			}
			mm := &HostKeyMismatchError{Node: node, Addr: addr, Got: ssh.FingerprintSHA256(key), Source: "known_hosts"}
			var ke *knownhosts.KeyError
			var re *knownhosts.RevokedError
			switch {
			case errors.As(err, &re):
				mm.Source = "known_hosts (revoked)"
				mm.Want = []string{"not " + ssh.FingerprintSHA256(re.Revoked.Key)}
				return mm
			case errors.As(err, &ke) && len(ke.Want) > 0:
				for _, k := range ke.Want {
					mm.Want = append(mm.Want, ssh.FingerprintSHA256(k.Key))
				}
				return mm
			case errors.As(err, &ke):
				return fmt.Errorf("%w: %s (%s) has no known_hosts entry", ErrUnknownHost, node, addr)
			}
			return fmt.Errorf("sshexec: %s (%s): known_hosts: %w", node, addr, err)
		},
	}, nil
}

// probeKey is a key that matches no host: a fresh ed25519 key, made once.
var probeKey = sync.OnceValues(func() (ssh.PublicKey, error) {
	pub, _, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshexec: probe key: %w", err)
	}
	return ssh.NewPublicKey(pub)
})

// hostKeyCheck decides how node's host key at addr is verified: against
// the pinned key when there is one, else against known_hosts, else not at
// all (refused).
func (e *Executor) hostKeyCheck(node, addr string, pinned ssh.PublicKey) (HostKeyCheck, error) {
	if pinned != nil {
		return PinnedHostKey(node, addr, pinned), nil
	}
	if e.known == nil {
		return HostKeyCheck{}, fmt.Errorf("%w: node %s (%s) has no pinned host key and no known_hosts file is configured", ErrNoHostKey, node, addr)
	}
	return KnownHostsKey(e.known, node, addr)
}

// probeAddr stands in for the remote address: known_hosts prefers the
// hostname, which we always pass.
func probeAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero} }

// algorithmsFor lists the host key algorithms under which key can be
// presented.
func algorithmsFor(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}
