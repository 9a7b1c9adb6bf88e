package units

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/herd-dev/herd/api"
)

const (
	unitPrefix = "herd-"
	unitSuffix = ".service"

	// maxLine is the longest physical line a rendered unit may hold, without
	// its newline: go-systemd's parser refuses SYSTEMD_LINE_MAX bytes without
	// a newline, and the executor reads units back with it.
	maxLine = unit.SYSTEMD_LINE_MAX - 1

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

	// envPort is the variable holding the first port's host port;
	// envPortPrefix+NAME holds each named port's.
	envPort       = "PORT"
	envPortPrefix = "PORT_"
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

// UnitName returns the systemd unit name of a pod: herd-<pod>.service.
func UnitName(podName string) string {
	return unitPrefix + podName + unitSuffix
}

// PodFromUnitName returns the pod name inside a unit name made by UnitName,
// and false when name is not a herd unit name (wrong prefix or suffix, or a
// pod part that is not a valid pod name).
func PodFromUnitName(name string) (string, bool) {
	if len(name) <= len(unitPrefix)+len(unitSuffix) ||
		!strings.HasPrefix(name, unitPrefix) || !strings.HasSuffix(name, unitSuffix) {
		return "", false
	}
	pod := name[len(unitPrefix) : len(name)-len(unitSuffix)]
	if !isDNSLabel(pod) {
		return "", false
	}
	return pod, true
}

// IsHerdUnit reports whether name is a unit name herd manages.
func IsHerdUnit(name string) bool {
	_, ok := PodFromUnitName(name)
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

// RenderOptions returns the options of a pod's unit file in file order. See
// the package documentation for what goes in and how values are quoted.
// Errors are *RenderError.
func RenderOptions(p *api.Pod) ([]*unit.UnitOption, error) {
	if p == nil {
		return nil, &RenderError{Field: "pod", Reason: "is nil"}
	}
	r := &renderer{pod: p.Metadata.Name}
	return r.render(p)
}

// renderer holds what the steps of one rendering share.
type renderer struct {
	pod  string
	opts []*unit.UnitOption
}

func (r *renderer) errorf(field, format string, args ...any) error {
	return &RenderError{Pod: r.pod, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (r *renderer) add(section, name, value string) {
	r.opts = append(r.opts, unit.NewUnitOption(section, name, value))
}

func (r *renderer) render(p *api.Pod) ([]*unit.UnitOption, error) {
	t := &p.Spec.Template
	if !isDNSLabel(p.Metadata.Name) {
		return nil, r.errorf("metadata.name", "must be 1-63 characters of [a-z0-9-], starting and ending with a letter or digit")
	}
	restart, err := r.restart(t.RestartPolicy)
	if err != nil {
		return nil, err
	}
	env, err := r.environment(p)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(env))
	for _, kv := range env {
		known[kv.key] = true
	}
	execStart, err := r.execStart(t.Exec, known)
	if err != nil {
		return nil, err
	}

	// [Unit]
	desc := "herd pod " + p.Metadata.Name
	owner := ""
	if p.Spec.Owner.Kind != "" || p.Spec.Owner.Name != "" {
		if !isKind(string(p.Spec.Owner.Kind)) {
			return nil, r.errorf("spec.owner.kind", "must be a lower-case kind such as deployments")
		}
		if !isDNSLabel(p.Spec.Owner.Name) {
			return nil, r.errorf("spec.owner.name", "must be 1-63 characters of [a-z0-9-], starting and ending with a letter or digit")
		}
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
		if !isToken(rev) {
			return nil, r.errorf("spec.revision", "must be printable ASCII without spaces, quotes or backslashes")
		}
		r.add(sectionUnit, keyRevision, rev)
	}
	r.add(sectionUnit, keyGeneration, strconv.FormatInt(p.Metadata.Generation, 10))
	if len(t.Files) > 0 {
		words := make([]string, 0, len(t.Files))
		for i, f := range t.Files {
			field := fmt.Sprintf("spec.template.files[%d].path", i)
			if !strings.HasPrefix(f.Path, "/") {
				return nil, r.errorf(field, "must be an absolute path")
			}
			if err := r.checkText(field, f.Path); err != nil {
				return nil, err
			}
			words = append(words, quote(f.Path, quoting{}))
		}
		v, err := r.joinWords(keyFiles, "spec.template.files", words)
		if err != nil {
			return nil, err
		}
		r.add(sectionUnit, keyFiles, v)
	}

	// [Service]
	r.add(sectionService, "Type", "exec")
	r.add(sectionService, "ExecStart", execStart)
	for _, kv := range env {
		w := quote(kv.key+"="+kv.value, quoting{percent: true})
		if len("Environment=")+len(w) > maxLine {
			return nil, r.errorf(kv.field, "is %d bytes once quoted; a unit file line holds at most %d", len(w), maxLine-len("Environment="))
		}
		r.add(sectionService, "Environment", w)
	}
	if t.User != "" {
		if !isUserName(t.User) {
			return nil, r.errorf("spec.template.user", "must match [a-z_][a-z0-9_-]* and be at most 32 characters")
		}
		r.add(sectionService, "User", t.User)
	}
	if t.WorkingDir != "" {
		if err := r.checkWorkingDir(t.WorkingDir); err != nil {
			return nil, err
		}
		r.add(sectionService, "WorkingDirectory", strings.ReplaceAll(t.WorkingDir, "%", "%%"))
	}
	if v := t.Resources.MemoryLimit; v != "" {
		if !isQuantity(v) {
			return nil, r.errorf("spec.template.resources.memoryLimit", "%q is not a systemd MemoryMax= value (such as 512M or 20%%)", v)
		}
		r.add(sectionService, "MemoryMax", v)
	}
	if v := t.Resources.CPULimit; v != "" {
		if !isQuantity(v) || !strings.HasSuffix(v, "%") {
			return nil, r.errorf("spec.template.resources.cpuLimit", "%q is not a systemd CPUQuota= value (such as 50%%)", v)
		}
		r.add(sectionService, "CPUQuota", v)
	}
	r.add(sectionService, "Restart", restart)
	r.add(sectionService, "RestartSec", "1")
	r.add(sectionService, "KillMode", "mixed")
	r.add(sectionService, "TimeoutStopSec", "10")
	r.add(sectionService, "SyslogIdentifier", p.Metadata.Name)

	// [Install]
	r.add(sectionInstall, "WantedBy", "multi-user.target")
	return r.opts, nil
}

// restart maps a restart policy to systemd's Restart= value.
func (r *renderer) restart(p api.RestartPolicy) (string, error) {
	switch p {
	case api.RestartAlways, "":
		return "always", nil
	case api.RestartOnFailure:
		return "on-failure", nil
	case api.RestartNever:
		return "no", nil
	}
	return "", r.errorf("spec.template.restartPolicy", "%q is not always, on-failure or never", string(p))
}

// envVar is one rendered environment variable.
type envVar struct {
	key, value string
	field      string // where it came from, for errors
}

// environment returns the process environment sorted by key: the template's
// env plus PORT and PORT_<NAME> from the pod's ports. herd's port variables
// win over env keys of the same name.
func (r *renderer) environment(p *api.Pod) ([]envVar, error) {
	t := &p.Spec.Template
	vars := make(map[string]envVar, len(t.Env)+len(t.Ports)+1)
	for k, v := range t.Env {
		field := fmt.Sprintf("spec.template.env[%q]", k)
		if !isEnvName(k) {
			return nil, r.errorf(field, "key must match [A-Za-z_][A-Za-z0-9_]*")
		}
		if err := r.checkText(field, v); err != nil {
			return nil, err
		}
		vars[k] = envVar{key: k, value: v, field: field}
	}
	for i, port := range t.Ports {
		field := fmt.Sprintf("spec.template.ports[%d]", i)
		name := port.Name
		if name == "" {
			name = "p" + strconv.Itoa(i)
		}
		if !isDNSLabel(name) {
			return nil, r.errorf(field+".name", "must be 1-63 characters of [a-z0-9-], starting and ending with a letter or digit")
		}
		host, ok := p.Spec.HostPorts[name]
		if !ok {
			if port.Port == 0 {
				return nil, r.errorf(fmt.Sprintf("spec.hostPorts[%q]", name), "no host port assigned to dynamic port %s", field)
			}
			host = port.Port
		}
		if host < 1 || host > 65535 {
			return nil, r.errorf(fmt.Sprintf("spec.hostPorts[%q]", name), "host port %d is outside 1-65535", host)
		}
		key := envPortPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if prev, dup := vars[key]; dup && strings.HasPrefix(prev.field, "spec.template.ports") {
			return nil, r.errorf(field+".name", "%q repeats the name of %s", name, strings.TrimSuffix(prev.field, ".name"))
		}
		value := strconv.Itoa(host)
		vars[key] = envVar{key: key, value: value, field: field + ".name"}
		if i == 0 {
			vars[envPort] = envVar{key: envPort, value: value, field: field}
		}
	}
	out := make([]envVar, 0, len(vars))
	for _, kv := range vars {
		out = append(out, kv)
	}
	slices.SortFunc(out, func(a, b envVar) int { return strings.Compare(a.key, b.key) })
	return out, nil
}

// execStart returns the ExecStart= value for argv.
func (r *renderer) execStart(argv []string, known map[string]bool) (string, error) {
	if len(argv) == 0 {
		return "", r.errorf("spec.template.exec", "is empty; it needs at least the program")
	}
	a0 := argv[0]
	switch {
	case a0 == "":
		return "", r.errorf("spec.template.exec[0]", "is empty")
	case strings.IndexByte("-@:+!|", a0[0]) >= 0:
		return "", r.errorf("spec.template.exec[0]", "starts with %q, which systemd reads as an ExecStart= prefix", a0[:1])
	case strings.Contains(a0, "$"):
		return "", r.errorf("spec.template.exec[0]", "contains '$', which systemd would not pass to the program path as written")
	case !strings.HasPrefix(a0, "/") && (strings.Contains(a0, "/") || a0 == "." || a0 == ".."):
		return "", r.errorf("spec.template.exec[0]", "%q is neither an absolute path nor a bare command name", a0)
	}
	words := make([]string, 0, len(argv))
	for i, a := range argv {
		if err := r.checkText(fmt.Sprintf("spec.template.exec[%d]", i), a); err != nil {
			return "", err
		}
		words = append(words, quote(a, quoting{percent: true, dollar: true, vars: known}))
	}
	return r.joinWords("ExecStart", "spec.template.exec", words)
}

// joinWords joins quoted words into the value of option name, continuing it
// on further physical lines (a trailing backslash, which systemd reads as a
// space) so no line exceeds maxLine.
func (r *renderer) joinWords(name, field string, words []string) (string, error) {
	var b strings.Builder
	line := len(name) + 1
	// Every line but the last ends with " \"; keep room for it.
	const cont = len(" \\")
	for i, w := range words {
		if len(name)+1+len(w)+cont > maxLine {
			return "", r.errorf(fmt.Sprintf("%s[%d]", field, i), "is %d bytes once quoted; a unit file line holds at most %d", len(w), maxLine-len(name)-1-cont)
		}
		if i > 0 {
			if line+1+len(w)+cont > maxLine {
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
	return b.String(), nil
}

// checkText rejects strings a unit file cannot carry exactly.
func (r *renderer) checkText(field, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return r.errorf(field, "contains a NUL byte at offset %d", i)
	}
	if !utf8.ValidString(s) {
		return r.errorf(field, "is not valid UTF-8")
	}
	return nil
}

// checkWorkingDir accepts an absolute, normalized path; WorkingDirectory= is
// taken verbatim (no quoting), so it must not need any.
func (r *renderer) checkWorkingDir(dir string) error {
	const field = "spec.template.workingDir"
	if err := r.checkText(field, dir); err != nil {
		return err
	}
	if !strings.HasPrefix(dir, "/") {
		return r.errorf(field, "%q is not an absolute path", dir)
	}
	if strings.TrimSpace(dir) != dir || strings.HasSuffix(dir, "\\") {
		return r.errorf(field, "%q has leading or trailing space or a trailing backslash", dir)
	}
	for i := 0; i < len(dir); i++ {
		if c := dir[i]; c < 0x20 || c == 0x7f {
			return r.errorf(field, "contains control character 0x%02x", c)
		}
	}
	for _, part := range strings.Split(dir[1:], "/") {
		if part == "." || part == ".." || (part == "" && dir != "/") {
			return r.errorf(field, "%q is not a normalized path (no '.', '..', '//' or trailing '/')", dir)
		}
	}
	return nil
}

// quoting says which systemd expansions a quoted word must defeat.
type quoting struct {
	// percent escapes % as %% (specifier expansion).
	percent bool
	// dollar escapes $ as $$ (ExecStart variable expansion), except ${NAME}
	// references whose NAME is in vars.
	dollar bool
	vars   map[string]bool
}

// quote returns s as one double-quoted systemd word with C-style escapes.
func quote(s string, q quoting) string {
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
		case c == '%' && q.percent:
			b.WriteString("%%")
		case c == '$' && q.dollar:
			if n := varRef(s[i:]); n > 0 && q.vars[s[i+2:i+n-1]] {
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
	if end < 0 || !isEnvName(s[2:end]) {
		return 0
	}
	return end + 1
}

// isEnvName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// isDNSLabel reports whether s is a herd name: [a-z0-9-], 1-63 characters,
// starting and ending with a letter or digit.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isKind reports whether s looks like a kind: lower-case letters.
func isKind(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// isUserName reports whether s matches [a-z_][a-z0-9_-]{0,31}.
func isUserName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z':
		case ('0' <= c && c <= '9' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// isQuantity is the minimal check on a limit that admission already
// validated: a digit first, then only [0-9A-Za-z.%], which cannot break out
// of its line or trigger an expansion. systemd parses the rest.
func isQuantity(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' || len(s) > 64 {
		return s == "infinity"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '%') {
			return false
		}
	}
	return true
}

// isToken reports whether s is non-empty printable ASCII without spaces,
// quotes or backslashes.
func isToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
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
