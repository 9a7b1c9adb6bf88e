package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// AdvertiseAuto, as gossip_advertise, raft_advertise or ssh_address (alone
// or as "auto:PORT"), asks the agent to pick the address itself: the local
// address on its route to its join peers (see chooseAdvertiseIP). An empty
// value means the same. herdctl bootstrap writes it unless told
// --advertise BOARD=IP.
const AdvertiseAuto = "auto"

// advertiseRouteTimeout bounds resolving the join peers' names at start.
const advertiseRouteTimeout = 3 * time.Second

// Advertised are the addresses this agent announces, resolved from its
// configuration (resolveAdvertise).
type Advertised struct {
	// Gossip, Raft and SSH are host:port. Raft is empty for a non-server.
	Gossip, Raft, SSH string
	// How says where the gossip IP came from, for the log.
	How string
}

// autoPort reports whether v asks for an automatic address ("", "auto" or
// "auto:PORT") and returns PORT ("" when not given).
func autoPort(v string) (port string, auto bool) {
	switch {
	case v == "" || v == AdvertiseAuto:
		return "", true
	case strings.HasPrefix(v, AdvertiseAuto+":"):
		return strings.TrimPrefix(v, AdvertiseAuto+":"), true
	}
	return "", false
}

// checkAdvertise validates an advertise-style value: auto, auto:PORT or
// host:port naming a reachable host.
func checkAdvertise(v string) error {
	if port, auto := autoPort(v); auto {
		if port == "" && v != "auto:" {
			return nil
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("auto:PORT needs a port 1-65535")
		}
		return nil
	}
	return checkHostPort(v, true)
}

// chooseAdvertiseIP picks the IP this agent advertises when its
// configuration leaves it to the agent:
//
//  1. the bind host, when it is a specific address (not 0.0.0.0 or ::);
//  2. else the first of routeSources (the local source address of the
//     route to each join peer, in join order; nil where there is none):
//     the address the peers can reach this board on, whichever interface
//     or address herdctl used to reach it;
//  3. else (no join peers, as on the first server, or no route to any)
//     the first private IPv4 address among ifaces, else the first
//     non-loopback IPv4 one.
//
// It is pure; how says which rule chose.
func chooseAdvertiseIP(bindHost string, routeSources, ifaces []net.IP) (ip net.IP, how string, err error) {
	if b := net.ParseIP(bindHost); b != nil && !b.IsUnspecified() {
		return b, "bind address", nil
	}
	for _, s := range routeSources {
		if s != nil && !s.IsUnspecified() {
			return s, "route to join peers", nil
		}
	}
	var fallback net.IP
	for _, a := range ifaces {
		if a.To4() == nil || a.IsLoopback() || a.IsUnspecified() {
			continue
		}
		if a.IsPrivate() {
			return a, "first private IPv4 address (no route to a join peer)", nil
		}
		if fallback == nil {
			fallback = a
		}
	}
	if fallback != nil {
		return fallback, "first IPv4 address (no route to a join peer)", nil
	}
	return nil, "", errors.New("no route to a join peer and no non-loopback IPv4 address: set gossip_advertise")
}

// resolveAdvertise works out the advertised addresses from the
// configuration, the route sources to the join peers and the interface
// addresses (see chooseAdvertiseIP). Explicit host:port values are kept;
// an automatic one takes the chosen IP and its PORT, else the bind port
// (gossip, raft) or 22 (ssh). An automatic raft address follows the
// gossip host when raft binds to every address. It is pure.
func resolveAdvertise(cfg Config, routeSources, ifaces []net.IP) (Advertised, error) {
	var adv Advertised
	var chosen net.IP
	choose := func(bind string) (string, error) {
		host, _, _ := net.SplitHostPort(bind)
		if b := net.ParseIP(host); b != nil && !b.IsUnspecified() {
			if adv.How == "" {
				adv.How = "bind address"
			}
			return host, nil
		}
		if chosen == nil {
			ip, how, err := chooseAdvertiseIP("", routeSources, ifaces)
			if err != nil {
				return "", err
			}
			chosen, adv.How = ip, how
		}
		return chosen.String(), nil
	}
	gport, auto := autoPort(cfg.GossipAdvertise)
	if !auto {
		adv.Gossip, adv.How = cfg.GossipAdvertise, "gossip_advertise"
	} else {
		host, err := choose(cfg.GossipBind)
		if err != nil {
			return Advertised{}, fmt.Errorf("gossip_advertise: %w", err)
		}
		if gport == "" {
			_, gport, _ = net.SplitHostPort(cfg.GossipBind)
		}
		adv.Gossip = net.JoinHostPort(host, gport)
	}
	gossipHost, _, _ := net.SplitHostPort(adv.Gossip)
	if cfg.Server {
		rport, auto := autoPort(cfg.RaftAdvertise)
		if !auto {
			adv.Raft = cfg.RaftAdvertise
		} else {
			host, _, _ := net.SplitHostPort(cfg.RaftBind)
			if b := net.ParseIP(host); b == nil || b.IsUnspecified() {
				host = gossipHost
			}
			if rport == "" {
				_, rport, _ = net.SplitHostPort(cfg.RaftBind)
			}
			adv.Raft = net.JoinHostPort(host, rport)
		}
	}
	sport, auto := autoPort(cfg.SSHAddress)
	if !auto {
		adv.SSH = cfg.SSHAddress
	} else {
		if sport == "" {
			sport = "22"
		}
		adv.SSH = net.JoinHostPort(gossipHost, sport)
	}
	return adv, nil
}

// routeSourcesTo returns, for each join entry (host or host:port), the
// local address the kernel would send from to reach it: a UDP socket is
// "connected" to the peer, which makes the kernel pick a route and a source
// address without sending any packet. Names are resolved (bounded by ctx);
// an entry that does not resolve or has no route gives nil.
func routeSourcesTo(ctx context.Context, join []string) []net.IP {
	out := make([]net.IP, len(join))
	for i, j := range join {
		host, port, err := net.SplitHostPort(j)
		if err != nil {
			host, port = j, "7946"
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil || len(ips) == 0 {
			continue
		}
		p, _ := strconv.Atoi(port)
		if p == 0 {
			p = 7946
		}
		c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: ips[0].IP, Port: p, Zone: ips[0].Zone})
		if err != nil {
			continue
		}
		if la, ok := c.LocalAddr().(*net.UDPAddr); ok {
			out[i] = la.IP
		}
		c.Close()
	}
	return out
}

// interfaceIPs returns this machine's interface addresses.
func interfaceIPs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out = append(out, ipn.IP)
		}
	}
	return out
}

// advertise resolves this agent's advertised addresses (the shell around
// resolveAdvertise).
func advertise(cfg Config) (Advertised, error) {
	ctx, cancel := context.WithTimeout(context.Background(), advertiseRouteTimeout)
	defer cancel()
	var sources []net.IP
	if needsRoute(cfg) {
		sources = routeSourcesTo(ctx, cfg.Join)
	}
	return resolveAdvertise(cfg, sources, interfaceIPs())
}

// needsRoute reports whether resolveAdvertise may need the route sources.
func needsRoute(cfg Config) bool {
	_, auto := autoPort(cfg.GossipAdvertise)
	host, _, _ := net.SplitHostPort(cfg.GossipBind)
	b := net.ParseIP(host)
	return auto && (b == nil || b.IsUnspecified()) && len(cfg.Join) > 0
}
