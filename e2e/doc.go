//go:build e2e

// Package e2e owns the end-to-end tests of herd on the lab (scripts/lab:
// systemd-nspawn boards with real systemd and OpenSSH, each in its own
// network namespace) and the harness they share with scripts/bench-failover.
//
// Every file carries the build tag e2e, so `go test ./...` neither compiles
// nor runs any of it; `make e2e` (as root) does:
//
//	go test -tags e2e -count=1 -timeout 40m -v ./e2e/
//
// The suite brings up one lab of four boards (b1-b3 Raft servers, b4 a
// worker) with `scripts/lab up 4`, installs herd on them with `herdctl
// bootstrap` into a temporary herdctl config, and takes the lab down at the
// end whatever happens: pass, failure, a panic in a test (t.Cleanup),
// SIGINT/SIGTERM, the -timeout about to fire, and, for anything that kills
// the test binary outright, a reaper process that runs `scripts/lab down`
// when the binary ends without telling it so. The lab scripts are copied
// first (SnapshotLab), so edits to scripts/lab during a run do not break it.
//
// Everything goes through the real binaries: bin/herdctl (with -o json,
// decoded into the api types), `ssh -F /var/lib/herd-lab/ssh_config bN …`
// and scripts/lab. Fleet is the harness: it runs those commands, keeps one
// SSH port forward per server for fast polls (Fleet.Herdctl with a via
// board), and reads the herd units each board runs. Poll waits on a
// condition with a deadline; nothing synchronises with a fixed sleep.
package e2e
