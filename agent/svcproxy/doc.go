// Package svcproxy is the service port proxy an agent runs: for each
// service port that declares a port, the board listens on it and forwards
// each TCP connection, or each UDP client's datagrams, to one ready
// endpoint of the service. A router's port-forward or a browser pointed at
// any board reaches the service.
//
// The agent hands the proxy its whole wanted state with Set: one Binding
// per (service, port name, protocol) with its listen port and its ready
// endpoints. Set opens listeners for new bindings, closes the ones no
// longer wanted (with their connections), moves a binding whose port
// changed, and swaps the endpoints of the rest in place. A listener that
// cannot open (port taken) is named in Set's error and retried by the
// next Set; the others apply regardless.
//
// # Endpoint choice
//
// Each new connection (or UDP session) takes the next endpoint round robin
// from a per-binding cursor. Passive health: an endpoint whose dial failed
// (TCP refused or timed out after DialTimeout; UDP answered with ICMP port
// unreachable) is skipped for 2 s, doubling with each further failure up
// to 30 s, and forgotten on success; when every endpoint is marked they
// are tried anyway. A TCP client whose dial fails is tried on the next
// endpoint, each endpoint at most once, and closed if none answers.
// Without endpoints a TCP client is accepted and closed at once, a UDP
// datagram dropped.
//
// # Draining and failover
//
// Set never disturbs an open TCP connection whose binding stays: an
// endpoint removed from the list gets no new connection, and its open
// connections run on until they end or go idle. A connection to an
// endpoint whose board died is not moved (TCP cannot move it): it fails
// on its own, by the peer's reset, by TCP keepalive (15 s probes, Go's
// default) or at IdleTimeout, and the client's next connection goes to a
// live endpoint. UDP has no connection to fail, so a UDP session whose
// endpoint Set removed is ended at once and the client's next datagram
// starts a session with a current endpoint.
//
// # TCP
//
// Bytes are copied both ways; a FIN one way is passed on as a half-close
// (CloseWrite) while the other way runs on, and the connection is closed
// when both ways are done. An error either way, or no byte either way for
// IdleTimeout (default 5 min), closes both sides with a reset. Idle time
// is kept with socket deadlines that move only when they pass, not a timer
// per connection. A connection costs two goroutines and two 32 KiB
// buffers while open, nothing once closed.
//
// # UDP
//
// Each client address gets a session: its own connected socket to the
// chosen endpoint and one goroutine relaying the replies back to the
// client from the listening socket. A session ends after UDPIdle (default
// 60 s) with no datagram either way. Replies leave from the listening
// socket's address; on a board with several addresses and Host "" the
// kernel picks the source address by route.
//
// # Limits
//
// Per binding at most MaxConns TCP connections (default 1024; beyond it a
// client is accepted and closed, counted as a failure) and MaxUDPSessions
// sessions (default 1024; beyond it new clients' datagrams are dropped and
// counted); UDP buffers are 64 KiB, one per listener and one per session.
// Close and Set close sockets and never wait on a client; Close returns
// once every goroutine has ended.
//
// # Stats
//
// Stats is a snapshot for metrics: per binding one row per endpoint seen
// (connections or sessions, open ones, bytes each way, failed dials) and a
// row with Target "" counting refusals before an endpoint was chosen. Rows
// live as long as their binding, except that a binding with more than 256
// rows forgets the rows of removed endpoints with nothing open.
package svcproxy
