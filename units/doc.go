// Package units owns the translation between herd pods and systemd service
// units: naming (herd-<pod>.service), rendering a Pod into a unit file with
// go-systemd's unit package, reading herd's bookkeeping back out of a unit
// file, and planning which unit operations bring one board from what it runs
// to what is placed on it. Everything at this level is pure: values in,
// values out, no I/O and no clock. The placer (agent/placer) carries the
// plan out, through the SSH executor in units/sshexec.
//
// # Rendered unit
//
// A pod becomes one unit and one environment file:
//
//	[Unit]     Description, After/Wants=network-online.target,
//	           StartLimitIntervalSec=0 when systemd restarts the process,
//	           X-Herd-Pod, X-Herd-Owner, X-Herd-Revision, X-Herd-Generation,
//	           X-Herd-Files, X-Herd-Disconnect-Stop-After (only for a
//	           template with on_disconnect stop_after; systemd ignores
//	           keys starting with "X-")
//	[Service]  Type=exec, ExecStartPre and TimeoutStartSec (with
//	           artifacts), ExecStart, EnvironmentFile, LoadCredential
//	           (with secrets), User,
//	           WorkingDirectory, MemoryMax, CPUQuota, DevicePolicy and
//	           DeviceAllow (with devices), Restart, RestartSec=1,
//	           KillMode=mixed, TimeoutStopSec=10, SyslogIdentifier=<pod>,
//	           and the sandbox options
//	[Install]  WantedBy=multi-user.target
//
// StartLimitIntervalSec=0 is set for restart policies always and
// on-failure, so systemd never stops restarting on its own.
//
// Rendering is deterministic: the same pod always yields the same bytes, so
// a hash of the bytes tells whether a board runs the current unit.
//
// Type=exec needs systemd 240; older versions ignore the line with a warning
// and fall back to Type=simple. Exec[0] may be a bare command name: systemd
// 239 and later search PATH for it; older versions need an absolute path.
//
// # Artifacts
//
// A template with artifacts gets one ExecStartPre=+ line, the board's
// `herd artifact fetch` (package units/artifact, whose Argv is the one home
// of its words) with every artifact's URL, SHA-256, path, mode and setid
// opt-in: '+' runs it as root and outside the sandbox, even for a pod with
// a user, so it can write where herd writes pod files. Its words are
// quoted like ExecStart's with every % and $ escaped (nothing is expanded).
// systemd starts the process only if it succeeds. TimeoutStartSec= gives
// each artifact its download deadline plus one backoff wait, plus 30 s.
// Artifact paths are listed in X-Herd-Files after the files, so they are
// removed with the unit and kept while another placed pod uses them.
//
// # Jobs and timers
//
// A job's pod (api.PodSpec.RunsToCompletion) renders without [Install]:
// its unit is never enabled, so a reboot does not run it again. A run-once
// job's unit has RemainAfterExit=yes: after exit 0 it stays active
// (exited), so systemd does not unload it and forget its run before herd
// reads it (a failed unit stays loaded anyway; a scheduled job's service is
// held by its timer, and must go inactive for the next run). Plan starts
// a run-once job's unit once (and again only if its board's agent stopped
// it while cut off) and never restarts it after it exits. A scheduled job's
// pod (api.PodSpec.Scheduled) also gets a timer, api.TimerName(pod) =
// herd-<pod>.timer, from RenderTimer: OnCalendar= the schedule, Unit= the
// service, AccuracySec=1s, no Persistent= (missed runs are not caught up:
// docs/manifests.md says why), WantedBy=timers.target. Plan writes it
// beside the service (after it: a pass cut short leaves no timer without
// its service), enables and starts the timer, never the service, restarts
// the timer when its file changes and takes it down (stop, disable,
// remove) with its service when the pod is not placed there.
// A job with concurrency replace (api.PodSpec.ReplacesRuns) has its timer
// start a kick unit instead, api.KickUnitName = herd-<pod>_kick.service
// (RenderKick: a oneshot running `systemctl restart --no-block --
// herd-<pod>.service`), which the plan writes with the service as one of
// the pod's files (KickPath, listed in X-Herd-Files), so it is removed
// with the service; the listing never sees it ('_' is in no pod name).
// A job with concurrency allow (api.PodSpec.OverlapsRuns) has its kick
// unit start a new instance of a template of its service for every run
// (`systemctl start --no-block -- herd-<pod>@${INVOCATION_ID}.service`:
// systemd names it after the kick's invocation). The template,
// TemplatePath = herd-<pod>@.service, has the service's own bytes
// (RemainAfterExit=yes for such a pod, so a finished instance stays
// loaded until herd has read its run) and is written and removed with the
// service like the kick unit. The listing carries the loaded instances
// with their service (UnitState.Instances, at most api.MaxJobInstances,
// KeepInstances); the plan leaves running instances alone, clears
// (stop or reset-failed) finished ones beyond the api.MaxJobRuns that
// started last, and takes every instance down with its pod.
// The listing reports each service's timer (UnitState.TimerActiveState,
// TimerFileHash) and the main process's exit time and Result, from which
// the controller records runs.
//
// # Environment file
//
// No environment value is written into the unit file (unit files are
// world-readable). The environment is the template's env plus PORT (the
// first port's host port) and PORT_<NAME> for every port, from
// spec.hostPorts (a fixed port missing there uses its template port);
// admission reserves PORT and PORT_* so the two never collide. RenderEnvFile
// writes it, sorted by key, to EnvFilePath(unit) =
// /etc/herd/env/herd-<pod>.env, which the executor writes root-owned with
// mode 0600 (EnvFileMode) before the unit file; the unit names it in
// EnvironmentFile= (without '-': a unit whose file is missing does not
// start). The unit carries no function of the values (a hash of them in a
// world-readable file would let a local user confirm guesses of a weak
// secret): a changed value is a changed spec, which moves
// metadata.generation, which the unit carries in X-Herd-Generation, so Plan
// rewrites both files and restarts. Removing a unit removes its environment
// file.
//
// Each assignment is KEY='value': systemd takes everything up to the next '
// literally (newlines, backslashes, $, ", %), and a ' inside a value is
// written '"'"' (close, a double-quoted ', reopen), which systemd joins into
// the same value. systemd does not expand variables in an environment file.
//
// # Sandbox
//
// A template's sandbox is "default" unless it says "none". The default adds
// NoNewPrivileges=yes, PrivateTmp=yes, ProtectSystem=full,
// ProtectKernelModules, ProtectKernelLogs, ProtectControlGroups,
// ProtectHostname, RestrictSUIDSGID, RestrictRealtime, RestrictNamespaces,
// LockPersonality, PrivateMounts (all yes), a capability bounding set
// without CAP_SYS_BOOT, CAP_SYS_TIME, CAP_WAKE_ALARM, CAP_SYS_PACCT,
// CAP_LINUX_IMMUTABLE, CAP_SYS_TTY_CONFIG, CAP_MAC_*, CAP_AUDIT_CONTROL,
// CAP_AUDIT_READ, CAP_BLOCK_SUSPEND and CAP_LEASE, and SystemCallFilter=~@clock
// @cpu-emulation @debug @module @mount @obsolete @raw-io @reboot @swap with
// SystemCallErrorNumber=EPERM. The process keeps the network, devices
// (GPIO, I2C, SPI, serial) and sysfs, its home and every writable path
// outside /usr, /boot, /efi and /etc; pod files under /etc are written by
// herd, not the process, so ProtectSystem=full does not get in their way.
// ProtectClock= is not used because it implies a device allow-list, nor
// ProtectKernelTunables= because it makes /sys read-only.
// Pod files under /tmp and /var/tmp are refused at admission for sandboxed
// templates (the process would not see them). Options a systemd does not
// know are ignored by it with a warning.
//
// # Devices
//
// A template with devices gets DevicePolicy=closed and one
// "DeviceAllow=PATH rw" per device, in either sandbox: the process may open
// those device nodes and systemd's standard pseudo devices (/dev/null,
// /dev/zero, /dev/full, /dev/random, /dev/urandom, /dev/tty, /dev/ptmx)
// and no other device node, whatever its file permissions say. systemd
// enforces this in the unit's cgroup (the devices controller on cgroup v1
// and hybrid hosts, a BPF device program on v2). A template without
// devices gets neither option and keeps today's access (file permissions
// only). The paths are safe to write unquoted: admission (api.DeviceNode)
// allows only /dev/ followed by a node name of a known class.
//
// PrivateDevices= is never set: it gives the unit a private /dev holding
// only the pseudo devices, so the nodes DeviceAllow= grants would not exist
// in the process's view. DevicePolicy=closed is the part of it herd wants.
//
// No group is added: the process runs as its template's user only (no
// SupplementaryGroups=), so on a board whose node is root:i2c 0660 that user
// must be in group i2c (Raspberry Pi OS puts its first user in gpio, i2c,
// spi, dialout and video), or be root. DeviceAllow= only ever narrows what
// the user may open. docs/security.md says why.
//
// # Credentials
//
// A pod that loads secrets (api.PodSpec.Secrets, which its controller
// fills in) gets one "LoadCredential=<secret>_<key>:PATH" per key
// (Credentials, CredentialPath: CredentialDir/herd-<pod>.<secret>_<key>):
// names and paths only, never a value. The plan's write action lists the
// credentials (Action.Credentials) without their values; the placer fetches
// and writes those (root 0600, the directory root 0700) before the unit.
// ReadMeta reads the paths back from the LoadCredential= lines, so a
// removal deletes exactly the files the unit on the board loads. systemd
// 247 and later copy them to /run/credentials/<unit>/ for the unit's user
// and set $CREDENTIALS_DIRECTORY; exec may name it as
// ${CREDENTIALS_DIRECTORY} (api.ExecVars).
//
// # Quoting
//
// Every ExecStart argument is written as a double-quoted word with C-style
// escapes (api.QuoteUnitWord): `\"`, `\\`, `\n`, `\t`, `\r`, and `\xNN`
// for other control characters. Everything else, Unicode included, is
// written as is. `%` is written `%%` so systemd does not expand specifiers.
//
// In ExecStart systemd also expands environment variables when it starts
// the process. Every `$` is written `$$` (a literal dollar) except a
// `${NAME}` reference whose NAME is a variable herd sets for the pod (see
// api.ExecVars): a key of the pod's env, PORT, or PORT_<NAME> for each port
// (NAME upper case, '-' becoming '_'), and CREDENTIALS_DIRECTORY for a
// template with secrets. Those are left for systemd to expand
// from the environment file, which is what a manifest means by
//
//	exec = ["python3", "-m", "http.server", "${PORT}"]
//
// Anything else is passed literally: `$HOME`, `${HOME}`, `$(reboot)` and
// backticks reach the process byte for byte. Nothing goes through a shell.
// Environment values are never expanded: env = {A = "${PORT}"} gives the
// process the literal text ${PORT}.
//
// Long ExecStart lines are continued over several physical lines at argument
// boundaries. What a unit file cannot carry exactly (an argument whose
// quoted form does not fit on one line of SYSTEMD_LINE_MAX, 2048 bytes, NUL
// bytes, invalid UTF-8, a '$' in exec[0], a working directory with edge
// blanks or a trailing backslash, ...) is refused by api.ValidateRenderable,
// the same rules admission applies (api.Validate), so an admitted pod
// always renders. Rejections are *RenderError values matching
// ErrUnrenderable.
//
// # Plan and fencing
//
// Plan compares the pods placed on one board with the herd-* units observed
// there and returns actions in a fixed order: stale units (not placed here)
// are stopped, disabled and removed first, then new and changed unit files
// are written, systemd is reloaded once, and only then are units enabled and
// started. A board that returns after its pods were replaced elsewhere is
// therefore fenced before it starts anything: the overlap of a stale replica
// with its replacement is bounded by the time the board is unreachable plus
// one executor pass after it comes back. Units are enabled so a rebooted board
// brings its work back on its own, which is why that first pass must stop
// stale units before the board counts as Ready.
//
// Plan's actions carry everything they put on a board: a write carries the
// pod's files (path, content, mode, setuid opt-in) as well as the unit
// file; a write that replaces a unit file, and a removal, carry the paths
// that must stay (every file a pod placed on the board uses), and the
// daemon-reload the units it is for. Only the files an old unit file lists
// are read on the board when the action runs. PlanBoard is the whole plan
// of one pass over a board: Plan, less the units whose files the board
// refused a moment ago, plus the restarts an earlier pass did not get to
// (both remembered by the caller and passed in), or only the take-downs for
// a board that is down (Board.SweepOnly).
//
// # Stopped on disconnect
//
// A board's own agent stops the units whose template has on_disconnect
// stop_after while it is cut off from the servers (package
// agent/disconnect, which reads the policy back with ReadMeta), and marks
// each in DisconnectDir first. The listing reports the mark
// (UnitState.DisconnectMark); a marked unit that is inactive or failed is
// StoppedOnDisconnect, which Plan starts again, whatever its restart policy
// and exit status, if its pod is still placed on the board (a unit whose
// pod was replaced meanwhile is stale and removed like any other).
package units
