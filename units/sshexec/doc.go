// Package sshexec is the SSH executor the leader uses to act on boards: it
// runs commands (argv, never shell strings), places files atomically over
// SFTP, streams output (journalctl -f), and wraps the systemctl calls herd
// needs (daemon-reload, enable/start/stop/...). It is the one place that
// lists the herd units on a board (ShowUnits), as units.UnitState values.
//
// # Connections
//
// An Executor keeps one persistent SSH connection per node, dialled on first
// use and shared by every operation: each command is a session multiplexed
// on it, and file operations share one SFTP client per connection. At most
// Config.MaxSessionsPerNode exec sessions run at once per node (sshd's
// MaxSessions defaults to 10; the SFTP subsystem holds one more channel).
// Keepalives ("keepalive@openssh.com", every KeepaliveInterval) detect a
// dead peer after KeepaliveMax unanswered intervals (≈3–4 s by default);
// the connection is then closed and the next operation dials again. On
// Linux a keepalive wants no reply: the kernel's TCP acknowledgement of it
// (TCP_INFO) is the answer, so an idle connection wakes the executor once
// per interval, not for every reply (Config.KeepaliveReplies asks sshd to
// answer instead, as herdctl's tunnel does). Every connection's keepalives
// fall on the wall clock's multiples of the interval, so an idle leader
// wakes once a second for all its boards, not once per board. Well
// before that, Silence reports how long the keepalive in flight has gone
// unanswered (or unacknowledged, while the board acknowledged nothing;
// or, with no connection, how long the TCP connect in progress
// has, or for a second after a connect that got no answer was given up,
// how long ago it began), so a caller can judge a board that lost power
// within a few hundred milliseconds (the placer's witness does). A
// cancelled command on a silent board is not waited for (see
// Cancellation). A
// connection found broken when opening a session is replaced once,
// transparently; repeated dial failures back off exponentially with jitter
// (capped at BackoffMax). A command cut off by a lost connection is
// reported as ErrConnectionLost and never retried: it may have run.
//
// # Host keys
//
// Host keys are always verified: against the key pinned for the node
// (HostKeyLookup, fed from gossip metadata), or, when none is pinned,
// against known_hosts files. A mismatch is refused with a
// *HostKeyMismatchError matching ErrHostKeyMismatch; a node with neither a
// pin nor a known_hosts entry is refused too. The host key algorithm is
// negotiated to match the known key, so a board with several host keys
// presents the one we can check. HostKeyCheck (PinnedHostKey,
// KnownHostsKey) is that rule, once: herdctl bootstrap and herdctl's
// tunnels verify through it too. The lookup needs the full public key, not
// only its fingerprint (an ed25519 key in authorized_keys format is ~80
// bytes).
//
// # Running argv without a shell
//
// sshd runs every exec request through the user's login shell, so a command
// line built from user data would be parsed by a shell. Here the exec
// request is always the same fixed constant (wrapperCommand); the argv
// travels as stdin data:
//
//	stdin:  "LEN\n"  LEN bytes of NUL-terminated arguments  [kept open]
//
// The wrapper reads LEN with `read`, takes exactly LEN bytes with
// `dd bs=1`, and hands them to `xargs -0 -x`, which turns them into the
// arguments of a fixed inner `sh -c` script; that script runs
// `(exec "$@")`, so argv[0] is always a program from PATH, never a shell
// builtin, function or keyword, and no argument is ever parsed. Arguments
// arrive byte for byte (spaces, quotes, `;`, `$()`, backticks, globs,
// newlines, empty strings, leading dashes, non-UTF-8); only NUL cannot be
// carried (argv cannot hold it anyway) and argv[0] may not start with '-'.
//
// The exit status is exact: xargs would map a child's 1–125 to 123 and 255
// to 124, so the inner script always exits 0 and writes the real status to
// a pipe (fd 4) that the outer shell reads with $(...) and exits with. A
// command killed by signal N reports 128+N. If no status arrives (xargs
// refused an argv over its 128 KiB buffer, for instance) the wrapper ends
// stderr with a marker and exits 255, which Run reports as ErrWrapper.
// The command's stdin is /dev/null.
//
// After the argv the stdin stays open as a lifeline. A watcher in the
// wrapper blocks reading it; when it sees EOF (the operation's ctx was
// cancelled, or the leader's connection died) it sends SIGTERM, and 2 s
// later SIGKILL, to the session's process group, so `journalctl -f` or a
// hung command does not outlive its caller. (SSH "signal" requests would be
// simpler, but OpenSSH refuses them for root logins.)
//
// What the board needs: a POSIX-like login shell for the SSH user (bash,
// dash, ash, zsh, ksh; not fish or csh), sh, xargs with -0 and -x (GNU
// findutils or BusyBox), dd, and shell startup files that print nothing
// for non-interactive shells (as with scp). Systemd helpers also need
// systemctl, sort and sha256sum.
//
// # Listing units
//
// ShowUnits runs one fixed script (no value from outside reaches it) in a
// single round trip: it collects the herd-*.service units systemd has in
// memory (`systemctl list-units --all`, which includes not-found units
// still loaded) and the herd-*.service files in UnitDir
// (/etc/systemd/system), prints `systemctl show --property=...` of all of
// them (units.ShowProperties), a marker line, then the SHA-256 of each unit
// file, a second marker line and the names of those marked in
// units.DisconnectDir (stopped by the board's agent while cut off from the
// servers), then the instances of herd templates (the runs of a job with
// concurrency allow, herd-<pod>@<id>.service, which have no file of their
// own). ParseShowUnits reads that output with units.ParseShow, fills
// in FileHash and DisconnectMark, and folds each instance into its pod's
// unit (UnitState.Instances); a file systemd has not loaded yet becomes
// a UnitState with only Unit and FileHash. A failing systemctl or sha256sum makes the whole call
// fail (*ExitError) rather than report a partial list.
//
// ListLocal is the same listing done in Go on the board: systemctl run
// with fixed argv (list-units, then show of the services, the instances
// and the timers: at most four processes, where the script starts about
// a dozen, sha256sum and head included), the files hashed and read in
// process, output ParseListing reads to exactly what it reads from the
// script's on the same board (TestListLocalMatchesScript compares them
// byte for byte). A board session that has the list op answers
// ShowUnits with it; the board's agent lists its own units with it
// (package agent/unitwatch). The script stays for boards whose session
// predates the op, and as the reference ListLocal is checked against.
//
// # Files
//
// PutFile writes path.herd-tmp-<random> over SFTP (created exclusively,
// chmod'ed before any byte is written, fsync'ed when the server offers
// fsync@openssh.com) and renames it over path with posix-rename@openssh.com,
// so a reader sees the old file or the new one, never a torn one. The board's
// sshd must have the sftp subsystem (Debian's default). SFTP resolves paths
// like any root process, following symbolic links, so PutFile and Remove are
// only for trees no one but root can write.
//
// WriteFileNoFollow and RemoveNoFollow are for everything else (pod files,
// in directories a pod's user may own; herd uses them for every file it
// places). The content is staged over SFTP in Config.StageDir (root-only,
// 0700, under /run), then the board helper, `herd board put-file`
// (Config.BoardHelper, /usr/local/bin/herd by default), is run as argv
// through the wrapper: it walks the path from "/" with
// openat(O_NOFOLLOW|O_DIRECTORY) one component at a time, writes a temporary
// file in the final directory and renameat's it into place (package
// boardfs). A link where a directory is expected is refused (exit 3,
// ErrRefused) and nothing is written; so are setuid/setgid bits without
// NoFollowOptions.AllowSetID. There is no check-then-write window.
//
// # The board session
//
// With Config.BoardSession (the placer's executor) Run, WriteFileNoFollow
// and RemoveNoFollow go through one long-lived `herd board session` per
// connection instead (package boardsession): started once with the fixed
// request boardsession.Command, it runs each argv (as bytes, no shell, its
// own process group) and writes each file with boardfs from frames on its
// stdin, so an operation costs a frame each way and no process chain on
// the board (login shell, gate, sudo, elevated gate, the wrapper's shell,
// dd and xargs). A board that does not answer the session's hello within
// DialTimeout (an older herd, or a sudoers drop-in without the session's
// line) is remembered for the connection's life and driven as above;
// Stream (journalctl -f) always uses the wrapper. A session that ends
// under a request gives ErrConnectionLost, like a dropped connection.
// ShowUnits asks the session for the board's listing (its list op,
// ListLocal there) instead of running the script; a session from before
// the op answers it as unknown, and the script then runs through the
// session's run op for as long as that session lives.
//
// # Readiness probes
//
// Probe runs an exec readiness check in the pod's unit context rather than
// in the executor's root session: ProbeArgv wraps it in `systemd-run
// --quiet --pipe --wait --collect --uid=USER` with the unit's
// WorkingDirectory, its EnvironmentFile (read by systemd as root, so the
// check sees the pod's variables but its user cannot read the file),
// NoNewPrivileges and RuntimeMaxSec (the timeout, enforced by systemd even
// if the caller goes away). A root pod's check runs as root. Every '$' in
// the arguments is doubled so systemd passes them literally.
//
// # Cancellation
//
// Every operation takes ctx first. Cancelling it closes the lifeline (or
// sends the board session a cancel) and returns ctx.Err() once the board
// acknowledges the kill, at most about a second later, or at once when the
// board is silent (a keepalive or connect unanswered for 250 ms: a board
// that lost power will not acknowledge anything); no output is written to
// the caller's writers afterwards. As with any remote call, whether a
// cancelled operation took effect on the board is unknown.
//
// The sshdtest subpackage starts a real OpenSSH sshd for tests.
package sshexec
