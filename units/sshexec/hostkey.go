package sshexec

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeyPolicy is what a dial must accept: the host key algorithms to
// negotiate (so that a board with several host keys presents the one we
// know) and the check itself.
type hostKeyPolicy struct {
	algorithms []string
	check      func(key ssh.PublicKey) error
}

// policyFor decides how node's host key at addr is verified: against the
// pinned key when there is one, else against known_hosts, else not at all
// (refused).
func (e *Executor) policyFor(node, addr string, pinned ssh.PublicKey) (hostKeyPolicy, error) {
	if pinned != nil {
		want := pinned.Marshal()
		return hostKeyPolicy{
			algorithms: algorithmsFor(pinned),
			check: func(key ssh.PublicKey) error {
				if bytes.Equal(key.Marshal(), want) {
					return nil
				}
				return &HostKeyMismatchError{Node: node, Addr: addr, Got: ssh.FingerprintSHA256(key),
					Want: []string{ssh.FingerprintSHA256(pinned)}, Source: "pinned"}
			},
		}, nil
	}
	if e.known == nil {
		return hostKeyPolicy{}, fmt.Errorf("%w: node %s (%s) has no pinned host key and no known_hosts file is configured", ErrNoHostKey, node, addr)
	}
	// Ask known_hosts which keys it holds for addr by checking a key that
	// cannot match: the KeyError lists them.
	var ke *knownhosts.KeyError
	err := e.known(addr, probeAddr(), e.probeKey)
	if !errors.As(err, &ke) {
		if err == nil {
			return hostKeyPolicy{}, fmt.Errorf("sshexec: node %s (%s): known_hosts accepted a probe key", node, addr)
		}
		return hostKeyPolicy{}, fmt.Errorf("sshexec: node %s (%s): known_hosts: %w", node, addr, err)
	}
	if len(ke.Want) == 0 {
		return hostKeyPolicy{}, fmt.Errorf("%w: node %s (%s) has no pinned key and no known_hosts entry", ErrUnknownHost, node, addr)
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
	return hostKeyPolicy{
		algorithms: algos,
		check: func(key ssh.PublicKey) error {
			err := e.known(addr, probeAddr(), key)
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
				return fmt.Errorf("%w: node %s (%s) not in known_hosts", ErrUnknownHost, node, addr)
			}
			return fmt.Errorf("sshexec: node %s (%s): known_hosts: %w", node, addr, err)
		},
	}, nil
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
