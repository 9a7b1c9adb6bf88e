// Package sshgate is `herd ssh-gate`, the forced command of the cluster SSH
// key on every board. herdctl bootstrap authorises that key for the
// executor account (herd-exec, see package bootstrap) as
//
//	restrict,from="<servers' addresses>",command="/usr/local/bin/herd ssh-gate" ssh-ed25519 ...
//
// so sshd runs the gate instead of whatever the client asked for, with the
// request in SSH_ORIGINAL_COMMAND. The gate admits exactly the three things
// the leader's executor (units/sshexec) ever asks for:
//
//   - the executor's fixed wrapper command (sshexec.WrapperCommand),
//     compared byte for byte and run with /bin/sh -c, as sshd would have;
//     the argv it runs travels on stdin, never in the command line;
//   - the board session (boardsession.Command, compared byte for byte):
//     `herd board session`, one long-lived process per connection that
//     runs the executor's commands and file writes (argv and content as
//     data in frames on stdin), so the chain below is paid once per
//     connection instead of once per command;
//   - the sftp subsystem: with a forced command sshd passes the
//     subsystem's configured command ("internal-sftp", or the sftp-server
//     path, maybe with options), and the gate runs the board's own
//     sftp-server binary from a fixed list of paths (SFTPServerPaths),
//     without the client's options.
//
// Anything else (an interactive login, another command) is refused with a
// message on stderr and exit status 1. `restrict` turns off port, agent
// and X11 forwarding, pty allocation and ~/.ssh/rc; the executor needs
// none of them (exec and sftp sessions, keepalive requests).
//
// # Elevation
//
// Run as root (a key authorised for root, as older bootstraps did), the
// gate execs the admitted program directly. Run as any other user (the
// executor account), it re-execs itself through sudo, from a fixed path
// (SudoPaths, never PATH):
//
//	sudo -n /usr/local/bin/herd ssh-gate --elevated wrapper|sftp|session
//
// and the sudoers drop-in bootstrap writes admits exactly those three
// command lines (SudoersCommands), without a password. A board whose
// drop-in predates the session (sudo refuses the third line) answers the
// session request with no Hello, and the executor uses the wrapper there
// until `herdctl bootstrap` rewrites the drop-in. `--elevated KIND` runs only
// as root and only those three kinds; it takes nothing from the client (sudo
// cleared the environment, and the request was classified before sudo).
// So the account reaches root only through herd's protocol, and admits no
// more than the gate does as root (Gate).
//
// The gate narrows the key to herd's protocol, not to harmless commands:
// the wrapper runs any argv as root, which is the leader's job. What keeps
// the key from a worker is that only servers hold it, and from= keeps a
// copy of it from being used from anywhere but a server's address.
package sshgate
