// Package bootstrap installs herd on a fleet of boards from the user's
// machine (herdctl bootstrap): it reaches each board over SSH with the
// user's own identity (ssh_config Host aliases, -i keys, ssh-agent) and
// verifies host keys against the user's known_hosts, never trusting on first
// use; checks systemd and the CPU architecture; uploads the matching herd
// binary; writes the cluster secrets, /etc/herd/agent.toml and herd.service;
// and starts the agent. It owns:
//
//   - resolving "user@host:port" arguments and ssh_config aliases (Target,
//     SSHConfig), the user's SSH keys (Auth) and known_hosts checks
//     (KnownHosts), which herdctl's SSH tunnel reuses;
//   - the cluster's local state directory (State): the cluster key, the
//     cluster SSH key pair the leader uses, and the boards bootstrapped so
//     far (for --add);
//   - pure functions deciding everything: architecture mapping (GoArch),
//     roles and join lists (Plan), the agent configuration and systemd unit
//     (RenderAgentConfig, RenderUnit), which files differ (FilesToWrite),
//     authorized_keys edits (AddAuthorizedKey) and systemctl steps
//     (ServiceSteps);
//   - the thin shell applying them (Run) through a small Remote interface
//     implemented by units/sshexec, and waiting for the cluster to form
//     (WaitForCluster).
//
// Idempotence: every file is compared (sha256 and mode) before it is written
// and systemd is only told to act when something changed or the service is
// not enabled/running, so running bootstrap again with the same arguments
// writes nothing on the boards.
//
// Boards must allow root login over SSH for bootstrap (files go to /etc,
// /usr/local/bin and /root/.ssh; sudo is not supported).
package bootstrap
