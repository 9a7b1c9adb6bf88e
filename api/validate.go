package api

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalid matches (with errors.Is) the FieldErrors that Validate returns.
var ErrInvalid = errors.New("api: invalid object")

// Limits checked by Validate.
const (
	MaxReplicas        = 1000
	MaxUserNameLength  = 32
	MaxFileSize        = 1 << 20 // bytes of content per file
	MaxProbePeriod     = 3600    // seconds
	MaxProbeFailures   = 100     // a readiness check's failure_threshold
	MaxPort            = 65535
	reservedEnvPort    = "PORT"
	reservedEnvPortPfx = "PORT_"
)

// Error renders one problem as "kind/name: field: message".
func (e FieldError) Error() string {
	var b strings.Builder
	if e.Object != "" {
		b.WriteString(e.Object)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// FieldErrors is every problem Validate found with one object, in a stable
// order. It is only ever returned non-empty.
type FieldErrors []FieldError

// Error renders one line per problem.
func (e FieldErrors) Error() string {
	lines := make([]string, len(e))
	for i, fe := range e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e FieldErrors) Is(target error) bool { return target == ErrInvalid }

// PortEnvName is the environment variable that carries the host port of the
// port named name: "PORT_" followed by the name in upper case with '-' as
// '_' ("http-alt" → "PORT_HTTP_ALT"). The first port is also in "PORT".
func PortEnvName(name string) string {
	return reservedEnvPortPfx + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ValidationErrors is Validate as a list of field errors, nil when o is
// valid: what the API answers and what herdctl's dry runs print.
func ValidationErrors(o Object) []FieldError {
	err := Validate(o)
	if err == nil {
		return nil
	}
	var fe FieldErrors
	if errors.As(err, &fe) {
		return fe
	}
	return []FieldError{{Message: err.Error()}}
}

// Validate checks an object against the rules of its kind and returns
// FieldErrors naming every problem, or nil. It validates the object as
// SetDefaults would leave it (on a copy; o is not modified), so it gives the
// same answer before and after defaulting, and rules that involve defaulted
// fields (a deployment's selector must match its template labels) are
// checked on the values that will be stored.
//
// The rules, in short: names are DNS labels; label keys and values are
// restricted (see ValidateLabelKey, ValidateLabelValue); argv, env and paths
// may contain newlines but never NUL and must be valid UTF-8; env keys are
// C identifiers and PORT, PORT_* are reserved; file paths are absolute,
// clean and unique; quantities follow ParseMemory and ParseCPU; ports are
// 0 (pick one) to 65535 with unique DNS-label names; a readiness probe has
// exactly one check; a deployment has 0 to MaxReplicas replicas and a
// non-empty selector matching its template; a service has a selector and
// ports. Templates also pass the rules of a systemd unit (unitrules.go,
// which the renderer applies too through ValidateRenderable): exec[0]
// without '$', words that fit on a unit line, a working directory systemd
// takes verbatim, env assignments Linux can pass, file modes with the
// setuid or setgid bit only with AllowSetID, no files under /tmp for a
// sandboxed template, a known sandbox, at most MaxDevices devices, each
// /dev/ and a node of a DeviceClass, none twice, at most MaxArtifacts
// artifacts with an http(s) URL without credentials, a SHA-256 and a path
// no file, other artifact or herd itself uses, and at most
// MaxTemplateBytes in all
// so every pod made from the template can be bound. A pod's owner,
// revision and host ports are checked too.
func Validate(o Object) error {
	if o == nil {
		return FieldErrors{{Field: "kind", Message: "no object"}}
	}
	probs := validateObject(o)
	if len(probs) == 0 {
		return nil
	}
	obj := ObjectRef(o.GetKind(), o.GetMeta().Name)
	errs := make(FieldErrors, len(probs))
	for i, p := range probs {
		errs[i] = FieldError{Object: obj, Field: p.path.String(), Message: p.msg}
	}
	return errs
}

// validateObject returns the problems with o, with their paths.
func validateObject(o Object) []problem {
	v := &validator{}
	root := fieldPath(nil)
	if k := kindField(o); k != "" && k != o.GetKind() {
		v.addf(root.field("kind", "-"), "is %q but the object is a %s", k, o.GetKind())
	}
	c := cloneObject(o)
	SetDefaults(c)
	meta := root.field("metadata", "")
	spec := root.field("spec", "")
	switch x := c.(type) {
	case *Deployment:
		v.meta(meta, x.Metadata)
		v.deployment(spec, &x.Spec)
	case *Daemon:
		v.meta(meta, x.Metadata)
		v.daemonStrategy(spec.field("strategy", "strategy"), x.Spec.Strategy)
		v.template(spec.field("template", "template"), &x.Spec.Template)
	case *Service:
		v.meta(meta, x.Metadata)
		v.service(spec, &x.Spec)
	case *Job:
		v.meta(meta, x.Metadata)
		v.job(spec, &x.Spec)
	case *Pod:
		v.meta(meta, x.Metadata)
		v.podSpec(spec, &x.Spec)
		v.replaces(spec, &x.Spec)
		v.podSchedule(spec, &x.Spec)
		v.template(spec.field("template", "template"), &x.Spec.Template)
		v.hostPorts(spec.field("hostPorts", "-"), &x.Spec, false)
	case *Node:
		v.nodeName(meta.field("name", "name"), x.Metadata.Name)
		v.labels(meta.field("labels", "labels"), x.Metadata.Labels)
		v.nodeSpec(spec, &x.Spec)
	case *Secret:
		v.meta(meta, x.Metadata)
		v.secret(spec, &x.Spec)
	default:
		v.addf(root.field("kind", "-"), "unknown object type %T", o)
	}
	return v.probs
}

// kindField returns the Kind field stored in the struct.
func kindField(o Object) Kind {
	switch x := o.(type) {
	case *Deployment:
		return x.Kind
	case *Daemon:
		return x.Kind
	case *Service:
		return x.Kind
	case *Job:
		return x.Kind
	case *Pod:
		return x.Kind
	case *Node:
		return x.Kind
	case *Secret:
		return x.Kind
	}
	return ""
}

// ---------------------------------------------------------------------------
// Field paths. A path is kept as segments so that it can be rendered both in
// API terms (spec.template.ports[0].port, for FieldError) and in manifest
// terms (template.ports[0].port, to find the line in a TOML file).

type segKind uint8

const (
	segField segKind = iota
	segIndex
	segKey
)

type pathSeg struct {
	kind segKind
	api  string // field name in JSON/API terms
	toml string // key in manifest terms; "" = not present (flattened); "-" = not in manifests
	idx  int
	key  string
}

type fieldPath []pathSeg

func (p fieldPath) with(s pathSeg) fieldPath {
	return append(p[:len(p):len(p)], s)
}

func (p fieldPath) field(api, toml string) fieldPath {
	return p.with(pathSeg{kind: segField, api: api, toml: toml})
}

func (p fieldPath) index(i int) fieldPath { return p.with(pathSeg{kind: segIndex, idx: i}) }

func (p fieldPath) key(k string) fieldPath { return p.with(pathSeg{kind: segKey, key: k}) }

// String renders the API path: spec.template.env[PORT].
func (p fieldPath) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s.kind {
		case segField:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.api)
		case segIndex:
			b.WriteString("[" + strconv.Itoa(s.idx) + "]")
		case segKey:
			if isPlainMapKey(s.key) {
				b.WriteString("[" + s.key + "]")
			} else {
				b.WriteString("[" + strconv.Quote(s.key) + "]")
			}
		}
	}
	return b.String()
}

// tomlString renders the manifest path relative to the object
// (template.ports[0].port), and reports false when the path leads through a
// field that manifests do not have.
func (p fieldPath) tomlString() (string, bool) {
	var b strings.Builder
	for _, s := range p {
		switch s.kind {
		case segField:
			switch s.toml {
			case "":
				continue
			case "-":
				return b.String(), false
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.toml)
		case segIndex:
			b.WriteString("[" + strconv.Itoa(s.idx) + "]")
		case segKey:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(quoteKey(s.key))
		}
	}
	return b.String(), true
}

func isPlainMapKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(isAlnum(c) || c == '_' || c == '.' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// The validator.

type problem struct {
	path fieldPath
	msg  string
}

type validator struct {
	probs []problem
	// badName is set once the object's name was rejected, to keep quiet
	// about the problems that follow from it (no default labels).
	badName bool
}

func (v *validator) addf(p fieldPath, format string, args ...any) {
	v.probs = append(v.probs, problem{path: p, msg: fmt.Sprintf(format, args...)})
}

func (v *validator) meta(p fieldPath, m ObjectMeta) {
	v.name(p.field("name", "name"), m.Name)
	v.labels(p.field("labels", "labels"), m.Labels)
}

func (v *validator) name(p fieldPath, name string) {
	msg := nameProblem(name)
	switch {
	case msg == "":
		return
	case name == "":
		v.addf(p, "required")
	default:
		v.addf(p, "%q is not a valid name: %s (a DNS label such as \"web-1\")", name, msg)
	}
	v.badName = true
}

// nodeName is looser than name: node names come from host names.
func (v *validator) nodeName(p fieldPath, name string) {
	switch {
	case name == "":
		v.addf(p, "required")
	case len(name) > 253:
		v.addf(p, "at most 253 characters")
	default:
		for i := 0; i < len(name); i++ {
			if !isLabelValueChar(name[i]) {
				v.addf(p, "%q: only letters, digits, '.', '_' and '-' are allowed", name)
				return
			}
		}
		if !isAlnum(name[0]) {
			v.addf(p, "%q: must start with a letter or digit", name)
		}
	}
}

func (v *validator) labels(p fieldPath, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kp := p.key(k)
		if msg := labelKeyProblem(k); msg != "" {
			v.addf(kp, "invalid label key %q: %s", k, msg)
		}
		if msg := labelValueProblem(labels[k]); msg != "" {
			v.addf(kp, "invalid label value %q: %s", labels[k], msg)
		}
	}
}

func (v *validator) selector(p fieldPath, sel map[string]string, what string) {
	if len(sel) == 0 {
		v.addf(p, "required: %s", what)
		return
	}
	v.labels(p, sel)
}

func (v *validator) deployment(p fieldPath, s *DeploymentSpec) {
	if s.Replicas != nil && (*s.Replicas < 0 || *s.Replicas > MaxReplicas) {
		v.addf(p.field("replicas", "replicas"), "must be between 0 and %d, got %d", MaxReplicas, *s.Replicas)
	}
	tp := p.field("template", "template")
	selp := p.field("selector", "selector")
	if len(s.Selector) > 0 || !v.badName {
		v.selector(selp, s.Selector, "the labels of the pods this deployment owns (defaults to the template labels)")
	}
	if len(s.Selector) > 0 && !MatchLabels(s.Selector, s.Template.Labels) {
		v.addf(selp, "selector {%s} does not match the template labels {%s}: the deployment would not own its own pods",
			FormatLabels(s.Selector), FormatLabels(s.Template.Labels))
	}
	sp := p.field("strategy", "strategy")
	surge, unavail := 0, 0
	if s.Strategy.MaxSurge != nil {
		surge = *s.Strategy.MaxSurge
		if surge < 0 || surge > MaxReplicas {
			v.addf(sp.field("maxSurge", "max_surge"), "must be between 0 and %d, got %d", MaxReplicas, surge)
		}
	}
	if s.Strategy.MaxUnavailable != nil {
		unavail = *s.Strategy.MaxUnavailable
		if unavail < 0 || unavail > MaxReplicas {
			v.addf(sp.field("maxUnavailable", "max_unavailable"), "must be between 0 and %d, got %d", MaxReplicas, unavail)
		}
	}
	if surge == 0 && unavail == 0 {
		v.addf(sp, "max_surge and max_unavailable cannot both be 0: a rollout could never make progress")
	}
	v.rebalance(p, s.Rebalance)
	v.template(tp, &s.Template)
}

// daemonStrategy checks a daemon's max_unavailable: at least 1, or the
// rollout could never replace a pod.
func (v *validator) daemonStrategy(p fieldPath, s DaemonStrategy) {
	if s.MaxUnavailable != nil && (*s.MaxUnavailable < 1 || *s.MaxUnavailable > MaxReplicas) {
		v.addf(p.field("maxUnavailable", "max_unavailable"), "must be between 1 and %d, got %d (boards replaced at once during a rollout)", MaxReplicas, *s.MaxUnavailable)
	}
}

func (v *validator) service(p fieldPath, s *ServiceSpec) {
	v.selector(p.field("selector", "selector"), s.Selector, "the labels of the pods behind this service")
	pp := p.field("ports", "ports")
	if len(s.Ports) == 0 {
		v.addf(pp, "required: at least one port, e.g. [[service.ports]] target = \"http\"")
	}
	seen := map[string]int{}
	proxies := map[ProxyPort]int{}
	for i, sp := range s.Ports {
		ip := pp.index(i)
		if sp.Target == "" {
			v.addf(ip.field("target", "target"), "required: the pod port name or number to expose")
		} else if msg := portRefProblem(sp.Target); msg != "" {
			v.addf(ip.field("target", "target"), "%s", msg)
		}
		v.proxyPort(ip, sp, proxies, i)
		np := ip.field("name", "name")
		if sp.Name == "" {
			continue // Target is empty too; reported above
		}
		if msg := nameProblem(sp.Name); msg != "" {
			v.addf(np, "%q is not a valid port name: %s", sp.Name, msg)
		} else if j, dup := seen[sp.Name]; dup {
			v.addf(np, "duplicate port name %q (also ports[%d])", sp.Name, j)
		} else {
			seen[sp.Name] = i
		}
	}
}

// proxyPort checks a service port's proxy port and protocol (seen: the
// proxy ports of the ports before it).
func (v *validator) proxyPort(ip fieldPath, sp ServicePort, seen map[ProxyPort]int, i int) {
	pp, pr := ip.field("port", "port"), ip.field("protocol", "protocol")
	if sp.Port == 0 {
		if sp.Protocol != "" {
			v.addf(pr, "%q needs a port: protocol is the protocol of the port every board forwards", sp.Protocol)
		}
		return
	}
	if sp.Port < 1 || sp.Port > MaxPort {
		v.addf(pp, "%d: a port must be between 1 and %d (or left out for no proxy port)", sp.Port, MaxPort)
		return
	}
	if sp.Protocol != "tcp" && sp.Protocol != "udp" {
		v.addf(pr, "%q: must be tcp or udp", sp.Protocol)
		return
	}
	c := ProxyPort{sp.Port, sp.Protocol}
	if slices.Contains(HerdPorts, c) {
		v.addf(pp, "%s is one of herd's own ports on a board (sshd, gossip, Raft, API, metrics, DNS): pick another", c)
	} else if j, dup := seen[c]; dup {
		v.addf(pp, "duplicate %s (also ports[%d])", c, j)
	} else {
		seen[c] = i
	}
}

// portRefProblem checks a reference to a pod port: a port name or a number.
func portRefProblem(ref string) string {
	if ref != "" && ref[0] >= '0' && ref[0] <= '9' {
		n, err := strconv.Atoi(ref)
		if err != nil || n < 1 || n > MaxPort {
			return fmt.Sprintf("%q: a port number must be between 1 and %d", ref, MaxPort)
		}
		return ""
	}
	if msg := nameProblem(ref); msg != "" {
		return fmt.Sprintf("%q is neither a port name nor a port number: %s", ref, msg)
	}
	return ""
}

func (v *validator) template(p fieldPath, t *PodTemplate) {
	v.labels(p.field("labels", "labels"), t.Labels)
	portNames := v.unitTemplate(p, t)
	v.resources(p.field("resources", "resources"), t.Resources, true)
	if t.Readiness != nil {
		v.probe(p.field("readiness", "readiness"), t.Readiness, portNames, len(t.Ports) > 0)
	}
	nsp := p.field("nodeSelector", "node_selector")
	v.labels(nsp, t.NodeSelector)
	for _, short := range nodeSelectorShortKeys() {
		long, _ := nodeSelectorLongForm(short)
		if sv, ok := t.NodeSelector[short]; ok {
			if lv, both := t.NodeSelector[long]; both && lv != sv {
				v.addf(nsp.key(short), "%q is short for %q, which is also given with a different value", short, long)
			}
		}
	}
	v.templateBudget(p, t)
}

// text checks a string that reaches a board: no NUL, valid UTF-8.
func (v *validator) text(p fieldPath, s string) bool {
	if strings.IndexByte(s, 0) >= 0 {
		v.addf(p, "must not contain NUL characters")
		return false
	}
	if !utf8.ValidString(s) {
		v.addf(p, "must be valid UTF-8")
		return false
	}
	return true
}

func (v *validator) argv(p fieldPath, argv []string, required bool) {
	if len(argv) == 0 {
		if required {
			v.addf(p, "required: the command to run, as an argv array such as [\"/usr/bin/python3\", \"-m\", \"http.server\"]")
		} else {
			v.addf(p, "must not be empty")
		}
		return
	}
	for i, a := range argv {
		v.text(p.index(i), a)
	}
	cmd := argv[0]
	cp := p.index(0)
	switch {
	case cmd == "" || strings.TrimSpace(cmd) == "":
		v.addf(cp, "the command must not be empty")
	case strings.ContainsAny(cmd[:1], "@-:+!"):
		v.addf(cp, "%q: the command must not start with '@', '-', ':', '+' or '!' (systemd reads those as flags)", cmd)
	case strings.ContainsRune(cmd, '/') && !strings.HasPrefix(cmd, "/"):
		v.addf(cp, "%q: the command must be an absolute path or a bare command name", cmd)
	case strings.ContainsAny(cmd, "\n\r"):
		v.addf(cp, "the command must not contain newlines")
	}
}

func (v *validator) env(p fieldPath, env map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kp := p.key(k)
		switch {
		case !isEnvKey(k):
			v.addf(kp, "invalid environment variable name %q: must match [A-Za-z_][A-Za-z0-9_]*", k)
		case k == reservedEnvPort || strings.HasPrefix(k, reservedEnvPortPfx):
			v.addf(kp, "%q is reserved: herd sets PORT and PORT_<NAME> to the ports it assigns", k)
		case k == CredentialsDirVar:
			v.addf(kp, "%q is reserved: systemd sets it to the directory of the pod's secrets", k)
		}
		if v.text(kp, env[k]) && len(k)+1+len(env[k]) > MaxEnvAssignment {
			v.addf(kp, "%s=VALUE is %d bytes; Linux passes at most %d bytes per environment variable", k, len(k)+1+len(env[k]), MaxEnvAssignment)
		}
	}
}

func isEnvKey(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(isAlnum(c) || c == '_') {
			return false
		}
	}
	return true
}

// absPath checks an absolute, clean path.
func (v *validator) absPath(p fieldPath, s string) bool {
	if !v.text(p, s) {
		return false
	}
	switch {
	case strings.ContainsAny(s, "\n\r"):
		v.addf(p, "%q: must not contain newlines", s)
	case !strings.HasPrefix(s, "/"):
		v.addf(p, "%q: must be an absolute path", s)
	case slices.Contains(strings.Split(s, "/"), ".."):
		v.addf(p, "%q: must not contain \"..\"", s)
	case path.Clean(s) != s:
		v.addf(p, "%q: must be a clean path (did you mean %q?)", s, path.Clean(s))
	default:
		return true
	}
	return false
}

func (v *validator) user(p fieldPath, u string) {
	ok := len(u) <= MaxUserNameLength && (u[0] == '_' || u[0] >= 'a' && u[0] <= 'z')
	for i := 0; ok && i < len(u); i++ {
		c := u[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		v.addf(p, "%q is not a valid user name: must match [a-z_][a-z0-9_-]* and be at most %d characters", u, MaxUserNameLength)
	}
}

func (v *validator) files(p fieldPath, files []File, sandbox string) {
	seen := map[string]int{}
	for i, f := range files {
		ip := p.index(i)
		pp := ip.field("path", "path")
		switch {
		case f.Path == "":
			v.addf(pp, "required: where to place the file, an absolute path")
		case f.Path == "/":
			v.addf(pp, "\"/\" is a directory")
		case v.absPath(pp, f.Path):
			if j, dup := seen[f.Path]; dup {
				v.addf(pp, "duplicate file path %q (also files[%d])", f.Path, j)
			} else {
				seen[f.Path] = i
			}
			if n := len(QuoteUnitWord(f.Path, UnitQuoting{})); n > filesWordMax {
				v.addf(pp, "is %d bytes once quoted; a file path may take at most %d (one unit file line)", n, filesWordMax)
			}
			if sandbox != SandboxNone {
				for _, tmp := range []string{"/tmp", "/var/tmp"} {
					if strings.HasPrefix(f.Path, tmp+"/") {
						v.addf(pp, "%q is under %s, which a sandboxed process does not see (PrivateTmp=yes): place it elsewhere or set sandbox = \"none\"", f.Path, tmp)
					}
				}
			}
		}
		mp := ip.field("mode", "mode")
		if m, ok := parseFileMode(f.Mode); !ok {
			v.addf(mp, "%q: must be an octal permission string such as \"0644\", at most \"07777\"", f.Mode)
		} else if m&0o6000 != 0 && !f.AllowSetID {
			v.addf(mp, "%q sets the setuid or setgid bit on %s: set allow_setid = true on this file to allow it", f.Mode, f.Path)
		}
		cp := ip.field("content", "content")
		if !utf8.ValidString(f.Content) {
			v.addf(cp, "must be valid UTF-8 (binary files are not supported)")
		}
		if len(f.Content) > MaxFileSize {
			v.addf(cp, "at most %d bytes, got %d", MaxFileSize, len(f.Content))
		}
	}
}

// ports validates the ports and returns the set of valid port names.
func (v *validator) ports(p fieldPath, ports []Port) map[string]bool {
	names := map[string]bool{}
	seenName := map[string]int{}
	seenPort := map[string]int{}
	for i, pt := range ports {
		ip := p.index(i)
		np := ip.field("name", "name")
		if msg := nameProblem(pt.Name); msg != "" {
			v.addf(np, "%q is not a valid port name: %s", pt.Name, msg)
		} else if j, dup := seenName[pt.Name]; dup {
			v.addf(np, "duplicate port name %q (also ports[%d])", pt.Name, j)
		} else {
			seenName[pt.Name] = i
			names[pt.Name] = true
		}
		if pt.Port < 0 || pt.Port > MaxPort {
			v.addf(ip.field("port", "port"), "must be between 1 and %d, or 0 to let herd pick a free port, got %d", MaxPort, pt.Port)
		}
		if pt.Protocol != "tcp" && pt.Protocol != "udp" {
			v.addf(ip.field("protocol", "protocol"), "%q: must be tcp or udp", pt.Protocol)
		}
		if pt.Port > 0 {
			key := strconv.Itoa(pt.Port) + "/" + pt.Protocol
			if j, dup := seenPort[key]; dup {
				v.addf(ip.field("port", "port"), "port %s is also used by ports[%d]", key, j)
			} else {
				seenPort[key] = i
			}
		}
	}
	return names
}

// resources checks the limits (they reach the unit file) or the requests
// the scheduler reserves (against the limits).
func (v *validator) resources(p fieldPath, r Resources, requests bool) {
	limits := !requests
	var limBytes int64
	var limCPU int
	if r.MemoryLimit != "" {
		b, _, err := ParseMemory(r.MemoryLimit)
		if err != nil && limits {
			v.addf(p.field("memoryLimit", "memory_limit"), "%s", quantityMsg(err))
		}
		limBytes = b
	}
	if r.CPULimit != "" {
		c, err := ParseCPU(r.CPULimit)
		if err != nil && limits {
			v.addf(p.field("cpuLimit", "cpu_limit"), "%s", quantityMsg(err))
		}
		limCPU = c
	}
	if limits {
		return
	}
	if r.AllowUnenforcedLimits && r.MemoryLimit == "" && r.CPULimit == "" {
		v.addf(p.field("allowUnenforcedLimits", "allow_unenforced_limits"),
			"is set but there is no memory_limit or cpu_limit for it to allow: remove it, or set a limit")
	}
	if r.MemoryRequest != "" {
		mp := p.field("memoryRequest", "memory_request")
		switch b, pct, err := ParseMemory(r.MemoryRequest); {
		case err != nil:
			v.addf(mp, "%s", quantityMsg(err))
		case pct != 0:
			v.addf(mp, "%q: a request must be an absolute amount such as \"64M\", not a percentage", r.MemoryRequest)
		case limBytes > 0 && b > limBytes:
			v.addf(mp, "%q is more than the limit %q", r.MemoryRequest, r.MemoryLimit)
		}
	}
	if r.CPURequest != "" {
		cp := p.field("cpuRequest", "cpu_request")
		switch c, err := ParseCPU(r.CPURequest); {
		case err != nil:
			v.addf(cp, "%s", quantityMsg(err))
		case limCPU > 0 && c > limCPU:
			v.addf(cp, "%q is more than the limit %q", r.CPURequest, r.CPULimit)
		}
	}
}

// quantityMsg strips the sentinel prefix from a quantity error.
func quantityMsg(err error) string {
	return strings.TrimPrefix(err.Error(), ErrInvalidQuantity.Error()+": ")
}

func (v *validator) probe(p fieldPath, pr *Probe, portNames map[string]bool, hasPorts bool) {
	n := 0
	if pr.TCP != "" {
		n++
	}
	if pr.HTTP != "" {
		n++
	}
	if pr.Exec != nil {
		n++
	}
	if n != 1 {
		v.addf(p, "set exactly one of tcp, http or exec, got %d", n)
	}
	ref := func(fp fieldPath, r string) {
		if msg := portRefProblem(r); msg != "" {
			v.addf(fp, "%s", msg)
			return
		}
		if r[0] < '0' || r[0] > '9' {
			if !portNames[r] {
				v.addf(fp, "no port named %q in the template", r)
			}
		}
	}
	if pr.TCP != "" {
		ref(p.field("tcp", "tcp"), pr.TCP)
	}
	if pr.HTTP != "" {
		hp := p.field("http", "http")
		switch {
		case !strings.HasPrefix(pr.HTTP, "/"):
			v.addf(hp, "%q: must be a URL path starting with '/', such as \"/healthz\"", pr.HTTP)
		case strings.IndexFunc(pr.HTTP, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 || !utf8.ValidString(pr.HTTP):
			v.addf(hp, "%q: must not contain blanks or control characters", pr.HTTP)
		}
		if pr.HTTPPort == "" && !hasPorts {
			v.addf(p.field("httpPort", "http_port"), "required: the template has no ports, so say which port to check")
		}
	}
	if pr.HTTPPort != "" {
		pp := p.field("httpPort", "http_port")
		if pr.HTTP == "" {
			v.addf(pp, "only used with http")
		} else {
			ref(pp, pr.HTTPPort)
		}
	}
	if pr.Exec != nil {
		v.argv(p.field("exec", "exec"), pr.Exec, false)
	}
	if pr.PeriodSeconds < 1 || pr.PeriodSeconds > MaxProbePeriod {
		v.addf(p.field("periodSeconds", "period_seconds"), "must be between 1 and %d, got %d", MaxProbePeriod, pr.PeriodSeconds)
	}
	if pr.TimeoutSeconds < 1 || pr.TimeoutSeconds > max(pr.PeriodSeconds, 1) {
		v.addf(p.field("timeoutSeconds", "timeout_seconds"), "must be between 1 and period_seconds (%d), got %d", pr.PeriodSeconds, pr.TimeoutSeconds)
	}
	if pr.FailureThreshold < 0 || pr.FailureThreshold > MaxProbeFailures {
		v.addf(p.field("failureThreshold", "failure_threshold"), "must be between 1 and %d (0 or left out: %d), got %d",
			MaxProbeFailures, DefaultProbeFailureThreshold, pr.FailureThreshold)
	}
}
