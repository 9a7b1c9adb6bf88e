package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/memberlist"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
)

// MetaMaxSize is the largest encoded Meta that memberlist can carry in a
// node's metadata (memberlist.MetaMaxSize, 512 bytes).
const MetaMaxSize = memberlist.MetaMaxSize

var (
	// ErrMetaTooLarge is returned (wrapped) when a Meta encodes to more than
	// MetaMaxSize bytes.
	ErrMetaTooLarge = errors.New("gossip: node metadata too large")
	// ErrMetaInvalid is returned (wrapped) for a Meta with a bad field, or
	// for metadata bytes that do not decode.
	ErrMetaInvalid = errors.New("gossip: invalid node metadata")
)

// Meta is what a board announces about itself in its gossip node metadata.
// It travels encoded as compact JSON (see EncodeMeta) and must fit in
// MetaMaxSize bytes, labels included.
type Meta struct {
	// RaftAddr is host:port of the raft transport; empty for non-servers.
	RaftAddr string
	// SSHAddr is host:port of the board's sshd.
	SSHAddr string
	// HostKey is the board's SSH host public key in authorized_keys format
	// ("ssh-ed25519 AAAA..."). EncodeMeta drops any comment and
	// surrounding space, so a peer sees exactly "type base64".
	HostKey string
	// BoardFacts are the board's facts. Those after CPUs are optional:
	// agents before them send none, and older agents ignore them.
	// CgroupControllers may hold only cpu, cpuset, io, memory and pids
	// (Validate checks), listed in that order after a decode.
	api.BoardFacts
	// Labels are user labels of the board.
	Labels map[string]string
	// Version is the agent version.
	Version string
	// Server is true when the agent takes part in Raft.
	Server bool
	// BootstrapExpect is the number of servers this agent waits for before
	// bootstrapping Raft; 0 means "do not bootstrap, join an existing
	// cluster". See BootstrapPeers.
	BootstrapExpect int
}

// clone returns a copy of m that shares nothing with it.
func (m Meta) clone() Meta {
	m.BoardFacts = m.BoardFacts.Clone()
	m.Labels = maps.Clone(m.Labels)
	return m
}

// metaWire is the encoded form of Meta: short keys, empty fields left out.
// Unknown keys are ignored on decode so that newer agents can add fields.
type metaWire struct {
	RaftAddr    string `json:"r,omitempty"`
	SSHAddr     string `json:"s,omitempty"`
	HostKey     string `json:"k,omitempty"`
	Arch        string `json:"a,omitempty"`
	Model       string `json:"m,omitempty"`
	MemoryBytes int64  `json:"b,omitempty"`
	CPUs        int    `json:"c,omitempty"`
	// ArchVariant and KernelArch are left out when Arch implies them
	// (see impliedArch); Controllers are one letter each (controllerCodes);
	// Devices are comma-separated, each its class's one-letter code and
	// its number (encodeDevices).
	ArchVariant     string            `json:"av,omitempty"`
	KernelArch      string            `json:"km,omitempty"`
	Kernel          string            `json:"kr,omitempty"`
	Systemd         string            `json:"sd,omitempty"`
	Cgroup          string            `json:"cg,omitempty"`
	Controllers     string            `json:"cc,omitempty"`
	Devices         string            `json:"dv,omitempty"`
	Labels          map[string]string `json:"l,omitempty"`
	Version         string            `json:"v,omitempty"`
	Server          bool              `json:"sv,omitempty"`
	BootstrapExpect int               `json:"be,omitempty"`
	// Leaving is set by Gossip.Leave just before it announces the leave,
	// so that peers can tell a graceful leave from a failure (memberlist's
	// leave callback does not say which it was).
	Leaving bool `json:"lv,omitempty"`
}

// leavingOverhead is what the Leaving flag adds to an encoded Meta.
const leavingOverhead = len(`,"lv":true`)

func (m Meta) wire(leaving bool) metaWire {
	return metaWire{
		RaftAddr:        m.RaftAddr,
		SSHAddr:         m.SSHAddr,
		HostKey:         m.HostKey,
		Arch:            m.Arch,
		Model:           m.Model,
		MemoryBytes:     m.MemoryBytes,
		CPUs:            m.CPUs,
		ArchVariant:     unlessImplied(m.ArchVariant, impliedArch[m.Arch].variant),
		KernelArch:      unlessImplied(m.KernelArch, impliedArch[m.Arch].machine),
		Kernel:          m.Kernel,
		Systemd:         m.Systemd,
		Cgroup:          m.Cgroup,
		Controllers:     encodeControllers(m.CgroupControllers),
		Devices:         encodeDevices(m.Devices),
		Labels:          m.Labels,
		Version:         m.Version,
		Server:          m.Server,
		BootstrapExpect: m.BootstrapExpect,
		Leaving:         leaving,
	}
}

func (w metaWire) meta() Meta {
	return Meta{
		RaftAddr: w.RaftAddr,
		SSHAddr:  w.SSHAddr,
		HostKey:  w.HostKey,
		BoardFacts: api.BoardFacts{
			Arch:              w.Arch,
			Model:             w.Model,
			MemoryBytes:       w.MemoryBytes,
			CPUs:              w.CPUs,
			ArchVariant:       orImplied(w.ArchVariant, impliedArch[w.Arch].variant),
			KernelArch:        orImplied(w.KernelArch, impliedArch[w.Arch].machine),
			Kernel:            w.Kernel,
			Systemd:           w.Systemd,
			Cgroup:            w.Cgroup,
			CgroupControllers: decodeControllers(w.Controllers),
			Devices:           decodeDevices(w.Devices),
		},
		Labels:          w.Labels,
		Version:         w.Version,
		Server:          w.Server,
		BootstrapExpect: w.BootstrapExpect,
	}
}

// impliedArch is, per GOARCH, the arch variant and kernel machine that a
// binary of that GOARCH always has: a 64-bit binary runs only on its own
// 64-bit kernel, and its variant is GOARCH. They are left out of the wire
// and filled in on decode (also for agents that predate them, truly).
// 32-bit arm has no implied values: armv6/armv7 and a 32- or 64-bit
// kernel must be sent.
var impliedArch = map[string]struct{ variant, machine string }{
	"arm64": {"arm64", "aarch64"},
	"amd64": {"amd64", "x86_64"},
}

func unlessImplied(v, implied string) string {
	if v == implied {
		return ""
	}
	return v
}

func orImplied(v, implied string) string {
	if v == "" {
		return implied
	}
	return v
}

type controllerCode struct {
	code byte
	name string
}

// controllerCodes are the one-letter wire codes of the cgroup controllers
// Meta.CgroupControllers may hold, in the order decode lists them. Codes are
// never reused; a letter a decoder does not know is skipped.
var controllerCodes = []controllerCode{
	{'c', "cpu"}, {'s', "cpuset"}, {'i', "io"}, {'m', "memory"}, {'p', "pids"},
}

func encodeControllers(cs []string) string {
	var b []byte
	for _, cc := range controllerCodes {
		for _, c := range cs {
			if c == cc.name {
				b = append(b, cc.code)
				break
			}
		}
	}
	return string(b)
}

func decodeControllers(s string) []string {
	var out []string
	for _, cc := range controllerCodes {
		if strings.IndexByte(s, cc.code) >= 0 {
			out = append(out, cc.name)
		}
	}
	return out
}

// encodeDevices writes device node names as "g0,i1,s0.1,u0": each its
// api.DeviceClass code and its number, in the order given.
func encodeDevices(names []string) string {
	var b strings.Builder
	for _, n := range names {
		c, num, ok := api.DeviceNode(n)
		if !ok {
			continue // Validate refuses it
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(c.Code)
		b.WriteString(num)
	}
	return b.String()
}

// decodeDevices reads encodeDevices' form back, sorted (api.SortDevices).
// An entry with a code this version does not know, or a bad number, is
// skipped.
func decodeDevices(s string) []string {
	if s == "" {
		return nil
	}
	var names []string
	for _, e := range strings.Split(s, ",") {
		if e == "" {
			continue
		}
		for _, c := range api.DeviceClasses {
			if e[0] == c.Code {
				names = append(names, c.Prefix+e[1:])
				break
			}
		}
	}
	return api.SortDevices(names)
}

// TrimDevices returns m with as many of its devices as fit in the node
// metadata alongside everything else, and the devices it left out (nil if
// none). Devices are kept in order, so a board advertises its first ones:
// GPIO and I²C before serial and video (api.DeviceClasses). A Meta that is
// too large without devices is returned unchanged; EncodeMeta reports it.
func TrimDevices(m Meta) (Meta, []string) {
	if _, err := EncodeMeta(m); !errors.Is(err, ErrMetaTooLarge) || len(m.Devices) == 0 {
		return m, nil
	}
	all := m.Devices
	m.Devices = nil
	if _, err := EncodeMeta(m); err != nil {
		m.Devices = all
		return m, nil
	}
	// The largest prefix that fits; sizes grow with the prefix.
	lo, hi := 0, len(all) // lo fits (or is 0), hi does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		m.Devices = all[:mid]
		if _, err := EncodeMeta(m); err == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	m.Devices = slices.Clone(all[:lo])
	if len(m.Devices) == 0 {
		m.Devices = nil
	}
	return m, slices.Clone(all[lo:])
}

// Validate checks the fields of m (addresses, host key, counts). It does not
// check the encoded size; EncodeMeta does.
func (m Meta) Validate() error {
	var problems []string
	if m.RaftAddr != "" {
		if err := checkHostPort(m.RaftAddr); err != nil {
			problems = append(problems, fmt.Sprintf("RaftAddr %q: %v", m.RaftAddr, err))
		}
	}
	if m.Server && m.RaftAddr == "" {
		problems = append(problems, "RaftAddr is required when Server is true")
	}
	if m.SSHAddr != "" {
		if err := checkHostPort(m.SSHAddr); err != nil {
			problems = append(problems, fmt.Sprintf("SSHAddr %q: %v", m.SSHAddr, err))
		}
	}
	if _, err := normalizeHostKey(m.HostKey); err != nil {
		problems = append(problems, err.Error())
	}
	if m.MemoryBytes < 0 {
		problems = append(problems, fmt.Sprintf("MemoryBytes %d is negative", m.MemoryBytes))
	}
	if m.CPUs < 0 {
		problems = append(problems, fmt.Sprintf("CPUs %d is negative", m.CPUs))
	}
	if m.BootstrapExpect < 0 {
		problems = append(problems, fmt.Sprintf("BootstrapExpect %d is negative", m.BootstrapExpect))
	}
	if m.BootstrapExpect > 0 && !m.Server {
		problems = append(problems, "BootstrapExpect is set but Server is false")
	}
	for _, c := range m.CgroupControllers {
		if !slices.ContainsFunc(controllerCodes, func(cc controllerCode) bool { return cc.name == c }) {
			problems = append(problems, fmt.Sprintf("Controllers: %q is not one of cpu, cpuset, io, memory, pids", c))
		}
	}
	for _, d := range m.Devices {
		if _, _, ok := api.DeviceNode(d); !ok {
			problems = append(problems, fmt.Sprintf("Devices: %q is not a device node of a known class", d))
		}
	}
	for k := range m.Labels {
		if k == "" {
			problems = append(problems, "Labels: empty key")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrMetaInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// normalizeHostKey parses an authorized_keys line holding one key without
// options and returns it as "type base64" (comment dropped); "" stays "".
func normalizeHostKey(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	pk, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(s))
	switch {
	case err != nil:
		return "", fmt.Errorf("HostKey: not an authorized_keys line (%v)", err)
	case len(options) > 0:
		return "", errors.New("HostKey: options are not allowed")
	case len(bytes.TrimSpace(rest)) != 0:
		return "", errors.New("HostKey: holds more than one key")
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk))), nil
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("missing host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// EncodeMeta validates m and encodes it for memberlist's node metadata. The
// encoding is deterministic (labels sorted by key). memberlist carries at
// most MetaMaxSize bytes, and this package needs 10 of them to flag a
// graceful leave: a Meta that encodes to more than MetaMaxSize-10 bytes is
// an error wrapping ErrMetaTooLarge that names the size and how much of it
// the labels take.
func EncodeMeta(m Meta) ([]byte, error) {
	return encodeMeta(m, false)
}

func encodeMeta(m Meta, leaving bool) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	m.HostKey, _ = normalizeHostKey(m.HostKey)
	b, err := json.Marshal(m.wire(leaving))
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %v", ErrMetaInvalid, err)
	}
	size := len(b)
	if !leaving {
		size += leavingOverhead
	}
	if size > MetaMaxSize {
		labels := 0
		if len(m.Labels) > 0 {
			lb, _ := json.Marshal(m.Labels)
			labels = len(lb)
		}
		return nil, fmt.Errorf("%w: encodes to %d bytes (+%d reserved), memberlist allows %d; labels take %d: use fewer or shorter labels",
			ErrMetaTooLarge, len(b), leavingOverhead, MetaMaxSize, labels)
	}
	return b, nil
}

// DecodeMeta decodes node metadata received from a peer. It never panics:
// garbage, oversized or empty input is an error wrapping ErrMetaInvalid or
// ErrMetaTooLarge. Field values are not validated beyond their JSON types;
// a peer's facts are reported as they were announced.
func DecodeMeta(b []byte) (Meta, error) {
	m, _, err := decodeMeta(b)
	return m, err
}

// decodeMeta is DecodeMeta that also reports the leaving flag.
func decodeMeta(b []byte) (m Meta, leaving bool, err error) {
	if len(b) == 0 {
		return Meta{}, false, fmt.Errorf("%w: empty", ErrMetaInvalid)
	}
	if len(b) > MetaMaxSize {
		return Meta{}, false, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(b), MetaMaxSize)
	}
	var w metaWire
	if err := json.Unmarshal(b, &w); err != nil {
		return Meta{}, false, fmt.Errorf("%w: decode %d bytes: %v", ErrMetaInvalid, len(b), err)
	}
	return w.meta(), w.Leaving, nil
}
