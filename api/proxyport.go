package api

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
)

// ProxyPort is a port and protocol a service owns on every board: a
// ServicePort with Port set. Every board's agent listens on it and
// forwards to a ready endpoint; the scheduler places no pod on it.
type ProxyPort struct {
	Port     int
	Protocol string // "tcp" or "udp"
}

// String is "8080/tcp".
func (p ProxyPort) String() string { return strconv.Itoa(p.Port) + "/" + p.Protocol }

// HerdPorts are the ports herd's own agent uses by default on a board
// (sshd, gossip, Raft, API, metrics, DNS): a service cannot claim them.
// The agent's defaults are checked against this list by its tests.
var HerdPorts = []ProxyPort{
	{22, "tcp"},
	{7946, "tcp"}, {7946, "udp"},
	{7947, "tcp"},
	{7948, "tcp"},
	{7949, "tcp"},
	{8600, "tcp"}, {8600, "udp"},
}

// ProxyClaim is one service port with a proxy port.
type ProxyClaim struct {
	ProxyPort
	Service string // service name
	Name    string // service port name
	// Created orders claims of the same port: the first created owns it.
	Created time.Time
}

// ProxyPorts returns the proxy ports of s (defaults applied), in spec
// order.
func (s *Service) ProxyPorts() []ProxyClaim {
	var out []ProxyClaim
	for _, p := range s.Spec.Ports {
		if p.Port <= 0 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = DefaultProtocol
		}
		out = append(out, ProxyClaim{ProxyPort: ProxyPort{p.Port, proto}, Service: s.Metadata.Name, Name: p.Name,
			Created: s.Metadata.Created})
	}
	return out
}

// ProxyOwners returns, for every proxy port claimed by services, the claim
// that owns it: the service created first (then the smaller name). Two
// services can only claim one port when written around apply's check
// (ProxyConflicts) or by two applies racing; the loser's port is then
// not forwarded. Sorted by port and protocol.
func ProxyOwners(services []*Service) []ProxyClaim {
	var all []ProxyClaim
	for _, s := range services {
		if s != nil {
			all = append(all, s.ProxyPorts()...)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := &all[i], &all[j]
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol),
			a.Created.Compare(b.Created), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Name, b.Name)) < 0
	})
	return slices.CompactFunc(all, func(a, b ProxyClaim) bool { return a.ProxyPort == b.ProxyPort })
}

// ProxyConflicts checks the proxy ports of the services being applied
// against each other and against the stored services (by name; a stored
// service being applied is replaced by its new version): a port and
// protocol may belong to one service only.
func ProxyConflicts(applied, stored []*Service) []FieldError {
	taken := map[ProxyPort]string{}
	names := map[string]bool{}
	for _, s := range applied {
		names[s.Metadata.Name] = true
	}
	for _, s := range stored {
		if s == nil || names[s.Metadata.Name] {
			continue
		}
		for _, c := range s.ProxyPorts() {
			taken[c.ProxyPort] = "service " + s.Metadata.Name
		}
	}
	var errs []FieldError
	for _, s := range applied {
		for i, p := range s.Spec.Ports {
			c := ProxyPort{p.Port, cmp.Or(p.Protocol, DefaultProtocol)}
			if p.Port <= 0 {
				continue
			}
			if by, ok := taken[c]; ok {
				errs = append(errs, FieldError{Object: ObjectRef(KindService, s.Metadata.Name),
					Field:   fmt.Sprintf("spec.ports[%d].port", i),
					Message: fmt.Sprintf("%s is already the port of %s: a port belongs to one service on every board", c, by)})
				continue
			}
			taken[c] = "service " + s.Metadata.Name
		}
	}
	return errs
}
