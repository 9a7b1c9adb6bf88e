package controller

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
)

// Pod names. A deployment's or daemon's status counts the pods it has ever
// created (PodsCreated); pod k gets a suffix that is a one-to-one function
// of k modulo suffixSpace, keyed by the owner, so no two pods of an
// owner's life share a name until the counter has gone round suffixSpace
// times, and a name still in use is skipped even then. The counter moves
// in the same transaction as the creates (Action.Txn), compare-and-swap on
// the owner, so a retry or a new leader asks for the same names and never
// hands one out twice.

// maxNameLen is the longest object name (a DNS label).
const maxNameLen = api.MaxNameLength

// suffixAlphabet avoids vowels (no words) and look-alike characters.
const suffixAlphabet = "bcdfghjkmnpqrstvwxz2456789"

const (
	suffixLen = 5
	// suffixSpace is the number of distinct suffixes, 26^5 = 11,881,376:
	// how many pods an owner creates before a suffix comes back.
	suffixSpace = 26 * 26 * 26 * 26 * 26
	// suffixHi × suffixLo = suffixSpace: the two halves of the Feistel
	// network that scrambles the counter.
	suffixHi = 26 * 26
	suffixLo = 26 * 26 * 26
	// feistelRounds mixes both halves twice.
	feistelRounds = 4
)

// nameKey keys an owner's suffix sequence: its kind, name and creation
// time, so that two owners, or an owner deleted and created again under
// the same name, number their pods differently.
func nameKey(kind api.Kind, name string, created time.Time) uint64 {
	h := fnv.New64a()
	h.Write([]byte(string(kind) + "\x00" + name + "\x00"))
	h.Write(created.UTC().AppendFormat(nil, time.RFC3339Nano))
	return h.Sum64()
}

// mix64 is splitmix64's finaliser: a fast bijective scramble of 64 bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func roundFunc(key uint64, round int, v uint64) uint64 {
	return mix64(key ^ uint64(round)<<56 ^ v)
}

// scramble maps k in [0, suffixSpace) one to one onto [0, suffixSpace):
// an unbalanced Feistel network over suffixHi × suffixLo whose rounds add
// a keyed hash of one half to the other, modulo its size. Each round is
// undone by subtracting the same hash, so the whole is a bijection.
func scramble(key, k uint64) uint64 {
	hi, lo := k/suffixLo, k%suffixLo
	for r := range feistelRounds {
		if r%2 == 0 {
			hi = (hi + roundFunc(key, r, lo)%suffixHi) % suffixHi
		} else {
			lo = (lo + roundFunc(key, r, hi)%suffixLo) % suffixLo
		}
	}
	return hi*suffixLo + lo
}

// unscramble is scramble's inverse.
func unscramble(key, x uint64) uint64 {
	hi, lo := x/suffixLo, x%suffixLo
	for r := feistelRounds - 1; r >= 0; r-- {
		if r%2 == 0 {
			hi = (hi + suffixHi - roundFunc(key, r, lo)%suffixHi) % suffixHi
		} else {
			lo = (lo + suffixLo - roundFunc(key, r, hi)%suffixLo) % suffixLo
		}
	}
	return hi*suffixLo + lo
}

// suffix is the name suffix of an owner's pod number k (from 0).
func suffix(key uint64, k int64) string {
	v := scramble(key, uint64(k)%suffixSpace)
	var b [suffixLen]byte
	for i := range b {
		b[i] = suffixAlphabet[v%uint64(len(suffixAlphabet))]
		v /= uint64(len(suffixAlphabet))
	}
	return string(b[:])
}

// namer hands out an owner's pod names in counter order: <prefix>-<suffix
// of next>, skipping names taken by any stored pod or already handed out.
type namer struct {
	key   uint64
	next  int64 // the owner's PodsCreated; advanced past every name handed out or skipped
	taken func(string) bool
	given map[string]bool
}

func newNamer(key uint64, podsCreated int64, taken func(string) bool) *namer {
	return &namer{key: key, next: max(0, podsCreated), taken: taken, given: map[string]bool{}}
}

// name returns the next free name for prefix (at most maxNameLen-6
// characters), advancing the counter. After suffixSpace names in a row
// taken (impossible with fewer pods than that) it gives up with "".
func (n *namer) name(prefix string) string {
	for range suffixSpace {
		name := prefix + "-" + suffix(n.key, n.next)
		n.next++
		if n.given[name] || (n.taken != nil && n.taken(name)) {
			continue
		}
		n.given[name] = true
		return name
	}
	return ""
}

// deploymentPodPrefix is the part of a deployment's pod names before the
// suffix: the deployment's name, cut to leave room for the suffix.
func deploymentPodPrefix(deploy string) string {
	return truncateName(deploy, maxNameLen-1-suffixLen)
}

// daemonPodPrefix is the part of a daemon's pod names on a node before the
// suffix: <daemon>-<node>, or, when that leaves no room for the suffix,
// its first 48 characters, a dash and 8 hex digits of a hash of the whole.
func daemonPodPrefix(daemon, node string) string {
	name := daemon + "-" + node
	if len(name) <= maxNameLen-1-suffixLen {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s-%08x", truncateName(name, maxNameLen-1-suffixLen-9), h.Sum32())
}

// daemonPodName is the name of a daemon's pod number k (its PodsCreated
// when the pod was made, from 0) on a node: <daemon>-<node>-<5 chars>
// (see daemonPodPrefix for long names). The daemon's creation time keys
// the suffix.
func daemonPodName(daemon string, created time.Time, node string, k int64) string {
	return daemonPodPrefix(daemon, node) + "-" + suffix(nameKey(api.KindDaemon, daemon, created), k)
}

// deploymentPodName is the name of a deployment's pod number k:
// <deployment>-<5 chars>, the deployment's creation time keying the
// suffix. A name in use is skipped, so a pod may get the name of a later k.
func deploymentPodName(deploy string, created time.Time, k int64) string {
	return deploymentPodPrefix(deploy) + "-" + suffix(nameKey(api.KindDeployment, deploy, created), k)
}

// truncateName cuts s to at most n characters without a trailing dash.
func truncateName(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-")
}
