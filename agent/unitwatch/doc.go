// Package unitwatch is the board side of unit reports: a board's own
// agent watches its herd units and tells the servers every change, so the
// leader sees a crashed or failed unit within milliseconds instead of at
// its next SSH listing, and lists boards over SSH only to act and as a
// slow safety net (package agent/placer, "Reports").
//
// A Watcher waits for a Source to say that some herd unit changed (DBus:
// systemd's PropertiesChanged signals of herd units and of the instances
// of herd templates, a job's runs herd-<pod>@<id>.service, on its private
// socket, through go-systemd's dbus package), lets the burst settle for Config.Settle,
// then makes a report: it takes the next Mark, writes it to the seq file
// (so the leader's SSH listing, which reads that file in the same round
// trip, knows which reports it covers), collects the units with the very
// listing the leader gets over SSH (sshexec.ListLocal, in this process),
// signs the report with the board's SSH host key (package
// agent/unitreport) and hands it to Config.Send. It also reports at start,
// when the source reconnects (signals may have been missed), and every
// Config.Resend without a change, which keeps the leader counting the
// board as reporting and repairs a lost report.
//
// The epoch of the marks is kept in Config.EpochFile (the agent's data
// dir) and rises at every start (unitreport.NextEpoch).
package unitwatch
