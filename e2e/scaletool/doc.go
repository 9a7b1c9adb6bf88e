//go:build e2e

// Command scaletool is the simulation behind scripts/bench-scale: a fleet
// of up to a few hundred boards on this machine, to measure how herd's
// costs grow with the number of boards.
//
//	scaletool [--sizes 10,25,50,100] [--idle 60s] [--settle 15s] [--detect 20]
//	          [--wave 20] [--replicas 0.6] [--timing lan|local] [--dir DIR]
//
// For each size N it starts N real agents (agent.New, agent.Run), each on
// its own loopback address (127.88.0.1-3 for the servers s1-s3,
// 127.88.1.x on for the workers; testutil.TestIP only hands out odd second
// octets, so tests running meanwhile cannot collide) with the fixed ports
// 7946 (gossip), 7947 (Raft) and 7948 (API):
//
//   - three Raft servers, each in its own process (`scaletool member`), with
//     the real raftstore in a data dir under the work directory, real
//     memberlist, and a fakeboard.Fleet as the placer's Executor, so the
//     leader's placer places and observes pods on in-memory boards instead
//     of over SSH;
//   - N-3 gossip-only workers, all in one more process: a board's worker
//     costs little and 100 processes would mostly measure 100 Go runtimes.
//
// Servers have processes of their own so /proc/PID gives the leader's CPU
// and RSS alone. Gossip bytes come from memberlist's own counters
// (memberlist.udp.sent and memberlist.tcp.sent, read through a go-metrics
// sink in each process): bytes sent, encrypted, per second, divided by the
// process's members. The gossip preset is the LAN one boards use
// (gossip.LANTiming) unless --timing local.
//
// Each size: wait until the leader counts N Ready nodes, apply a deployment
// of --replicas × N pods and wait until all are Running (observed by the
// placer on the fake boards), pause --settle, then measure over --idle:
// CPU (utime+stime) and VmRSS of every process, machine-wide busy time
// (/proc/stat) and gossip bytes. At the largest size two more:
//
//   - failure detection: --detect times, a worker's gossip is shut down
//     without leaving (a power cut as gossip sees it) and every other
//     worker's gossip.Stats().Failures is polled every 2 ms until it
//     counts a failure; the worker is then started again and everyone must
//     count N alive members before the next kill;
//   - the wave: --wave workers, those running pods first, are powered off
//     at once (the servers' fake boards make every call to them fail, as a
//     refused SSH connection would, then their agents go silent) and the
//     driver polls the API every 50 ms until every victim is NotReady and
//     the deployment has all its pods Running on the other boards.
//
// The driver talks to each member process over its stdin and stdout, one
// command and one answer a line (see proc.command). It prints markdown
// tables on stdout and its progress on stderr; the members' logs (warnings
// and worse) are left in the work directory with --dir. Every file carries
// the build tag e2e like the rest of e2e/, so `go test ./...` does not
// build it.
package main
