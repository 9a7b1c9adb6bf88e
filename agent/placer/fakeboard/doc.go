// Package fakeboard fakes, in memory, what the placer's Executor reaches on
// boards: each board's file system (a map of paths) and enough of systemd
// for herd units — unit files, what systemd has loaded (and whether a
// daemon-reload is due), enabled units, and start/stop/restart/reset-failed
// with ActiveState, SubState, MainPID, NRestarts and ExecMainStatus.
//
// One Fleet serves many boards, created on first use. Tests can make a
// board unreachable (every call fails), make its calls hang until their
// context ends (a pooled connection to a board that lost power: SetHang),
// set what Fleet.Silence reports for it (SetSilence), make a unit fail, crash or come up
// in a chosen state, run a hook before every call (to inject an error or
// change the world at an exact step), and read back what each board was
// told (a log of calls), which files it holds and which units are active.
// Like the real board helper, it refuses file writes and removals through a
// symbolic link a test planted (Symlink) and setuid/setgid modes without
// the opt-in (boardapi.ErrRefused), and it records each readiness Probe
// with its user, working directory and env file (SetProbe decides the
// outcome). It backs the placer's tests and the in-process fleet tests.
//
// The model follows systemd where herd depends on it: a unit is started
// only once daemon-reload has loaded its file; a loaded unit whose file was
// removed shows LoadState not-found and is forgotten at daemon-reload if it
// is inactive, or once reset-failed clears its failure; enable and disable
// need the unit file; enable reloads when it made a link, enable-now (run
// with --no-reload by the SSH executor) does not. A unit file systemd has not loaded is listed with only
// its name and FileHash, as units.UnitState describes.
package fakeboard
