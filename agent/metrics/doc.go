// Package metrics owns herd's Prometheus metrics: one Registry per agent
// (never a process-global one, so a test can run several agents in one
// process), the definitions of every herd_* metric (name, help, type,
// labels), and the exposition handler the agent serves at GET /metrics
// (package agent/httpapi guards it). internal/promtext writes the text
// format and the go_* and process_* families; testdata/herd.golden holds
// every herd_* family as the exposition writes it.
//
// What a metric reads is cheap and read at scrape time where it can be:
// the raft collector reads raftstore.Stats, the gossip collector
// gossip.Members and gossip.Stats, the state collector this server's own
// copy of the store (pods by phase, nodes by phase and condition, every
// value present, 0 included, so queries are stable), with no goroutine of
// their own. The rest is observed where it happens, through hooks the
// observed packages define and this package implements: the controller
// Runner's Observer (queue depth, reconcile duration, errors, retries),
// the placer's Observer (placement latency, board calls per board) and
// raftstore's Config.ObserveTxn (write latency). The reconcilers stay pure:
// only the Runner calls the observer, around them.
//
// Every server reports from its local store, so herd_pods and herd_nodes
// come once per server; herd_raft_leader (1 on the leader) lets a query
// pick the leader's view: `herd_pods{phase="Running"} and on(instance)
// herd_raft_leader == 1`, or `max(herd_pods{phase="Running"})`. The list
// of metrics, their labels and example queries are in docs/metrics.md.
package metrics
