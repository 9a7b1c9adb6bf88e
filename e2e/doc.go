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
//
// In TestFleet's worker power pull, headless Chromium (Debian's chromium,
// driven by chromedp; e2e/dashboard.go) watches `herdctl dashboard
// --no-open` through the pull: the page must show the board NotReady and a
// replacement pod Bound to another board in its timeline, and the board's
// card the replacement; how soon it did is logged against the worker
// failover budget (3 s from the kill), not asserted (speed is measured by
// scripts/bench-failover). The page's screenshot is saved to
// $TMPDIR/herd-e2e-dashboard-BOARD.png (the path is logged).
//
// TestHostile is the hostile-actor group (e2e/hostile_test.go; attacker
// programs in e2e/hostiletool, copied onto the boards). It applies a daemon
// running as nobody on every board (an exec readiness probe whose script
// nobody owns, a file under a directory nobody can write), a root daemon
// with SECRET in its environment, and a deployment to scale; then every
// attempt must be refused and leave the objects (resourceVersions; nodes'
// phase and address) and every board's herd units as they were:
//
//   - a_pod_user, as nobody (setpriv from root's SSH session) on the
//     worker b4 and the server b2: the API on 127.0.0.1:7948 without a
//     token (GET and an apply of a root daemon: 401) and on
//     /run/herd/api.sock (permission error or 401/403); on b4 and b1, no
//     file in /etc/herd (but *.pub and agent.toml), /var/lib/herd or /root
//     readable; on b4:
//     the other pod's SECRET nowhere in /etc, /run, /srv, systemctl show or
//     its /proc environ; the exec probe never records uid 0.
//   - b_worker, as root on b4 with every file it holds: a forwarded write
//     of a pod bound to b1 to each server's Raft port is refused (a control
//     from b1 with the server's keys proves the tool speaks the transport);
//     no SSH shell and no sftp write as root on another board with any
//     private key found.
//   - c_stranger, from netns herd-stranger (10.77.0.250 on the lab bridge,
//     no keys): the API port from the LAN (no listener or 401), a Raft RPC
//     with a random key (refused), a memberlist join without and with a
//     wrong key (not a member), and 200 idle connections to each server's
//     Raft port while four scales forwarded from a follower each commit
//     within 10s.
//   - d_browser, with a valid token through b1's API: text/plain and form
//     bodies, a foreign Origin, Host: evil.example (writes and reads) get 4xx
//     while the same well-formed request is accepted.
//   - e_symlink, last: nobody swaps the parent directory of its pod's file
//     for a symlink to /etc and the file changes; /etc stays as it was and
//     the pod gets a condition naming the symlink.
//
// Run it alone with: go test -tags e2e -count=1 -run TestHostile -v ./e2e/
//
// Ground truth of what runs where is GroundTruth (Fleet.WatchUnits): one
// SSH session per board, opened from the board's own network namespace
// (so it keeps working while the board is partitioned away), samples the
// active herd-*.service units with their MainPID, X-Herd-Pod and
// X-Herd-Owner every interval and reconnects after a power pull. Check
// (package e2e/truth, which has no build tag so its tests run with go test
// ./...; the types are aliased here) replays the samples against what the harness knows (which boards were
// away or off, the declared count, when faults were injected) and reports
// overcount over all boards and over the reachable ones, a pod's unit
// active on two boards at once, and dips below the declared count once the
// reachable boards had converged after a fault.
//
// TestFaults (e2e/faults_test.go) runs first, on the same lab, from and
// back to a converged examples/web.toml:
//
//   - a_leader_agent_sigstop: the leader's agent frozen for 10 s (its
//     board, sshd and units stay up): never more than the declared count
//     active fleet-wide and no pod on two boards, during the freeze and
//     until converged after SIGCONT.
//   - b_agent_kill9_keeps_units: kill -9 of the agent on a board running
//     pods: every herd unit there keeps its MainPID, the pods' names and
//     boards are unchanged and none is Lost during 15 s.
//   - c_write_during_leader_pull: a scale through a follower as soon as the
//     leader's power is pulled is acknowledged within 3 s of the pull and
//     read back through every surviving server.
//   - d_partition_heal_repeated: the worker, running a pod, partitioned
//     away and healed three times: once converged, the reachable boards
//     never run fewer than declared.
//
// Run them alone with: go test -tags e2e -count=1 -run TestFaults -v ./e2e/
//
// TestUpgrade (e2e/upgrade_test.go) runs next to last: it leaves every agent on
// another version and b4 without herd. It builds herd with another
// agent.Version and runs `herdctl upgrade --herd-binary` over the converged
// fleet (after a --dry-run whose order must be b4 first, the leader last):
// every node and every board's binary then report the new version, every
// herd unit kept its MainPID and NRestarts, the boards' systemd ran exactly
// 3 web pods throughout (sampled), and a second run skips every board.
// Then web is scaled to 4 (so b4 runs one) and `herdctl bootstrap --remove
// b4` must leave nothing of herd on b4 (files, units, the cluster key's
// line) while web comes back at 4 on b1-b3.
//
// TestVMBoard (e2e/vm_test.go) runs last, on what TestUpgrade left:
// `scripts/lab up 5 --vm 1` powers on b5, a full-system arm64 VM under
// qemu-system-aarch64 set up like stock Raspberry Pi OS Lite (pi with
// passwordless sudo, root login refused, cgroup_disable=memory). It checks
// systemd-detect-virt = qemu and uname -m = aarch64 there, bootstraps it
// with `herdctl bootstrap --add --dist` as pi@b5 (herd for amd64 and arm64
// built by the test), expects the node to be arm64 and to warn
// no-memory-limits, places one pod of a four-replica deployment on it,
// pulls its power (the pod comes back on b1-b3), powers it on (Ready means
// fenced: none of its stale units left; exactly 4 units on the boards),
// runs an arm64-only daemon there and rolls `herdctl upgrade --dist` over
// b1-b3 and the VM with no unit restarted. HERD_E2E_VM=0 skips it. A cold
// machine first builds the arm64 root and the VM images (≈8 min, cached in
// /var/cache/herd-lab; docs/lab.md "VM boards").
//
// TestDevices (e2e/devices_test.go) powers the worker b4 off and boots it
// with `scripts/lab boot --cgroup2` (its systemd on the cgroup2 hierarchy,
// allowed bpf(): device policies enforced), makes /dev/ttyUSB0 (1:3) and
// /dev/ttyUSB1 (1:2) there and restarts its agent: b4 advertises both. A
// deployment of two pods asking for /dev/ttyUSB0 must run both on b4 and
// nowhere else, its unit show DevicePolicy=closed and DeviceAllow=/dev/ttyUSB0
// rw, the pod write its device and get EPERM for the other (ENXIO outside
// the unit). A deployment asking for /dev/i2c-7 stays Pending with "0/4
// boards: 4 missing device /dev/i2c-7". b4 is booted back in its default
// mode at the end. Run it alone with:
// go test -tags e2e -count=1 -run TestDevices -v ./e2e/
//
// TestArtifacts (e2e/artifacts_test.go) serves a small script with
// net/http from the test process on the host's lab bridge address
// (10.77.0.1, nothing else) and applies deployments pinned to b4 with it as
// an artifact: with the right sha256 the pod runs the script, which is on
// the board root-owned with its mode next to its cache entry; with a wrong
// one the pod is not Running and shows ArtifactsFetched=False
// (ArtifactMismatch, in `herdctl describe pod` too), nothing is installed
// or cached, and the server sees no more requests than the backoff allows;
// with the server stopped, a new pod with the cached artifact runs and one
// with an uncached artifact shows ArtifactUnreachable. Run it alone with:
// go test -tags e2e -count=1 -run TestArtifacts -v ./e2e/
//
// TestSecrets (e2e/secrets_test.go) creates a secret with herdctl (one
// value from standard input, one from a file), applies a deployment of two
// pods running as daemon that load it, and checks on the boards: each
// process logs the SHA-256 of its credential and a key read through
// ${CREDENTIALS_DIRECTORY} in its argv; herd's credential file is root
// 0600 in a root 0700 directory and neither it nor systemd's copy is
// readable by nobody (nor herd's file by the pod's own user); the unit
// file names two LoadCredential= lines and, like the env files, holds no
// value; the servers' /var/lib/herd (Raft log, stable store, snapshots)
// holds no value. The delete of the secret in use is refused; a new value
// rolls the pods, which log its hash, and the old pods' credential files
// go. A deployment naming a missing secret stays Pending (SecretMissing).
// Run it alone with: go test -tags e2e -count=1 -run TestSecrets -v ./e2e/
// TestJobs (e2e/jobs_test.go) applies a job firing every 5 seconds that
// exits 0 and 3 by turns and two run-once jobs: the scheduled job's timer is enabled and
// active on exactly one board, its service static (never enabled), and its
// runs reach `herdctl get jobs` with their exit status and `herdctl logs
// job/tick` with their output; the run-once jobs end Succeeded, and Failed
// after one retry; a job with concurrency replace whose runs take a minute
// has its running process replaced by the next run (a new main PID, the
// service active throughout). The power of the scheduled job's board is then pulled:
// the job's pod is replaced on another board, whose timer fires and whose
// run is recorded. The board is powered on again at the end and must be
// fenced (no herd-tick unit left on it). Run it alone with:
// go test -tags e2e -count=1 -run 'TestJobs$' -v ./e2e/
// TestJobsAllow (e2e/jobs_test.go) applies a job with concurrency allow
// due every 5 seconds whose runs take 12: on its board two instances of
// its template (herd-<pod>@<id>.service) run at once, finished runs
// (exit 0 and 3, overlapping in time) are recorded each once with their
// instance, `herdctl get`/`describe job` show the runs in progress and
// each run's unit and `herdctl logs job/overlap` several runs' output;
// after more than 10 finished runs the board keeps at most 10 finished
// instances; deleting the job while runs are in progress leaves nothing
// of it on the board (no unit, no template, kick or environment file).
// Run it alone with: go test -tags e2e -count=1 -run TestJobsAllow -v ./e2e/
//
// Command chaostool (scripts/chaos) is the nemesis: N mixed fault cycles on
// a lab of five boards with the same ground truth, scale writes during each
// fault, and a report (docs/lab.md, "The nemesis").
package e2e
