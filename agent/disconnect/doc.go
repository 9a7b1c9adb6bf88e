// Package disconnect is the board side of a pod template's on_disconnect
// (api.OnDisconnect): a board that cannot reach the servers stops, by
// itself and without any leader, the herd units whose template asks for
// it, once it has been cut off for their stop_after. With it, the overlap
// between a cut-off board's copy of a pod and the replacement the servers
// start elsewhere is bounded by that setting instead of by the partition.
//
// # Cut off
//
// A board is cut off while it does not see a majority of the cluster's
// servers alive in its own gossip (Quorum over gossip.Members: the server
// members it knows, alive or dead, leaving out those that left; with none
// known it is cut off), or, on a server board, while its Raft knows no
// leader. Workers are not in Raft, and gossip is what they share with the
// servers: a board the servers' gossip calls dead (and whose pods they
// replace) has, in the same partition, lost sight of them in its own
// gossip within about the same time. Tracker keeps since when the board
// has been cut off; it resets the moment a quorum is seen again.
//
// # Which units, and when
//
// The board reads each unit's policy from its unit file (units.ReadMeta:
// X-Herd-Disconnect-Stop-After, which the renderer writes from the
// template), so it needs nothing from the servers. Due picks the units
// cut off for at least their stop_after and not stopped already (marked);
// ToStop keeps those whose process runs, or, for a scheduled job's pod,
// whose timer is active or a run of which goes (a unit found down,
// crashed or failed, is left as it is, unmarked, and not listed for again
// during that cut); StopNames adds a job's timer, stopped first so no new
// run starts, and its running instances (concurrency allow), and the
// leader starts the timer again if the pod is still placed there.
// Loop.Step marks each in
// units.DisconnectDir and then stops them with one `systemctl stop`
// (argv, no shell). The mark tells the leader, once it can list the board
// again, that the unit was stopped on purpose: its pod stays Scheduled
// (controller.ObservePod) and units.Plan starts it again if the pod is
// still placed there; if the pod was replaced meanwhile, fencing removes
// the unit. The board itself starts nothing when it reconnects: only the
// leader knows whether the pod is still wanted there.
//
// Marks live on /run and are forgotten at reboot, when the board's
// enabled units start again anyway (and are stopped again stop_after
// after the agent starts, if the board is still cut off). Once connected,
// Step drops the mark of a unit that runs again (the leader started it)
// or whose unit file is gone (fencing removed it) (ClearMarks).
//
// Everything that decides is pure (Quorum, Tracker, Due, ToStop,
// ClearMarks): values in, values out, the time passed in. Loop does the
// I/O through the functions in Config, one Step per Config.Interval.
package disconnect
