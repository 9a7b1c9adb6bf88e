package units

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/artifact"
)

const (
	envSuffix = ".env"

	// EnvDir is the directory of the pods' environment files on a board
	// (root-owned, 0700; each file root-owned, 0600).
	EnvDir = "/etc/herd/env"

	// Section names.
	sectionUnit    = "Unit"
	sectionService = "Service"
	sectionInstall = "Install"

	// Keys herd keeps its bookkeeping in. systemd ignores keys starting
	// with "X-" in every section.
	keyPod        = "X-Herd-Pod"
	keyOwner      = "X-Herd-Owner"
	keyRevision   = "X-Herd-Revision"
	keyGeneration = "X-Herd-Generation"
	keyFiles      = "X-Herd-Files"
	// keyStopAfter holds the template's on_disconnect stop_after (as
	// stored, api.ParseStopAfter reads it); no key means "keep".
	keyStopAfter = "X-Herd-Disconnect-Stop-After"

	// envPort is the variable holding the first port's host port;
	// api.PortEnvName(NAME) holds each named port's.
	envPort = "PORT"
)

// ErrUnrenderable is matched (errors.Is) by every error Render returns for a
// pod that cannot be written exactly as a unit file.
var ErrUnrenderable = errors.New("units: pod cannot be rendered as a systemd unit")

// RenderError says which field of which pod cannot be rendered and why. It
// matches ErrUnrenderable.
type RenderError struct {
	// Pod is the pod's name as given (possibly invalid).
	Pod string
	// Field is the path of the offending field, e.g. "spec.template.exec[2]".
	Field string
	// Reason says what is wrong, e.g. "contains a NUL byte".
	Reason string
}

// Error implements error.
func (e *RenderError) Error() string {
	return fmt.Sprintf("units: pod %q: %s: %s", e.Pod, e.Field, e.Reason)
}

// Unwrap returns ErrUnrenderable.
func (e *RenderError) Unwrap() error { return ErrUnrenderable }

// EnvFilePath returns where the environment file of a unit lives on a
// board: EnvDir/herd-<pod>.env for unit herd-<pod>.service.
func EnvFilePath(unit string) string {
	return EnvDir + "/" + strings.TrimSuffix(unit, api.UnitSuffix) + envSuffix
}

// IsHerdUnit reports whether name is a unit name herd manages.
func IsHerdUnit(name string) bool {
	_, ok := api.PodFromUnitName(name)
	return ok
}

// Render returns the unit file of a pod: RenderOptions serialized by
// go-systemd. The same pod always gives the same bytes. Errors are
// *RenderError.
func Render(p *api.Pod) ([]byte, error) {
	opts, err := RenderOptions(p)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(unit.Serialize(opts))
}

// RenderEnvFile returns the environment file of a pod (EnvironmentFile=
// syntax; see the package documentation). The same pod always gives the
// same bytes. Errors are *RenderError.
func RenderEnvFile(p *api.Pod) ([]byte, error) {
	if err := check(p); err != nil {
		return nil, err
	}
	return envFile(environment(p)), nil
}

// RenderOptions returns the options of a pod's unit file in file order. See
// the package documentation for what goes in and how values are quoted.
// Errors are *RenderError.
func RenderOptions(p *api.Pod) ([]*unit.UnitOption, error) {
	if err := check(p); err != nil {
		return nil, err
	}
	r := &renderer{pod: p.Metadata.Name}
	return r.render(p), nil
}

// check runs api.ValidateRenderable, the one home of the rules a pod must
// meet to be rendered, and turns its first problem into a *RenderError.
func check(p *api.Pod) error {
	if p == nil {
		return &RenderError{Field: "pod", Reason: "is nil"}
	}
	err := api.ValidateRenderable(p)
	if err == nil {
		return nil
	}
	var fes api.FieldErrors
	if !errors.As(err, &fes) || len(fes) == 0 {
		return &RenderError{Pod: p.Metadata.Name, Field: "pod", Reason: err.Error()}
	}
	reason := fes[0].Message
	if len(fes) > 1 {
		reason += fmt.Sprintf(" (and %d more problems)", len(fes)-1)
	}
	return &RenderError{Pod: p.Metadata.Name, Field: fes[0].Field, Reason: reason}
}

// renderer holds what the steps of one rendering share.
type renderer struct {
	pod  string
	opts []*unit.UnitOption
}

func (r *renderer) add(section, name, value string) {
	r.opts = append(r.opts, unit.NewUnitOption(section, name, value))
}

// sandboxOptions are the [Service] options of api.SandboxDefault, in file
// order: what ordinary servers and board hardware tolerate. They may still
// bind any port the user may bind, use any socket family (Bluetooth and
// raw sockets included), reach devices (GPIO, I2C, SPI, serial) and sysfs
// (LEDs, PWM, GPIO through /sys), write outside /usr, /boot, /efi and /etc,
// read and write their home, and run JITs; they may not gain privileges
// (setuid programs, file capabilities), see the host's /tmp, load kernel
// modules, read the kernel log, write cgroups, set the clock or the host
// name, create namespaces or setuid files, or make the denied system calls
// (which fail with EPERM). ProtectClock= and ProtectKernelTunables= are
// left out on purpose: the first implies a device allow-list (DeviceAllow=
// char-rtc), which would cut a pod off from GPIO and serial devices (the
// @clock filter denies setting the clock instead); the second makes /sys
// read-only, which breaks LEDs, PWM and sysfs GPIO. The package
// documentation lists them for users.
var sandboxOptions = [][2]string{
	{"NoNewPrivileges", "yes"},
	{"PrivateTmp", "yes"},
	{"ProtectSystem", "full"},
	{"ProtectKernelModules", "yes"},
	{"ProtectKernelLogs", "yes"},
	{"ProtectControlGroups", "yes"},
	{"ProtectHostname", "yes"},
	{"RestrictSUIDSGID", "yes"},
	{"RestrictRealtime", "yes"},
	{"RestrictNamespaces", "yes"},
	{"LockPersonality", "yes"},
	{"PrivateMounts", "yes"},
	{"CapabilityBoundingSet", "~CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM CAP_SYS_PACCT CAP_LINUX_IMMUTABLE CAP_SYS_TTY_CONFIG CAP_MAC_ADMIN CAP_MAC_OVERRIDE CAP_AUDIT_CONTROL CAP_AUDIT_READ CAP_BLOCK_SUSPEND CAP_LEASE"},
	{"SystemCallFilter", "~@clock @cpu-emulation @debug @module @mount @obsolete @raw-io @reboot @swap"},
	{"SystemCallErrorNumber", "EPERM"},
}

// render writes the options of a pod that passed check.
func (r *renderer) render(p *api.Pod) []*unit.UnitOption {
	restart := restartValue(p.Spec.Template.RestartPolicy)
	r.unitSection(p, restart)
	r.serviceSection(p, restart)
	// [Install]: a job's run is not enabled (a reboot does not run it
	// again; a scheduled one is installed through its timer).
	if !p.Spec.RunsToCompletion() {
		r.add(sectionInstall, "WantedBy", "multi-user.target")
	}
	return r.opts
}

// unitSection writes the [Unit] options: the description (with the
// owner), the ordering after the network, no start rate limit for a unit
// that restarts, and herd's bookkeeping keys.
func (r *renderer) unitSection(p *api.Pod, restart string) {
	t := &p.Spec.Template
	desc := "herd pod " + p.Metadata.Name
	owner := ""
	if p.Spec.Owner.Kind != "" || p.Spec.Owner.Name != "" {
		owner = string(p.Spec.Owner.Kind) + "/" + p.Spec.Owner.Name
		desc += " (" + owner + ")"
	}
	r.add(sectionUnit, "Description", desc)
	r.add(sectionUnit, "After", "network-online.target")
	r.add(sectionUnit, "Wants", "network-online.target")
	if restart != "no" {
		// Never give up restarting: the controller, not systemd's start
		// rate limit, decides when a crash-looping pod has failed.
		r.add(sectionUnit, "StartLimitIntervalSec", "0")
	}
	r.add(sectionUnit, keyPod, p.Metadata.Name)
	if owner != "" {
		r.add(sectionUnit, keyOwner, owner)
	}
	if rev := p.Spec.Revision; rev != "" {
		r.add(sectionUnit, keyRevision, rev)
	}
	r.add(sectionUnit, keyGeneration, strconv.FormatInt(p.Metadata.Generation, 10))
	if words := fileWords(p); words != nil {
		r.add(sectionUnit, keyFiles, joinWords(keyFiles, words))
	}
	if o := t.OnDisconnect; o != nil {
		r.add(sectionUnit, keyStopAfter, o.StopAfter)
	}
}

// fileWords are the quoted paths of keyFiles: what is written or placed
// on the board for a pod and removed with its unit, in file order. nil
// means the pod has none and its unit no keyFiles.
func fileWords(p *api.Pod) []string {
	t := &p.Spec.Template
	kicks := p.Spec.ReplacesRuns() || p.Spec.OverlapsRuns()
	if len(t.Files)+len(t.Artifacts) == 0 && !kicks {
		return nil
	}
	words := make([]string, 0, len(t.Files)+len(t.Artifacts)+2)
	for _, f := range t.Files {
		words = append(words, api.QuoteUnitWord(f.Path, api.UnitQuoting{}))
	}
	// An overlapping job's template and the kick unit of a replacing
	// or overlapping job are written and removed like files of the
	// pod.
	if p.Spec.OverlapsRuns() {
		words = append(words, api.QuoteUnitWord(TemplatePath(p.Metadata.Name), api.UnitQuoting{}))
	}
	if kicks {
		words = append(words, api.QuoteUnitWord(KickPath(p.Metadata.Name), api.UnitQuoting{}))
	}
	// Artifacts are placed by the board, but removed with the unit
	// like the files.
	for _, a := range t.Artifacts {
		words = append(words, api.QuoteUnitWord(a.Path, api.UnitQuoting{}))
	}
	return words
}

// serviceSection writes the [Service] options: a job's unit that stays
// loaded after its run, the fetch of the artifacts, the pod's process,
// restarts and stops, and the sandbox unless the template turns it off.
func (r *renderer) serviceSection(p *api.Pod, restart string) {
	t := &p.Spec.Template
	r.add(sectionService, "Type", "exec")
	if p.Spec.RunsToCompletion() && !p.Spec.Scheduled() {
		// A run-once job's unit stays active (exited) after exit 0:
		// systemd would otherwise unload the finished, unreferenced unit
		// and forget its run (status, times) before herd reads it, and
		// the plan would take it for never started.
		r.add(sectionService, "RemainAfterExit", "yes")
	}
	if p.Spec.OverlapsRuns() {
		// The same for every run of an overlapping job, an instance of
		// this unit as a template: a finished instance stays loaded
		// (active (exited), or failed) with its run's status and times
		// until the plan clears it (see Plan), instead of being
		// unloaded by systemd before herd has read it.
		r.add(sectionService, "RemainAfterExit", "yes")
	}
	if len(t.Artifacts) > 0 {
		r.artifacts(p)
	}
	r.process(p)
	r.add(sectionService, "Restart", restart)
	r.add(sectionService, "RestartSec", "1")
	r.add(sectionService, "KillMode", "mixed")
	r.add(sectionService, "TimeoutStopSec", "10")
	r.add(sectionService, "SyslogIdentifier", p.Metadata.Name)
	if t.Sandbox != api.SandboxNone {
		for _, o := range sandboxOptions {
			r.add(sectionService, o[0], o[1])
		}
	}
}

// process writes the [Service] options of the pod's process: its
// command, environment file and credentials, user and working directory,
// memory and CPU limits, and the devices it may use.
func (r *renderer) process(p *api.Pod) {
	t := &p.Spec.Template
	q := api.ExecQuoting(t)
	words := make([]string, 0, len(t.Exec))
	for _, a := range t.Exec {
		words = append(words, api.QuoteUnitWord(a, q))
	}
	r.add(sectionService, "ExecStart", joinWords("ExecStart", words))
	r.add(sectionService, "EnvironmentFile", EnvFilePath(api.UnitName(p.Metadata.Name)))
	// Names and paths only: the values are in the files, written by the
	// placer (0600 root), never in the unit.
	for _, c := range Credentials(p) {
		r.add(sectionService, "LoadCredential", c.ID()+":"+CredentialPath(api.UnitName(p.Metadata.Name), c.ID()))
	}
	if t.User != "" {
		r.add(sectionService, "User", t.User)
	}
	if t.WorkingDir != "" {
		r.add(sectionService, "WorkingDirectory", strings.ReplaceAll(t.WorkingDir, "%", "%%"))
	}
	if v := t.Resources.MemoryLimit; v != "" {
		r.add(sectionService, "MemoryMax", v)
	}
	if v := t.Resources.CPULimit; v != "" {
		r.add(sectionService, "CPUQuota", v)
	}
	if len(t.Devices) > 0 {
		// The devices the template names and the pseudo devices
		// (/dev/null, /dev/zero, /dev/urandom...), nothing else; in
		// either sandbox. See the package documentation.
		r.add(sectionService, "DevicePolicy", "closed")
		for _, d := range t.Devices {
			r.add(sectionService, "DeviceAllow", d+" rw")
		}
	}
}

// KickDir is where a replacing or overlapping job's kick unit
// (api.KickUnitName) and an overlapping job's service template
// (api.TemplateUnitName) are written: systemd's directory for the
// administrator's units.
const KickDir = "/etc/systemd/system"

// KickPath is the file of a pod's kick unit.
func KickPath(pod string) string { return KickDir + "/" + api.KickUnitName(pod) }

// TemplatePath is the file of an overlapping job pod's service template,
// herd-<pod>@.service: the same bytes as its unit file (Render), so every
// run has the pod's sandbox, user, environment file, credentials and
// devices.
func TemplatePath(pod string) string { return KickDir + "/" + api.TemplateUnitName(pod) }

// RenderKick returns the kick unit of a scheduled job's pod with
// concurrency replace or allow: the unit its timer starts, a oneshot whose
// one command does not wait for the run. With replace it restarts the
// pod's service (`systemctl restart --no-block -- herd-<pod>.service`: a
// running run is stopped, then the new one starts; a stopped or failed
// service just starts). With allow it starts a new instance of the pod's
// template (`systemctl start --no-block --
// herd-<pod>@${INVOCATION_ID}.service`): systemd puts the kick's own
// invocation id, 32 hex digits fresh at every start, in the name, so
// every run is a unit of its own and a run still going is left alone. The
// command is a constant but for the pod's name, which admission
// restricts to [a-z0-9-]; no shell.
func RenderKick(p *api.Pod) ([]byte, error) {
	if err := check(p); err != nil {
		return nil, err
	}
	name := p.Metadata.Name
	var desc, cmd string
	switch {
	case p.Spec.ReplacesRuns():
		desc = "herd: a new run of pod " + name + ", replacing a running one"
		cmd = "systemctl restart --no-block -- " + api.UnitName(name)
	case p.Spec.OverlapsRuns():
		desc = "herd: a new run of pod " + name + ", beside any running one"
		cmd = "systemctl start --no-block -- " + api.InstanceUnitName(name, "${"+invocationIDVar+"}")
	default:
		return nil, &RenderError{Pod: name, Field: "spec.concurrency", Reason: "not a scheduled job's pod with concurrency replace or allow"}
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption(sectionUnit, "Description", desc),
		unit.NewUnitOption(sectionUnit, keyPod, name),
		unit.NewUnitOption(sectionService, "Type", "oneshot"),
		unit.NewUnitOption(sectionService, "ExecStart", cmd),
	}
	return io.ReadAll(unit.Serialize(opts))
}

// invocationIDVar is the variable systemd sets to a unit's invocation id
// (128 random bits as 32 lower-case hex digits) and expands in ExecStart=.
const invocationIDVar = "INVOCATION_ID"

// Timer names the section of a timer unit.
const sectionTimer = "Timer"

// RenderTimer returns the timer unit of a scheduled job's pod
// (api.TimerName, beside its service): OnCalendar= the pod's schedule,
// Unit= its service, AccuracySec=1s (systemd's default of a minute would
// shift every run by up to a minute), no Persistent= (runs missed while
// no board held the job are not caught up), WantedBy=timers.target. Errors
// are *RenderError: the pod must render (check) and be scheduled.
func RenderTimer(p *api.Pod) ([]byte, error) {
	if err := check(p); err != nil {
		return nil, err
	}
	if !p.Spec.Scheduled() {
		return nil, &RenderError{Pod: p.Metadata.Name, Field: "spec.schedule", Reason: "not a scheduled job's pod"}
	}
	name := p.Metadata.Name
	target := api.UnitName(name)
	if p.Spec.ReplacesRuns() || p.Spec.OverlapsRuns() {
		target = api.KickUnitName(name)
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption(sectionUnit, "Description", "herd timer of pod "+name+" ("+string(p.Spec.Owner.Kind)+"/"+p.Spec.Owner.Name+")"),
		unit.NewUnitOption(sectionUnit, keyPod, name),
		unit.NewUnitOption(sectionTimer, "OnCalendar", p.Spec.Schedule),
		unit.NewUnitOption(sectionTimer, "Unit", target),
		unit.NewUnitOption(sectionTimer, "AccuracySec", "1s"),
		unit.NewUnitOption(sectionInstall, "WantedBy", "timers.target"),
	}
	return io.ReadAll(unit.Serialize(opts))
}

// artifacts adds the step that places the pod's artifacts before its
// process starts: `herd artifact fetch` (artifact.Argv) as root ('+', so a
// pod with a user and the sandbox options do not apply to it), and a
// start timeout that leaves each artifact its download deadline and one
// backoff wait.
func (r *renderer) artifacts(p *api.Pod) {
	argv := artifact.Argv(api.UnitName(p.Metadata.Name), p.Spec.Template.Artifacts)
	words := make([]string, 0, len(argv))
	// The program is a constant path; '+' must precede it unquoted.
	words = append(words, "+"+argv[0])
	for _, a := range argv[1:] {
		words = append(words, api.QuoteUnitWord(a, api.ArtifactQuoting()))
	}
	r.add(sectionService, "ExecStartPre", joinWords("ExecStartPre", words))
	per := artifact.FetchTimeout + artifact.MaxWait
	timeout := time.Duration(len(p.Spec.Template.Artifacts))*per + 30*time.Second
	r.add(sectionService, "TimeoutStartSec", strconv.Itoa(int(timeout/time.Second)))
}

// restartValue maps a restart policy (checked) to systemd's Restart= value.
func restartValue(p api.RestartPolicy) string {
	switch p {
	case api.RestartOnFailure:
		return "on-failure"
	case api.RestartNever:
		return "no"
	}
	return "always"
}

// envVar is one environment variable.
type envVar struct{ key, value string }

// environment returns the process environment of a checked pod, sorted by
// key: the template's env plus PORT and PORT_<NAME> from the pod's ports
// (spec.hostPorts, or the fixed port). Admission reserves PORT and PORT_*,
// so the two never collide.
func environment(p *api.Pod) []envVar {
	t := &p.Spec.Template
	vars := make(map[string]string, len(t.Env)+len(t.Ports)+1)
	for k, v := range t.Env {
		vars[k] = v
	}
	for i, port := range t.Ports {
		name := t.PortName(i)
		host, ok := p.Spec.HostPorts[name]
		if !ok {
			host = port.Port
		}
		value := strconv.Itoa(host)
		vars[api.PortEnvName(name)] = value
		if i == 0 {
			vars[envPort] = value
		}
	}
	out := make([]envVar, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, envVar{k, vars[k]})
	}
	return out
}

// envFile writes env in systemd's EnvironmentFile= syntax: one KEY='value'
// per variable, each value single-quoted (systemd takes everything up to
// the next ' literally: newlines, backslashes, $ and quotes), a ' inside a
// value written as '"'"' (close, a double-quoted ', reopen), which
// systemd's parser joins into one value.
func envFile(env []envVar) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by herd. Do not edit: herd rewrites it.\n")
	for _, kv := range env {
		b.WriteString(kv.key)
		b.WriteString("='")
		b.WriteString(strings.ReplaceAll(kv.value, "'", `'"'"'`))
		b.WriteString("'\n")
	}
	return b.Bytes()
}

// joinWords joins quoted words into the value of option name, continuing it
// on further physical lines (a trailing backslash, which systemd reads as a
// space) so no line exceeds api.MaxUnitLine. api.ValidateRenderable has
// checked that every word fits on a line of its own.
func joinWords(name string, words []string) string {
	var b strings.Builder
	line := len(name) + 1
	// Every line but the last ends with " \"; keep room for it.
	const cont = len(" \\")
	for i, w := range words {
		if i > 0 {
			if line+1+len(w)+cont > api.MaxUnitLine {
				b.WriteString(" \\\n")
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// Meta is the bookkeeping herd writes into a unit's X-Herd-* keys.
type Meta struct {
	// Pod is the pod name (X-Herd-Pod).
	Pod string
	// Owner is the pod's owner (X-Herd-Owner=kind/name); zero if none.
	Owner api.OwnerRef
	// Revision is the owner's template revision (X-Herd-Revision).
	Revision string
	// Generation is the pod's metadata.generation (X-Herd-Generation).
	Generation int64
	// Files are the paths of the pod's files on the board (X-Herd-Files),
	// which the executor removes with the unit.
	Files []string
	// Credentials are the credential files the unit loads
	// (LoadCredential= paths under CredentialDir), which the executor
	// removes with the unit.
	Credentials []string
	// OnDisconnect is the template's on_disconnect policy
	// (X-Herd-Disconnect-Stop-After), nil for "keep". Its StopAfter is as
	// written in the file: read it with StopAfterDuration, which also
	// says "keep" for a value that does not parse.
	OnDisconnect *api.OnDisconnect
}

// ReadMeta reads the X-Herd-* keys of a unit file, such as one found on a
// board. A unit without X-Herd-Pod is an error: herd did not write it.
func ReadMeta(r io.Reader) (Meta, error) {
	opts, err := unit.DeserializeOptions(r)
	if err != nil {
		return Meta{}, fmt.Errorf("units: reading unit file: %w", err)
	}
	var m Meta
	for _, o := range opts {
		if o.Section == sectionService && o.Name == "LoadCredential" {
			if _, p, ok := strings.Cut(o.Value, ":"); ok && strings.HasPrefix(p, CredentialDir+"/") {
				m.Credentials = append(m.Credentials, p)
			}
			continue
		}
		if o.Section != sectionUnit {
			continue
		}
		switch o.Name {
		case keyPod:
			m.Pod = o.Value
		case keyOwner:
			kind, name, ok := strings.Cut(o.Value, "/")
			if !ok {
				return Meta{}, fmt.Errorf("units: %s=%q: want kind/name", keyOwner, o.Value)
			}
			m.Owner = api.OwnerRef{Kind: api.Kind(kind), Name: name}
		case keyRevision:
			m.Revision = o.Value
		case keyGeneration:
			g, err := strconv.ParseInt(o.Value, 10, 64)
			if err != nil {
				return Meta{}, fmt.Errorf("units: %s=%q: %w", keyGeneration, o.Value, err)
			}
			m.Generation = g
		case keyFiles:
			files, err := splitQuoted(o.Value)
			if err != nil {
				return Meta{}, fmt.Errorf("units: %s: %w", keyFiles, err)
			}
			m.Files = files
		case keyStopAfter:
			m.OnDisconnect = &api.OnDisconnect{StopAfter: o.Value}
		}
	}
	if m.Pod == "" {
		return Meta{}, fmt.Errorf("units: unit file has no %s key: not written by herd", keyPod)
	}
	return m, nil
}

// splitQuoted splits a value made of words written by quote (without % or $
// escaping), separated by spaces or by line continuations.
func splitQuoted(v string) ([]string, error) {
	var words []string
	for i := 0; i < len(v); {
		switch v[i] {
		case ' ', '\t', '\n':
			i++
			continue
		case '\\':
			if i+1 < len(v) && v[i+1] == '\n' {
				i += 2
				continue
			}
		case '"':
			w, n, err := unquoteWord(v[i:])
			if err != nil {
				return nil, err
			}
			words = append(words, w)
			i += n
			continue
		}
		return nil, fmt.Errorf("unexpected %q at offset %d, want a double-quoted word", v[i], i)
	}
	return words, nil
}

// unquoteWord decodes the double-quoted word s starts with and returns it
// with the number of bytes consumed.
func unquoteWord(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, errors.New("unterminated escape")
			}
			i++
			switch s[i] {
			case '"', '\\':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'x':
				if i+2 >= len(s) {
					return "", 0, errors.New(`short \x escape`)
				}
				n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return "", 0, fmt.Errorf(`bad \x escape %q`, s[i-1:i+3])
				}
				b.WriteByte(byte(n))
				i += 2
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("unterminated double quote")
}
