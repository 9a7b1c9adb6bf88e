package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/herd-dev/herd/agent/herddns"
)

// DefaultDNSPort is the port of the DNS listeners by default (dns_listen
// unset): 127.0.0.1 and the gossip advertise IP.
const DefaultDNSPort = 8600

// checkDNSListen validates dns_listen: empty, off, auto:PORT or
// host:port.
func checkDNSListen(l string) error {
	if l == "" || l == "off" {
		return nil
	}
	return checkListenAddr(l)
}

// dnsAddrs returns the addresses dns_listen names and whether they must
// open (an explicit address must; the defaults are skipped when taken).
func dnsAddrs(l, gossipAdv string) (addrs []string, required bool) {
	switch l {
	case "off":
		return nil, false
	case "":
		lo := net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultDNSPort))
		adv := metricsAddr("auto:"+strconv.Itoa(DefaultDNSPort), gossipAdv)
		if adv == lo {
			return []string{lo}, false
		}
		return []string{lo, adv}, false
	}
	return []string{metricsAddr(l, gossipAdv)}, true
}

// dnsListener is one address the agent answers DNS on.
type dnsListener struct {
	udp net.PacketConn
	tcp net.Listener
}

// listenDNS opens a UDP socket and a TCP listener on each address of
// dns_listen, served by Run from the agent's service view.
func (a *Agent) listenDNS() error {
	addrs, required := dnsAddrs(a.cfg.DNSListen, a.adv.Gossip)
	for _, addr := range addrs {
		l, err := openDNS(addr)
		if err != nil {
			if required {
				return fmt.Errorf("agent: dns_listen: %w", err)
			}
			a.log.Warn("not answering DNS on this address (set dns_listen to pick another, or off)", "addr", addr, "err", err)
			continue
		}
		a.dns = append(a.dns, l)
	}
	return nil
}

// openDNS opens UDP and TCP on one address. With port 0 the UDP port is
// picked first; when that port is taken over TCP another is tried.
func openDNS(addr string) (dnsListener, error) {
	_, port, _ := net.SplitHostPort(addr)
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return dnsListener{}, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return dnsListener{udp: pc, tcp: ln}, nil
		}
		pc.Close()
		if port != "0" || try == 9 {
			return dnsListener{}, err
		}
	}
}

// DNSAddr returns the address of the first DNS listener, "" without one.
func (a *Agent) DNSAddr() string {
	if len(a.dns) == 0 {
		return ""
	}
	return a.dns[0].udp.LocalAddr().String()
}

// serveDNS answers on every DNS listener from src until ctx ends.
func (a *Agent) serveDNS(ctx context.Context, wg *sync.WaitGroup, src herddns.Source) {
	for _, l := range a.dns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One herddns.Server per listener: a Server serves one pair.
			err := herddns.NewServer(src, herddns.DefaultLimits).Serve(ctx, l.udp, l.tcp)
			if err != nil && !errors.Is(err, context.Canceled) {
				a.log.Error("dns listener stopped", "addr", l.udp.LocalAddr(), "err", err)
			}
		}()
	}
}

// closeDNS closes every DNS listener.
func (a *Agent) closeDNS() {
	for _, l := range a.dns {
		l.udp.Close()
		l.tcp.Close()
	}
}
