// Package herddns answers DNS queries for the herd. zone from the state
// an agent already holds: services by name (A records of the boards
// running their ready endpoints, SRV records with the endpoints' ports)
// and boards by name.
//
//	web.svc.herd.             A     the boards with a ready endpoint of service web
//	_http._tcp.web.svc.herd.  SRV   0 1 PORT BOARD.node.herd. per ready endpoint of port http
//	b2.node.herd.             A     board b2's address
//
// Answer is pure: a query and a State in, a reply out. Every record has
// the TTL TTL, short so that a board that lost power drops out of
// clients' caches about as fast as its endpoints leave the service. Names
// outside herd. are refused (no recursion, RA is never set), unknown names
// inside it are NXDOMAIN with the zone's SOA, and a reply holds at most
// MaxRecords records.
package herddns
