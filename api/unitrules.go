package api

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// This file is the one home of the rules a pod must meet to become a
// systemd unit and its environment file: admission (Validate) applies them
// to every template, and the renderer (package units) calls
// ValidateRenderable and QuoteUnitWord, so whatever admission accepts
// renders, and what the renderer would refuse is refused at admission.

// Sandbox levels of PodTemplate.Sandbox.
const (
	// SandboxDefault confines the process with systemd options that
	// ordinary servers tolerate: NoNewPrivileges, PrivateTmp,
	// ProtectSystem=full, ProtectKernel*, ProtectControlGroups, ... (see
	// package units). SetDefaults fills it in.
	SandboxDefault = "default"
	// SandboxNone renders the unit without sandboxing options, for a
	// process that must change the system (write /usr or /etc, load
	// modules, run setuid programs).
	SandboxNone = "none"
)

// Limits of what a unit file and an environment file can carry.
const (
	// MaxUnitLine is the longest physical line of a unit file, without its
	// newline: systemd (and go-systemd's parser) refuse LINE_MAX (2048)
	// bytes without a newline.
	MaxUnitLine = 2047
	// MaxEnvAssignment is the longest KEY=VALUE environment assignment, in
	// bytes: Linux refuses to exec a process with a longer environment
	// string (MAX_ARG_STRLEN, 128 KiB including the terminating NUL).
	MaxEnvAssignment = 128<<10 - 1
	// MaxTemplateBytes bounds a template as stored: its JSON encoding plus
	// that of its labels (copied into each pod's metadata) plus
	// hostPortBytes per port (each pod's spec.hostPorts). A pod's bind is
	// one Raft transaction holding the pod twice (spec update and status
	// update), and a transaction holds at most MaxBindTxnBytes; the rest
	// of the pod (metadata, owner, node, status, conditions) gets
	// podOverheadBytes. 2×(448 KiB+16 KiB) fits in 1 MiB with room to
	// spare.
	MaxTemplateBytes = 448 << 10
	// MaxBindTxnBytes is the Raft transaction limit the template budget is
	// computed for: raftstore's default MaxTxnBytes (1 MiB).
	MaxBindTxnBytes = 1 << 20

	hostPortBytes    = 80       // `"<63-char name>":65535,`
	podOverheadBytes = 16 << 10 // a pod's JSON outside its template
)

// execStartWordMax is the longest quoted ExecStart= word: alone on its line
// after "ExecStart=" and before a " \" continuation.
const execStartWordMax = MaxUnitLine - len("ExecStart=") - len(" \\")

// filesWordMax is the same for X-Herd-Files=, the unit's list of pod files.
const filesWordMax = MaxUnitLine - len("X-Herd-Files=") - len(" \\")

// UnitQuoting says which systemd expansions QuoteUnitWord defeats.
type UnitQuoting struct {
	// Percent writes % as %% (specifier expansion).
	Percent bool
	// Dollar writes $ as $$ (ExecStart= variable expansion), except a
	// ${NAME} reference whose NAME is in Vars, which is left for systemd
	// to expand.
	Dollar bool
	Vars   map[string]bool
}

// QuoteUnitWord returns s as one double-quoted systemd word with C-style
// escapes: `\"`, `\\`, `\n`, `\t`, `\r` and `\xNN` for other control
// characters; everything else (Unicode included) as is, with % and $
// handled as q says.
func QuoteUnitWord(s string, q UnitQuoting) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case c == '%' && q.Percent:
			b.WriteString("%%")
		case c == '$' && q.Dollar:
			if n := varRef(s[i:]); n > 0 && q.Vars[s[i+2:i+n-1]] {
				b.WriteString(s[i : i+n])
				i += n - 1
				continue
			}
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// varRef returns the length of the ${NAME} reference s starts with, or 0.
func varRef(s string) int {
	if !strings.HasPrefix(s, "${") {
		return 0
	}
	end := strings.IndexByte(s, '}')
	if end < 0 || !isEnvKey(s[2:end]) {
		return 0
	}
	return end + 1
}

// ExecVars returns the variables systemd may expand in a template's exec:
// every env key, and PORT and PORT_<NAME> when the template has ports
// (named as SetDefaults names them). A ${NAME} in exec with NAME among them
// is expanded by systemd when the process starts; every other $ is passed
// literally.
func ExecVars(t *PodTemplate) map[string]bool {
	vars := make(map[string]bool, len(t.Env)+len(t.Ports)+1)
	for k := range t.Env {
		vars[k] = true
	}
	if len(t.Secrets) > 0 {
		vars[CredentialsDirVar] = true
	}
	for i := range t.Ports {
		vars[PortEnvName(t.PortName(i))] = true
		if i == 0 {
			vars[reservedEnvPort] = true
		}
	}
	return vars
}

// ExecQuoting is how the renderer quotes the words of t's exec.
func ExecQuoting(t *PodTemplate) UnitQuoting {
	return UnitQuoting{Percent: true, Dollar: true, Vars: ExecVars(t)}
}

// TemplateBytes is the size of t as the template budget counts it (see
// MaxTemplateBytes).
func TemplateBytes(t *PodTemplate) int {
	b, err := json.Marshal(t)
	if err != nil {
		panic("api: TemplateBytes: " + err.Error()) // strings, ints, maps and slices only
	}
	l, _ := json.Marshal(t.Labels)
	return len(b) + len(l) + hostPortBytes*len(t.Ports)
}

// ValidateRenderable checks what a pod needs to be written as a systemd
// unit and environment file on its node: the unit rules of Validate (name,
// owner, revision, exec, env, user, working directory, files, artifacts,
// devices, ports, resource limits, restart policy, sandbox, on-disconnect
// policy) plus a host port, 1-65535, for every port that has no fixed one,
// and every secret it loads found when it was made (api.MissingSecrets).
// It validates a defaulted copy, as Validate does. Package units calls it
// before rendering.
func ValidateRenderable(p *Pod) error {
	return validateUnit(p, true)
}

// ValidateBindable checks what a pending pod needs to be bound: the unit
// rules of ValidateRenderable except the host ports (the bind assigns
// them), and the template budget (MaxTemplateBytes). The scheduler calls it
// before placing a pod, so a pod stored before a rule existed gets a clear
// condition instead of a bind that fails or a unit that cannot be written.
func ValidateBindable(p *Pod) error {
	return validateUnit(p, false)
}

func validateUnit(p *Pod, placed bool) error {
	if p == nil {
		return FieldErrors{{Field: "pod", Message: "no pod"}}
	}
	c := cloneObject(p).(*Pod)
	SetDefaults(c)
	v := &validator{}
	root := fieldPath(nil)
	v.name(root.field("metadata", "").field("name", "name"), c.Metadata.Name)
	spec := root.field("spec", "")
	v.podSpec(spec, &c.Spec)
	tp := spec.field("template", "template")
	v.unitTemplate(tp, &c.Spec.Template)
	v.hostPorts(spec.field("hostPorts", "-"), &c.Spec, placed)
	if !placed {
		v.templateBudget(tp, &c.Spec.Template)
	}
	if placed {
		// A unit without the credentials its process expects must not
		// run (a daemon's pod is bound to its board from the start).
		for i, r := range c.Spec.Secrets {
			if r.Version == "" {
				v.addf(spec.field("secrets", "-").index(i), "secret %q did not exist when the pod was made: the pod is replaced once it does", r.Name)
			}
		}
	}
	if len(v.probs) == 0 {
		return nil
	}
	obj := ObjectRef(KindPod, p.Metadata.Name)
	errs := make(FieldErrors, len(v.probs))
	for i, pr := range v.probs {
		errs[i] = FieldError{Object: obj, Field: pr.path.String(), Message: pr.msg}
	}
	return errs
}

// podSpec checks what a pod's spec holds besides its template: the owner
// and revision the controllers set (they reach the unit file).
func (v *validator) podSpec(p fieldPath, s *PodSpec) {
	op := p.field("owner", "-")
	if s.Owner.Kind != "" || s.Owner.Name != "" {
		switch s.Owner.Kind {
		case KindDeployment, KindDaemon, KindJob:
		default:
			v.addf(op.field("kind", "-"), "%q: a pod is owned by deployments, daemons or jobs", s.Owner.Kind)
		}
		if msg := nameProblem(s.Owner.Name); msg != "" {
			v.addf(op.field("name", "-"), "%q is not a valid name: %s", s.Owner.Name, msg)
		}
	}
	if r := s.Revision; r != "" {
		ok := len(r) <= 256
		for i := 0; ok && i < len(r); i++ {
			c := r[i]
			ok = c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '\\'
		}
		if !ok {
			v.addf(p.field("revision", "-"), "%q: must be at most 256 printable ASCII characters without spaces, quotes or backslashes", r)
		}
	}
	v.podSecrets(p.field("secrets", "-"), s.Secrets)
}

// hostPorts checks a pod's assigned host ports: 1-65535, for ports of the
// template; with placed, every port without a fixed one needs one.
func (v *validator) hostPorts(p fieldPath, s *PodSpec, placed bool) {
	names := make(map[string]bool, len(s.Template.Ports))
	for _, pt := range s.Template.Ports {
		names[pt.Name] = true
		if _, ok := s.HostPorts[pt.Name]; !ok && pt.Port == 0 && placed {
			v.addf(p.key(pt.Name), "no host port assigned to dynamic port %q", pt.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.HostPorts)) {
		hp := s.HostPorts[k]
		switch {
		case !names[k]:
			v.addf(p.key(k), "no port named %q in the template", k)
		case hp < 1 || hp > MaxPort:
			v.addf(p.key(k), "host port %d is outside 1-%d", hp, MaxPort)
		}
	}
}

// unitTemplate checks the parts of a template that reach the unit file
// and the environment file.
func (v *validator) unitTemplate(p fieldPath, t *PodTemplate) (portNames map[string]bool) {
	v.argv(p.field("exec", "exec"), t.Exec, true)
	v.execUnit(p.field("exec", "exec"), t)
	v.env(p.field("env", "env"), t.Env)
	if t.WorkingDir != "" {
		v.workingDir(p.field("workingDir", "working_dir"), t.WorkingDir)
	}
	if t.User != "" {
		v.user(p.field("user", "user"), t.User)
	}
	v.files(p.field("files", "files"), t.Files, t.Sandbox)
	v.artifacts(p.field("artifacts", "artifacts"), t)
	v.devices(p.field("devices", "devices"), t.Devices)
	v.templateSecrets(p.field("secrets", "secrets"), t.Secrets)
	portNames = v.ports(p.field("ports", "ports"), t.Ports)
	v.resources(p.field("resources", "resources"), t.Resources, false)
	switch t.RestartPolicy {
	case RestartAlways, RestartOnFailure, RestartNever:
	default:
		v.addf(p.field("restartPolicy", "restart"), "%q: must be always, on-failure or never", t.RestartPolicy)
	}
	switch t.Sandbox {
	case SandboxDefault, SandboxNone:
	default:
		v.addf(p.field("sandbox", "sandbox"), "%q: must be %q or %q", t.Sandbox, SandboxDefault, SandboxNone)
	}
	v.onDisconnect(p.field("onDisconnect", "on_disconnect"), t.OnDisconnect)
	return portNames
}

// execUnit checks what ExecStart= needs beyond argv: a program path
// systemd takes as written, and words that fit on a unit file line.
func (v *validator) execUnit(p fieldPath, t *PodTemplate) {
	if len(t.Exec) == 0 {
		return // reported by argv
	}
	cmd := t.Exec[0]
	switch {
	case strings.HasPrefix(cmd, "|"):
		v.addf(p.index(0), "%q: the command must not start with '|' (systemd reads it as a flag)", cmd)
	case strings.Contains(cmd, "$"):
		v.addf(p.index(0), "%q: the command must not contain '$': systemd does not expand variables in the program path", cmd)
	case cmd == "." || cmd == "..":
		v.addf(p.index(0), "%q: the command must be an absolute path or a bare command name", cmd)
	}
	q := ExecQuoting(t)
	for i, a := range t.Exec {
		if n := len(QuoteUnitWord(a, q)); n > execStartWordMax {
			v.addf(p.index(i), "is %d bytes once quoted for systemd; an argument may take at most %d (one unit file line)", n, execStartWordMax)
		}
	}
}

// workingDir checks WorkingDirectory=, which systemd takes verbatim (no
// quoting): an absolute, clean path without leading or trailing blanks, a
// trailing backslash or control characters, that fits on one line.
func (v *validator) workingDir(p fieldPath, dir string) {
	if !v.absPath(p, dir) {
		return
	}
	switch {
	case strings.TrimSpace(dir) != dir:
		v.addf(p, "%q: must not start or end with a blank", dir)
	case strings.HasSuffix(dir, `\`):
		v.addf(p, "%q: must not end with a backslash (systemd would read it as a line continuation)", dir)
	case strings.IndexFunc(dir, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		v.addf(p, "%q: must not contain control characters", dir)
	case len("WorkingDirectory=")+len(dir)+strings.Count(dir, "%") > MaxUnitLine:
		v.addf(p, "is %d bytes; a unit file line holds at most %d", len(dir)+strings.Count(dir, "%"), MaxUnitLine-len("WorkingDirectory="))
	}
}

// templateBudget checks that a pod made from t can be bound (see
// MaxTemplateBytes).
func (v *validator) templateBudget(p fieldPath, t *PodTemplate) {
	if n := TemplateBytes(t); n > MaxTemplateBytes {
		v.addf(p, "takes %d bytes as stored; a template may take at most %d, so that binding a pod made from it (the pod twice, spec and status) fits in one Raft transaction of %d bytes", n, MaxTemplateBytes, MaxBindTxnBytes)
	}
}

// Unit names: a pod's systemd unit is UnitPrefix + pod name + UnitSuffix.
const (
	UnitPrefix = "herd-"
	UnitSuffix = ".service"
)

// UnitName returns the systemd unit of a pod: herd-<pod>.service. Pod
// names are never reused (see DeploymentStatus.PodsCreated), so the unit
// names one incarnation of one pod.
func UnitName(pod string) string { return UnitPrefix + pod + UnitSuffix }

// PodFromUnitName returns the pod name inside a unit name made by
// UnitName, and false when name is not a herd unit name (wrong prefix or
// suffix, or a pod part that is not a valid name).
func PodFromUnitName(unit string) (string, bool) {
	pod, ok := strings.CutPrefix(unit, UnitPrefix)
	if !ok {
		return "", false
	}
	pod, ok = strings.CutSuffix(pod, UnitSuffix)
	if !ok || ValidateName(pod) != nil {
		return "", false
	}
	return pod, true
}
