// Package boardsession is one long-lived root process per SSH connection
// that runs the leader's commands and file writes on a board, instead of a
// new exec session per command.
//
// Through the cluster key's gate every command used to cost a chain of
// processes on the board: the login shell, `herd ssh-gate`, sudo, the
// elevated gate, the wrapper's shell, dd, xargs and two subshells, then
// the command. On a lab board that is 90–250 ms per command when the
// machine is busy, and a placement is several commands; on a Pi Zero each
// Go process start alone is tens of milliseconds. A session pays for the
// chain once per connection: sshexec starts `herd board session` (admitted
// by the gate as the exact string Command and elevated through sudo like
// the wrapper), and from then on each request is a frame on the session's
// stdin and each answer a frame on its stdout.
//
// Frames are a 4-byte big-endian length and that many bytes of JSON, at
// most MaxFrame. The server speaks first (a Hello naming Protocol), so a
// client that reaches a board without the session (an older herd, or a
// sudoers drop-in from before it) sees no Hello and falls back to the
// wrapper. The Hello announces no operations: frames are decoded
// strictly (unknown fields refused), so a field added to it would make
// every older client see no Hello at all and drop to the wrapper (during
// `herdctl upgrade`, which upgrades the leader last, on every upgraded
// board). An op newer than Protocol is found out by asking: an older
// server answers it as unknown, and nothing is done. Requests:
//
//   - run: argv executed directly (no shell: argv stays data, as through
//     the wrapper), stdin /dev/null, its own process group, stdout and
//     stderr kept up to the request's cap (at most MaxOutput each); the
//     answer carries the exit status (128+N when killed by signal N);
//   - put: content written to a path with boardfs.PutFile (no symbolic
//     link followed, temporary file and rename), so file writes need
//     neither SFTP staging nor a helper process;
//   - rm: boardfs.RemoveFile;
//   - list: the board's listing of its herd units, produced by the
//     function the caller gives in Options.List (`herd board session`
//     gives sshexec.ListLocal: systemctl with fixed argv and fixed paths
//     read, nothing taken from the request), at most the request's cap;
//     it saves the dozen processes of the listing script. Serve without
//     it answers a list as an unknown op, as a herd from before it does;
//     the Client then remembers the op as unknown (ErrUnknownOp) and the
//     caller lists another way;
//   - cancel: the run (or list) with that id gets SIGTERM on its process
//     group, and SIGKILL KillGrace later if it still runs (a list's
//     context is cancelled, which kills its systemctl).
//
// Requests run concurrently, at most MaxRunning at once (more are answered
// with an error at once). When the session's stdin ends (the leader closed
// it, or the connection died) every running command is cancelled the same
// way and the server exits once they are gone; a session with nothing
// running and no request for IdleExit (10 minutes) exits too, so a leader
// that died without closing its connection does not leave a process
// behind on every board for hours (the leader lists each board every few
// minutes, and starts a new session if its old one is gone). The session runs any argv
// as root, exactly what the wrapper does: the trust is the cluster key's,
// and only servers hold it (docs/security.md). What a misbehaving client
// can cost the board is bounded: frame size, concurrent commands, output
// kept per command.
package boardsession
