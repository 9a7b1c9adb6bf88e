// Package gossip owns membership and liveness for herd: which boards are in
// the cluster, which are alive, dead or gone, and the facts each board
// announces about itself (Meta: raft and SSH addresses, SSH host key, arch,
// model, memory, CPUs, labels, agent version, server role, and the board
// facts arch variant, kernel, systemd, cgroup layout and controllers, all
// optional so that agents of different versions understand each other).
//
// It is a thin shell over hashicorp/memberlist (SWIM with Lifeguard): gossip
// is encrypted and authenticated with the 32-byte gossip key every member
// holds (more keys are accepted during a rotation: Config.AcceptKeys), node facts
// ride in memberlist's node metadata (at most 512 bytes), and membership
// changes are delivered as coalescing events that never block memberlist.
// Heartbeats never touch Raft or the disk. memberlist runs on this
// package's own network transport (transport.go: UDP and TCP on one port,
// as memberlist's NetTransport, but reading datagrams into one reused
// buffer), and without LZW compression: an idle agent's garbage was mostly
// those two.
//
// Members can also push small messages to one another (Gossip.Send,
// Config.OnMessage): memberlist's reliable user messages over TCP,
// encrypted with the gossip key, at most MaxMessage bytes, handed to the
// receiver on a bounded queue that never blocks memberlist. They carry no
// sender identity, so a receiver authenticates what it acts on (the unit
// reports boards send the servers are signed with the board's SSH host
// key, package agent/unitreport).
//
// The package also holds the pure helper BootstrapPeers, which lets every
// server compute the same initial Raft voter set from what gossip shows.
//
// What it does not own: turning members into api.Node objects, marking nodes
// NotReady, or anything stored in Raft; that is the agent's node controller.
package gossip
