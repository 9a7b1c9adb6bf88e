// Package bootstrap installs herd on a fleet of boards from the user's
// machine (herdctl bootstrap): it reaches each board over SSH with the
// user's own identity (ssh_config Host aliases, -i keys, ssh-agent) and
// verifies host keys against the user's known_hosts, never trusting on first
// use; checks systemd and the CPU architecture; uploads the matching herd
// binary; writes the keys each board may hold, /etc/herd/agent.toml and
// herd.service; creates the executor account the leader logs in as;
// starts the agent; and, where systemd-resolved runs, sends the herd.
// domain to the agent's DNS listener on 127.0.0.1 (resolver.go). It owns:
//
//   - resolving "user@host:port" arguments and ssh_config aliases (Target,
//     SSHConfig), the user's SSH keys (Auth) and the user's known_hosts
//     files (KnownHosts, checked through sshexec.KnownHostsKey), which
//     herdctl's SSH tunnel reuses;
//   - the cluster's local state directory (State, 0700, files 0600): one
//     key per purpose (gossip.key for memberlist, every member; server.key
//     for the Raft and forwarding TLS identity, servers only; the cluster
//     SSH key pair the leader uses, servers only; api.token, servers and
//     the herdctl context), the boards bootstrapped so far (for --add) and
//     a rotation in progress; an older folder with one cluster.key is
//     migrated (that key becomes both, until rotated);
//   - who holds what (BoardFiles, StalePaths): a worker gets only the
//     gossip key, and a re-run removes what a board must not hold (server
//     secrets on a worker, the old cluster.key everywhere);
//   - the executor account (ExecUser, herd-exec): a system user with no
//     password whose only key is the cluster SSH key, in a root-owned
//     ExecAuthKeysPath, restricted (AuthorizedKeyLine, SetAuthorizedKeys):
//     `restrict`, from= the servers' addresses (every board is visited
//     again when --add adds a server), command="/usr/local/bin/herd
//     ssh-gate" (units/sshgate); and its sudoers drop-in (RenderSudoers,
//     SudoersPath, checked with `visudo -cf` in SudoersStage before it is
//     renamed into place, mode 0440), which lets it run as root only the
//     gate's two elevated command lines. The agents' ssh_user names it.
//     Older bootstraps authorised the key for root: a re-run removes those
//     lines from /root/.ssh/authorized_keys (other lines, the user's own
//     login included, are kept);
//   - key rotation (Rotate, --rotate gossip|server|ssh|token): add the new
//     key beside the old, switch to it, drop the old, each phase on every
//     recorded board before the next, resumable from the recorded phase;
//   - pure functions deciding everything: architecture mapping (GoArch),
//     roles and join lists (Plan: join lists are IPs; agents advertise
//     "auto" unless --advertise BOARD=IP, ParseAdvertise), the agent configuration and systemd unit
//     (RenderAgentConfig, RenderUnit), which files differ (FilesToWrite),
//     the phases' secrets (PhaseSecrets) and systemctl steps
//     (ServiceSteps);
//   - rolling upgrades (upgrade.go, Upgrade, herdctl upgrade): the boards
//     one at a time in UpgradeOrder (workers, servers, the leader last);
//     the new binary uploaded as NewBinaryPath and asked its version and
//     state format on the board (herd version -o json), Decide (skip a
//     board on the version, refuse a downgrade across a state format
//     change), rename over BinaryPath, the agent restarted with
//     RestartSignal (it stays a gossip member, so no pod moves), then Gate
//     (the new version answering, alive in gossip, a leader, a server's
//     applied index at the leader's commit index of the restart);
//   - removing boards (remove.go, Remove, --remove): CheckRemoval (not the
//     last server, not a voter whose leaving breaks the quorum, unless
//     forced), the cluster key's authorized_keys line dropped, herd.service
//     stopped (the agent leaves the cluster), the workload units
//     (api.PodFromUnitName) and BoardPaths removed (and a running
//     systemd-resolved reloaded when its drop-in was among them), the
//     board dropped from the state once the cluster shows it Gone;
//   - the board's resolver (resolver.go, PlanResolver): the probe asks
//     `systemctl is-active systemd-resolved.service`; when it runs (systemd
//     246 or later, for a port in DNS=) the drop-in ResolvedDropInPath
//     (RenderResolvedDropIn: DNS=127.0.0.1:DNSPort, Domains=~herd.) is
//     written when missing or different and resolved is then
//     reload-or-restarted; otherwise nothing is written and one progress
//     line says how to point the board's resolver at 127.0.0.1 port
//     DNSPort. --remove removes the drop-in (it is in BoardPaths) and
//     reloads a running resolved (ResolverRemoveSteps);
//   - the thin shell applying them (Run, Upgrade, Remove) through a small
//     Remote interface implemented by units/sshexec, and waiting for the
//     cluster to form (WaitForCluster).
//
// Idempotence: every file is compared (sha256 and mode) before it is written
// and systemd is only told to act when something changed or the service is
// not enabled/running, so running bootstrap again with the same arguments
// writes nothing on the boards.
//
// # Logging in as a sudo user
//
// Bootstrap logs in as the given user (`pi@pi1.local`, or root). A user
// that is not root must have passwordless sudo (as Raspberry Pi OS's first
// user does): the probe runs `sudo -n true` and stops with the fix when
// sudo wants a password. Then every command runs as SudoArgv(argv) =
// `sudo -n -- argv...`, still argv data carried by the executor's wrapper
// (units/sshexec), never a shell string; and files are read and written
// over SFTP spoken to `sudo -n <sftp-server>` in an exec session
// (sshexec.Config.SFTPCommand; the server is one of the fixed
// sshgate.SFTPServerPaths, so the command line holds constants only), so
// PutFile keeps its atomic rename and modes. Logged in as root, nothing is
// elevated and the sftp subsystem is used, as before.
//
// Every board needs sudo, root login or not: the executor account elevates
// with it. A board without sudo is refused in the probe (install the sudo
// package); keeping the cluster key on root for such boards would make the
// agents' ssh_user differ per board and keep root login a requirement.
package bootstrap
