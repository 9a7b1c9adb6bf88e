// Package units owns the translation between herd pods and systemd service
// units: naming (herd-<pod>.service), rendering a Pod into a unit file with
// go-systemd's unit package, reading herd's bookkeeping back out of a unit
// file, and planning which unit operations bring one board from what it runs
// to what is placed on it. Everything at this level is pure: values in,
// values out, no I/O and no clock. The SSH executor that carries the plan out
// lives in units/sshexec.
//
// # Rendered unit
//
// A pod becomes one unit:
//
//	[Unit]     Description, After/Wants=network-online.target,
//	           StartLimitIntervalSec=0 when systemd restarts the process,
//	           X-Herd-Pod, X-Herd-Owner, X-Herd-Revision, X-Herd-Generation,
//	           X-Herd-Files (systemd ignores keys starting with "X-")
//	[Service]  Type=exec, ExecStart, Environment (one per variable, sorted),
//	           User, WorkingDirectory, MemoryMax, CPUQuota, Restart,
//	           RestartSec=1, KillMode=mixed, TimeoutStopSec=10,
//	           SyslogIdentifier=<pod>
//	[Install]  WantedBy=multi-user.target
//
// The environment is the template's env plus PORT (the first port's host
// port) and PORT_<NAME> for every port, from spec.hostPorts (a fixed port
// missing there uses its template port); herd's port variables win over env
// keys of the same name. StartLimitIntervalSec=0 is set for restart policies
// always and on-failure, so systemd never stops restarting on its own.
//
// Rendering is deterministic: the same pod always yields the same bytes, so
// a hash of the bytes tells whether a board runs the current unit.
//
// Type=exec needs systemd 240; older versions ignore the line with a warning
// and fall back to Type=simple. Exec[0] may be a bare command name: systemd
// 239 and later search PATH for it; older versions need an absolute path.
//
// # Quoting
//
// Every ExecStart argument and every Environment assignment is written as a
// double-quoted word with C-style escapes: `\"`, `\\`, `\n`, `\t`, `\r`, and
// `\xNN` for other control characters. Everything else, Unicode included, is
// written as is. `%` is written `%%` so systemd does not expand specifiers.
//
// In ExecStart (and only there) systemd also expands environment variables
// when it starts the process. Every `$` is written `$$` (a literal dollar)
// except a `${NAME}` reference whose NAME is a variable herd sets in the
// unit: a key of the pod's env, PORT, or PORT_<NAME> for each port (NAME upper
// case, '-' becoming '_'). Those are left for systemd to expand, which is
// what a manifest means by
//
//	exec = ["python3", "-m", "http.server", "${PORT}"]
//
// Anything else is passed literally: `$HOME`, `${HOME}`, `$(reboot)` and
// backticks reach the process byte for byte. Nothing goes through a shell.
// Environment= values are never expanded by systemd, so `$` is written as is
// there: env = {A = "${PORT}"} gives the process the literal text ${PORT}.
//
// Long ExecStart lines are continued over several physical lines at argument
// boundaries; a single argument or assignment whose line would exceed
// SYSTEMD_LINE_MAX (2048 bytes, the limit go-systemd's parser enforces) is
// rejected, as are NUL bytes, invalid UTF-8 and anything else a unit file
// cannot carry exactly. Rejections are *RenderError values matching
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
package units
