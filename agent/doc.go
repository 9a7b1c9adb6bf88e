// Package agent is herd's composition root: it loads the agent
// configuration, wires gossip, the raftstore, the HTTP API and, while this
// agent leads, the controllers and the executor, and runs them until the
// process is told to stop. Decisions live in the packages it wires: Raft
// membership in raftstore.PlanMembership, member state diffing in gossip,
// every object rule in api, reconciling in agent/controller, board work in
// agent/placer. What stays here is the shell around them: the controllers'
// State and Writer over the raftstore and gossip (state.go: a snapshot
// cached per change, the placer's SSH witnesses kept for the node
// controller, actions turned into store transactions), the executor
// adapter and the loops that apply the plans, and the event recorder
// (recorder.go: while leading, every committed change goes through
// controller.DeriveEvents and the events are written in batches of
// up to 100 ms), and the service view with what it feeds (services.go,
// dns.go: every agent's view of the services, from its store on a server
// or from the file the leader's svcview.Publisher writes on a worker,
// answers DNS through agent/herddns and sets agent/svcproxy's listeners
// with proxyBindings), and the unit reports (unitreports.go: on a systemd
// board an agent/unitwatch Watcher sends the board's signed unit reports
// to every server over gossip; a server opens them with agent/unitreport
// against the host key the board announces and keeps them in a
// placer.Reports that outlives its leadership terms), and the on_disconnect
// loop (ondisconnect.go: on a systemd board an agent/disconnect Loop stops
// the units whose template says on_disconnect stop_after once the board has
// been cut off from a quorum of the servers that long), and the standby of a
// following server (standby.go: when the Raft leader has been silent for
// 300 ms it warms its SSH connection to every live board, so that a new
// leader's first placements and witnesses do not wait for dials, and it
// closes the connections no one has used for two minutes). At start it reads the
// board's facts (facts.go: FactsFrom derives them purely from /proc, /sys,
// uname, `systemctl --version` samples and the names of the character
// devices in /dev; gossip.TrimDevices drops the devices that do not fit in
// the gossip metadata, with a warning) and works out the addresses it
// advertises (advertise.go: resolveAdvertise, the bind address or the
// source address of the route to its join peers).
//
// Stopping: SIGTERM/SIGINT leave gossip, hand over Raft leadership and
// close the store; RestartSignal (SIGUSR1, sent by herdctl upgrade) does the
// same without leaving gossip, for systemd to start the agent again, so the
// cluster sees a short absence and not a board that left. `herd version -o
// json` prints api.VersionInfo (the version and raftstore.StateFormat).
package agent
