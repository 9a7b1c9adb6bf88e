package agent

import (
	"errors"
	"fmt"
	"net"

	"github.com/herd-dev/herd/agent/herddns"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/raftstore"
)

// DefaultDNSPort is the port of the DNS listener for auto:PORT examples
// (dns_listen = "auto:8600").
const DefaultDNSPort = 8600

// checkDNSListen validates dns_listen: empty, auto:PORT or host:port, and
// only on a server.
func checkDNSListen(l string, server bool) error {
	if l == "" {
		return nil
	}
	if err := checkListenAddr(l); err != nil {
		return err
	}
	if !server {
		return errors.New("only servers answer DNS (a worker holds no state to answer from); leave it empty here")
	}
	return nil
}

// listenDNS opens the DNS listener's UDP socket and TCP listener on one
// address (dns_listen), served by Run.
func (a *Agent) listenDNS() error {
	if a.cfg.DNSListen == "" || a.store == nil {
		return nil
	}
	addr := metricsAddr(a.cfg.DNSListen, a.adv.Gossip)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("agent: dns listen: %w", err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		return fmt.Errorf("agent: dns listen: %w", err)
	}
	a.dnsUDP, a.dnsTCP = pc, ln
	return nil
}

// DNSAddr returns the address of the DNS listener, "" without one.
func (a *Agent) DNSAddr() string {
	if a.dnsUDP == nil {
		return ""
	}
	return a.dnsUDP.LocalAddr().String()
}

// storeDNS reads the DNS answers' state from the server's local copy of
// the store (its applied log: a follower may be a few milliseconds behind
// the leader, as for stale reads).
type storeDNS struct{ s *raftstore.Store }

func (d storeDNS) DNSState() herddns.State {
	var st herddns.State
	if raws, _, err := d.s.List(api.KindService); err == nil {
		st.Services = decodeAll[*api.Service](api.KindService, raws)
	}
	if raws, _, err := d.s.List(api.KindNode); err == nil {
		st.Nodes = decodeAll[*api.Node](api.KindNode, raws)
	}
	return st
}

func decodeAll[T api.Object](kind api.Kind, raws []api.RawObject) []T {
	out := make([]T, 0, len(raws))
	for _, r := range raws {
		r.Kind = kind
		if o, err := api.FromRaw(r); err == nil {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		}
	}
	return out
}
