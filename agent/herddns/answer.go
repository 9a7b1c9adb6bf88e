package herddns

import (
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/herd-dev/herd/api"
)

// Zone is the domain herd answers for.
const Zone = "herd."

// TTL is the time to live of every record, in seconds.
const TTL = 5

// MaxRecords bounds the records of one reply (answer plus additional).
const MaxRecords = 32

// State is what Answer answers from: the services, with their ready
// endpoints in their status, and the boards.
type State struct {
	Services []*api.Service
	Nodes    []*api.Node
}

// Answer returns the reply to query q from st. It never fails: a query it
// cannot answer gets an error code (FORMERR, REFUSED, NOTIMP or
// NXDOMAIN).
func Answer(q *dns.Msg, st State) *dns.Msg {
	m := new(dns.Msg)
	switch {
	case q.Opcode != dns.OpcodeQuery:
		m.SetRcodeFormatError(q)
		m.Rcode = dns.RcodeNotImplemented
		return m
	case len(q.Question) != 1:
		m.SetRcodeFormatError(q)
		return m
	}
	m.SetReply(q)
	m.RecursionAvailable = false
	question := q.Question[0]
	name := strings.ToLower(dns.Fqdn(question.Name))
	if question.Qclass != dns.ClassINET && question.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m
	}
	if !dns.IsSubDomain(Zone, name) {
		m.Rcode = dns.RcodeRefused
		return m
	}
	m.Authoritative = true
	rrs, extra, found := lookup(name, question.Qtype, st)
	if !found {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa()}
		return m
	}
	if len(rrs) == 0 {
		m.Ns = []dns.RR{soa()} // the name exists, not with this type
	}
	if len(rrs) > MaxRecords {
		rrs = rrs[:MaxRecords]
	}
	m.Answer = rrs
	if room := MaxRecords - len(rrs); len(extra) > room {
		extra = extra[:room]
	}
	m.Extra = extra
	return m
}

// lookup returns the records of name with type qtype, the additional
// records, and whether name exists in the zone at all.
func lookup(name string, qtype uint16, st State) (answer, extra []dns.RR, found bool) {
	labels := dns.SplitDomainName(strings.TrimSuffix(name, Zone))
	switch {
	case len(labels) == 0: // the apex
		if qtype == dns.TypeSOA || qtype == dns.TypeANY {
			return []dns.RR{soa()}, nil, true
		}
		return nil, nil, true
	case len(labels) == 1 && (labels[0] == "svc" || labels[0] == "node"):
		return nil, nil, true // empty non-terminals
	case len(labels) == 2 && labels[1] == "node":
		n := findNode(st.Nodes, labels[0])
		if n == nil {
			return nil, nil, false
		}
		return addressRRs(name, qtype, []string{n.Status.Address}), nil, true
	case len(labels) == 2 && labels[1] == "svc":
		s := findService(st.Services, labels[0])
		if s == nil {
			return nil, nil, false
		}
		return addressRRs(name, qtype, endpointIPs(s, "")), nil, true
	case len(labels) == 4 && labels[3] == "svc" && strings.HasPrefix(labels[0], "_") && labels[1] == "_tcp":
		s := findService(st.Services, labels[2])
		if s == nil || !hasPort(s, labels[0][1:]) {
			return nil, nil, false
		}
		if qtype != dns.TypeSRV && qtype != dns.TypeANY {
			return nil, nil, true
		}
		return srvRRs(name, s, labels[0][1:], st.Nodes)
	}
	return nil, nil, false
}

func findNode(nodes []*api.Node, name string) *api.Node {
	for _, n := range nodes {
		if n != nil && strings.EqualFold(n.Metadata.Name, name) {
			return n
		}
	}
	return nil
}

func findService(svcs []*api.Service, name string) *api.Service {
	for _, s := range svcs {
		if s != nil && strings.EqualFold(s.Metadata.Name, name) {
			return s
		}
	}
	return nil
}

// portName is a service port's name (its target when unnamed).
func portName(p api.ServicePort) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Target
}

func hasPort(s *api.Service, port string) bool {
	for _, p := range s.Spec.Ports {
		if strings.EqualFold(portName(p), port) {
			return true
		}
	}
	return false
}

// endpointIPs returns the distinct IPs of s's ready endpoints (of port,
// or of every port when port is ""), sorted.
func endpointIPs(s *api.Service, port string) []string {
	var ips []string
	for _, e := range s.Status.Endpoints {
		if port != "" && !strings.EqualFold(e.Port, port) {
			continue
		}
		if ap, err := netip.ParseAddrPort(e.Address); err == nil {
			ips = append(ips, ap.Addr().String())
		}
	}
	slices.Sort(ips)
	return slices.Compact(ips)
}

// addressRRs returns A (or AAAA) records of name for the addresses that
// match qtype.
func addressRRs(name string, qtype uint16, addrs []string) []dns.RR {
	var out []dns.RR
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		switch {
		case ip.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: hdr(name, dns.TypeA), A: net.IP(ip.AsSlice())})
		case ip.Is6() && !ip.Is4In6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: net.IP(ip.AsSlice())})
		}
	}
	return out
}

// srvRRs returns the SRV records of s's ready endpoints of port, and the
// boards' A records as additional records.
func srvRRs(name string, s *api.Service, port string, nodes []*api.Node) (answer, extra []dns.RR, found bool) {
	seen := map[string]bool{}
	eps := slices.Clone(s.Status.Endpoints)
	sort.Slice(eps, func(i, j int) bool { return eps[i].Node+eps[i].Address < eps[j].Node+eps[j].Address })
	for _, e := range eps {
		ap, err := netip.ParseAddrPort(e.Address)
		if err != nil || !strings.EqualFold(e.Port, port) || e.Node == "" {
			continue
		}
		target := strings.ToLower(e.Node) + ".node." + Zone
		answer = append(answer, &dns.SRV{Hdr: hdr(name, dns.TypeSRV), Priority: 0, Weight: 1, Port: ap.Port(), Target: target})
		if !seen[target] {
			seen[target] = true
			extra = append(extra, addressRRs(target, dns.TypeA, []string{ap.Addr().String()})...)
		}
	}
	return answer, extra, true
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
}

// soa is the zone's SOA record; its minimum (the negative-caching TTL)
// is TTL too.
func soa() dns.RR {
	return &dns.SOA{Hdr: hdr(Zone, dns.TypeSOA), Ns: "ns." + Zone, Mbox: "hostmaster." + Zone,
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: TTL}
}
