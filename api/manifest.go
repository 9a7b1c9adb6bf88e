package api

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A manifest is a TOML file declaring any number of deployments, daemons,
// services and jobs as arrays of tables:
//
//	[[deployment]]
//	name = "web"
//	replicas = 3
//	[deployment.template]
//	exec = ["/usr/bin/python3", "-m", "http.server", "${PORT}"]
//	[[deployment.template.ports]]
//	name = "http"
//
//	[[service]]
//	name = "web"
//	selector = { app = "web" }
//	[[service.ports]]
//	target = "http"
//
// Metadata (name, labels) and spec fields sit side by side in each table.
// Keys are snake_case. The manifest structs below are the format's single
// definition: DecodeManifest reads them strictly (unknown keys and wrong
// types are errors with file:line:col) and EncodeManifest writes them.

// ErrInvalidManifest matches (with errors.Is) the ManifestErrors that
// DecodeManifest and DecodeManifests return.
var ErrInvalidManifest = errors.New("api: invalid manifest")

// ManifestFile is one manifest file to decode.
type ManifestFile struct {
	// Name is used in error messages ("web.toml:12:3: ...").
	Name string
	Data []byte
}

// ManifestError is one problem in a manifest, with where it is.
type ManifestError struct {
	// File is the file name as given.
	File string `json:"file"`
	// Line and Col are 1-based; 0 when unknown.
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
	// Object is the object the problem is in, e.g. `deployment "web"`, or
	// empty for problems outside any object.
	Object string `json:"object,omitempty"`
	// Field is the manifest key path inside the object, e.g.
	// "template.ports[0].port", or empty.
	Field string `json:"field,omitempty"`
	// Message says what is wrong and what is allowed.
	Message string `json:"message"`
}

// Error renders "file:line:col: object: field: message".
func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteString(":" + strconv.Itoa(e.Col))
		}
	}
	for _, s := range []string{e.Object, e.Field, e.Message} {
		if s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidManifest) true.
func (e *ManifestError) Is(target error) bool { return target == ErrInvalidManifest }

// ManifestErrors is every problem found in a set of manifests, ordered by
// file (as given) and position. It is only ever returned non-empty.
type ManifestErrors []*ManifestError

// Error renders one line per problem.
func (e ManifestErrors) Error() string {
	lines := make([]string, len(e))
	for i, me := range e {
		lines[i] = me.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalidManifest) true.
func (e ManifestErrors) Is(target error) bool { return target == ErrInvalidManifest }

// ---------------------------------------------------------------------------
// The manifest format. Tags name the TOML keys; the option "always" makes
// EncodeManifest write a zero integer that it would otherwise leave out.

// portRef is a reference to a pod port: a name, or a number that may be
// written as a TOML integer or string.
type portRef string

type manifestDeployment struct {
	Name     string            `toml:"name"`
	Labels   map[string]string `toml:"labels"`
	Replicas *int              `toml:"replicas"`
	Selector map[string]string `toml:"selector"`
	Strategy *manifestStrategy `toml:"strategy"`
	Template *manifestTemplate `toml:"template"`
}

type manifestStrategy struct {
	MaxSurge       *int `toml:"max_surge"`
	MaxUnavailable *int `toml:"max_unavailable"`
}

type manifestDaemon struct {
	Name     string                  `toml:"name"`
	Labels   map[string]string       `toml:"labels"`
	Strategy *manifestDaemonStrategy `toml:"strategy"`
	Template *manifestTemplate       `toml:"template"`
}

type manifestDaemonStrategy struct {
	MaxUnavailable *int `toml:"max_unavailable"`
}

type manifestJob struct {
	Name        string            `toml:"name"`
	Labels      map[string]string `toml:"labels"`
	Schedule    string            `toml:"schedule"`
	Concurrency string            `toml:"concurrency"`
	Retries     *int              `toml:"retries"`
	Template    *manifestTemplate `toml:"template"`
}

type manifestService struct {
	Name     string                `toml:"name"`
	Labels   map[string]string     `toml:"labels"`
	Selector map[string]string     `toml:"selector"`
	Ports    []manifestServicePort `toml:"ports"`
}

type manifestServicePort struct {
	Name     string  `toml:"name"`
	Target   portRef `toml:"target"`
	Port     int     `toml:"port,omitempty"`
	Protocol string  `toml:"protocol,omitempty"`
}

type manifestTemplate struct {
	Labels       map[string]string  `toml:"labels"`
	Exec         []string           `toml:"exec"`
	Env          map[string]string  `toml:"env"`
	WorkingDir   string             `toml:"working_dir"`
	User         string             `toml:"user"`
	Restart      string             `toml:"restart"`
	NodeSelector map[string]string  `toml:"node_selector"`
	Resources    *manifestResources `toml:"resources"`
	Readiness    *manifestProbe     `toml:"readiness"`
	Ports        []manifestPort     `toml:"ports"`
	Files        []manifestFileSpec `toml:"files"`
	Artifacts    []manifestArtifact `toml:"artifacts"`
	Sandbox      string             `toml:"sandbox"`
	Devices      []string           `toml:"devices"`
	Secrets      []string           `toml:"secrets"`
	// OnDisconnect is "keep" (decoded as nil, the default) or a table.
	OnDisconnect *manifestOnDisconnect `toml:"on_disconnect"`
}

// manifestOnDisconnect is the table form of on_disconnect; the string
// "keep" (api.OnDisconnectKeep) is the other form, decoded as no table.
type manifestOnDisconnect struct {
	StopAfter string `toml:"stop_after"`
}

type manifestPort struct {
	Name     string `toml:"name"`
	Port     int    `toml:"port,always"`
	Protocol string `toml:"protocol"`
}

type manifestFileSpec struct {
	Path       string `toml:"path"`
	Mode       string `toml:"mode"`
	AllowSetID bool   `toml:"allow_setid"`
	Content    string `toml:"content"`
}

type manifestArtifact struct {
	URL        string `toml:"url"`
	SHA256     string `toml:"sha256"`
	Path       string `toml:"path"`
	Mode       string `toml:"mode"`
	AllowSetID bool   `toml:"allow_setid"`
}

type manifestResources struct {
	MemoryLimit   string `toml:"memory_limit"`
	CPULimit      string `toml:"cpu_limit"`
	MemoryRequest string `toml:"memory_request"`
	CPURequest    string `toml:"cpu_request"`
	// AllowUnenforcedLimits is Resources.AllowUnenforcedLimits.
	AllowUnenforcedLimits bool `toml:"allow_unenforced_limits"`
}

type manifestProbe struct {
	TCP              portRef  `toml:"tcp"`
	HTTP             string   `toml:"http"`
	HTTPPort         portRef  `toml:"http_port"`
	Exec             []string `toml:"exec"`
	PeriodSeconds    int      `toml:"period_seconds"`
	TimeoutSeconds   int      `toml:"timeout_seconds"`
	FailureThreshold int      `toml:"failure_threshold"`
}

// manifestKinds lists the manifest tables, in the order EncodeManifest
// documents them.
var manifestKinds = []struct {
	table string
	kind  Kind
}{
	{"deployment", KindDeployment},
	{"daemon", KindDaemon},
	{"service", KindService},
	{"job", KindJob},
}

func kindOfTable(t string) (Kind, bool) {
	for _, mk := range manifestKinds {
		if mk.table == t {
			return mk.kind, true
		}
	}
	return "", false
}

// ---------------------------------------------------------------------------
// Conversion between the manifest structs and the API types. Empty maps and
// slices become nil, so that `labels = {}` and no labels are the same object.

func nilIfEmptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nilIfEmptySlice[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (m *manifestDeployment) toAPI() *Deployment {
	d := &Deployment{
		Kind:     KindDeployment,
		Metadata: ObjectMeta{Name: m.Name, Labels: nilIfEmptyMap(m.Labels)},
	}
	d.Spec.Replicas = m.Replicas
	d.Spec.Selector = nilIfEmptyMap(m.Selector)
	if m.Strategy != nil {
		d.Spec.Strategy = RolloutStrategy{MaxSurge: m.Strategy.MaxSurge, MaxUnavailable: m.Strategy.MaxUnavailable}
	}
	d.Spec.Template = m.Template.toAPI()
	return d
}

func (m *manifestDaemon) toAPI() *Daemon {
	d := &Daemon{
		Kind:     KindDaemon,
		Metadata: ObjectMeta{Name: m.Name, Labels: nilIfEmptyMap(m.Labels)},
		Spec:     DaemonSpec{Template: m.Template.toAPI()},
	}
	if m.Strategy != nil {
		d.Spec.Strategy.MaxUnavailable = m.Strategy.MaxUnavailable
	}
	return d
}

func (m *manifestJob) toAPI() *Job {
	return &Job{
		Kind:     KindJob,
		Metadata: ObjectMeta{Name: m.Name, Labels: nilIfEmptyMap(m.Labels)},
		Spec: JobSpec{
			Schedule:    m.Schedule,
			Concurrency: m.Concurrency,
			Retries:     m.Retries,
			Template:    m.Template.toAPI(),
		},
	}
}

func (m *manifestService) toAPI() *Service {
	s := &Service{
		Kind:     KindService,
		Metadata: ObjectMeta{Name: m.Name, Labels: nilIfEmptyMap(m.Labels)},
		Spec:     ServiceSpec{Selector: nilIfEmptyMap(m.Selector)},
	}
	for _, p := range m.Ports {
		s.Spec.Ports = append(s.Spec.Ports, ServicePort{Name: p.Name, Target: string(p.Target), Port: p.Port, Protocol: p.Protocol})
	}
	return s
}

func (m *manifestTemplate) toAPI() PodTemplate {
	if m == nil {
		return PodTemplate{}
	}
	t := PodTemplate{
		Labels:        nilIfEmptyMap(m.Labels),
		Exec:          nilIfEmptySlice(m.Exec),
		Env:           nilIfEmptyMap(m.Env),
		WorkingDir:    m.WorkingDir,
		User:          m.User,
		RestartPolicy: RestartPolicy(m.Restart),
		NodeSelector:  nilIfEmptyMap(m.NodeSelector),
		Sandbox:       m.Sandbox,
		Devices:       nilIfEmptySlice(m.Devices),
		Secrets:       nilIfEmptySlice(m.Secrets),
	}
	if o := m.OnDisconnect; o != nil {
		t.OnDisconnect = &OnDisconnect{StopAfter: o.StopAfter}
	}
	for _, f := range m.Files {
		t.Files = append(t.Files, File{Path: f.Path, Content: f.Content, Mode: f.Mode, AllowSetID: f.AllowSetID})
	}
	for _, a := range m.Artifacts {
		t.Artifacts = append(t.Artifacts, Artifact(a))
	}
	for _, p := range m.Ports {
		t.Ports = append(t.Ports, Port(p))
	}
	if r := m.Resources; r != nil {
		t.Resources = Resources(*r)
	}
	if p := m.Readiness; p != nil {
		t.Readiness = &Probe{
			TCP:              string(p.TCP),
			HTTP:             p.HTTP,
			HTTPPort:         string(p.HTTPPort),
			Exec:             nilIfEmptySlice(p.Exec),
			PeriodSeconds:    p.PeriodSeconds,
			TimeoutSeconds:   p.TimeoutSeconds,
			FailureThreshold: p.FailureThreshold,
		}
	}
	return t
}

func templateToManifest(t PodTemplate) *manifestTemplate {
	m := &manifestTemplate{
		Labels:       t.Labels,
		Exec:         t.Exec,
		Env:          t.Env,
		WorkingDir:   t.WorkingDir,
		User:         t.User,
		Restart:      string(t.RestartPolicy),
		NodeSelector: t.NodeSelector,
		Sandbox:      t.Sandbox,
		Devices:      t.Devices,
		Secrets:      t.Secrets,
	}
	if o := t.OnDisconnect; o != nil {
		m.OnDisconnect = &manifestOnDisconnect{StopAfter: o.StopAfter}
	}
	for _, f := range t.Files {
		m.Files = append(m.Files, manifestFileSpec{Path: f.Path, Mode: f.Mode, AllowSetID: f.AllowSetID, Content: f.Content})
	}
	for _, a := range t.Artifacts {
		m.Artifacts = append(m.Artifacts, manifestArtifact(a))
	}
	for _, p := range t.Ports {
		m.Ports = append(m.Ports, manifestPort(p))
	}
	if t.Resources != (Resources{}) {
		r := manifestResources(t.Resources)
		m.Resources = &r
	}
	if p := t.Readiness; p != nil {
		m.Readiness = &manifestProbe{
			TCP:              portRef(p.TCP),
			HTTP:             p.HTTP,
			HTTPPort:         portRef(p.HTTPPort),
			Exec:             p.Exec,
			PeriodSeconds:    p.PeriodSeconds,
			TimeoutSeconds:   p.TimeoutSeconds,
			FailureThreshold: p.FailureThreshold,
		}
	}
	return m
}

// toManifest converts an object to its manifest table name and struct.
func toManifest(o Object) (string, any, error) {
	switch v := o.(type) {
	case *Deployment:
		m := &manifestDeployment{
			Name:     v.Metadata.Name,
			Labels:   v.Metadata.Labels,
			Replicas: v.Spec.Replicas,
			Selector: v.Spec.Selector,
			Template: templateToManifest(v.Spec.Template),
		}
		if s := v.Spec.Strategy; s.MaxSurge != nil || s.MaxUnavailable != nil {
			m.Strategy = &manifestStrategy{MaxSurge: s.MaxSurge, MaxUnavailable: s.MaxUnavailable}
		}
		return "deployment", m, nil
	case *Daemon:
		m := &manifestDaemon{
			Name:     v.Metadata.Name,
			Labels:   v.Metadata.Labels,
			Template: templateToManifest(v.Spec.Template),
		}
		if v.Spec.Strategy.MaxUnavailable != nil {
			m.Strategy = &manifestDaemonStrategy{MaxUnavailable: v.Spec.Strategy.MaxUnavailable}
		}
		return "daemon", m, nil
	case *Service:
		m := &manifestService{Name: v.Metadata.Name, Labels: v.Metadata.Labels, Selector: v.Spec.Selector}
		for _, p := range v.Spec.Ports {
			m.Ports = append(m.Ports, manifestServicePort{Name: p.Name, Target: portRef(p.Target), Port: p.Port, Protocol: p.Protocol})
		}
		return "service", m, nil
	case *Job:
		return "job", &manifestJob{
			Name:        v.Metadata.Name,
			Labels:      v.Metadata.Labels,
			Schedule:    v.Spec.Schedule,
			Concurrency: v.Spec.Concurrency,
			Retries:     v.Spec.Retries,
			Template:    templateToManifest(v.Spec.Template),
		}, nil
	case nil:
		return "", nil, errors.New("api: cannot write a nil object to a manifest")
	}
	return "", nil, fmt.Errorf("api: %s cannot be written to a manifest (only deployments, daemons, services and jobs)", o.GetKind())
}

// ---------------------------------------------------------------------------
// Decoding.

// DecodeManifest decodes one manifest file strictly and validates every
// object in it. See DecodeManifests.
func DecodeManifest(filename string, data []byte) ([]Object, error) {
	return DecodeManifests([]ManifestFile{{Name: filename, Data: data}})
}

// DecodeManifests decodes manifest files strictly and validates every
// object in them. It returns the objects in file order (files as given, then
// objects as written, whatever their kind), with Kind set and nothing
// defaulted: the server runs SetDefaults at admission, and a field the user
// left out stays out (a Deployment without replicas has Spec.Replicas nil).
// A file without objects yields none, without error.
//
// On any problem it returns no objects and ManifestErrors listing every
// problem found, each with its file:line:col where the file says it:
// TOML syntax errors; unknown keys, top-level or nested (with a suggestion
// when a known key is close); values of the wrong type; [[node]] and [[pod]]
// tables; the same kind and name declared twice, in one file or across the
// files; and every Validate rule, pointed at the key it is about (or the
// nearest enclosing table when the key was left out).
func DecodeManifests(files []ManifestFile) ([]Object, error) {
	type decl struct {
		file string
		pos  tomlPos
	}
	var objs []Object
	var all ManifestErrors
	seen := make(map[string]decl)
	for _, f := range files {
		decoded, errs := decodeFile(f)
		for _, d := range decoded {
			if d.name != "" {
				key := d.table + "/" + d.name
				if prev, dup := seen[key]; dup {
					where := fmt.Sprintf("%s:%d:%d", prev.file, prev.pos.line, prev.pos.col)
					errs = append(errs, &ManifestError{
						File: f.Name, Line: d.namePos.line, Col: d.namePos.col, Object: d.desc,
						Message: "declared twice: also at " + where,
					})
					continue
				}
				seen[key] = decl{file: f.Name, pos: d.namePos}
			}
			if d.valid {
				objs = append(objs, d.obj)
			}
		}
		sort.SliceStable(errs, func(i, j int) bool {
			a, b := errs[i], errs[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		})
		all = append(all, errs...)
	}
	if len(all) > 0 {
		return nil, all
	}
	if objs == nil {
		objs = []Object{}
	}
	return objs, nil
}

// decodedObject is one object of a file, valid or not.
type decodedObject struct {
	obj     Object
	valid   bool
	table   string
	name    string // "" when missing or not a string
	desc    string // `deployment "web"`
	pos     tomlPos
	namePos tomlPos
}

// fileDecoder decodes one file, collecting errors.
type fileDecoder struct {
	file string
	pos  *posIndex
	errs ManifestErrors
}

// parseTOML parses data into a generic tree, turning TOML syntax errors into
// ManifestErrors with their position.
func parseTOML(file string, data []byte) (root map[string]any, merr *ManifestError) {
	defer func() {
		if r := recover(); r != nil {
			root, merr = nil, &ManifestError{File: file, Line: 1, Col: 1, Message: fmt.Sprintf("invalid TOML: %v", r)}
		}
	}()
	if _, err := toml.Decode(string(data), &root); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line, col := pe.Position.Line, pe.Position.Col
			if line < 1 || col < 1 {
				// BurntSushi/toml reports line 0 for some errors at
				// the end of a one-line file; trust the byte offset.
				line, col = offsetPosition(data, pe.Position.Start)
			}
			return nil, &ManifestError{File: file, Line: line, Col: col, Message: "invalid TOML: " + pe.Message}
		}
		return nil, &ManifestError{File: file, Line: 1, Col: 1, Message: "invalid TOML: " + strings.TrimPrefix(err.Error(), "toml: ")}
	}
	return root, nil
}

// offsetPosition turns a byte offset into a 1-based line and column.
func offsetPosition(data []byte, off int) (line, col int) {
	off = max(0, min(off, len(data)))
	line, start := 1, 0
	for i := 0; i < off; i++ {
		if data[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return line, off - start + 1
}

func decodeFile(f ManifestFile) ([]decodedObject, ManifestErrors) {
	if lerr := checkManifestLimits(f.Name, f.Data); lerr != nil {
		return nil, ManifestErrors{lerr}
	}
	root, perr := parseTOML(f.Name, f.Data)
	if perr != nil {
		return nil, ManifestErrors{perr}
	}
	fd := &fileDecoder{file: f.Name, pos: scanPositions(f.Data)}
	var objs []decodedObject
	for _, key := range slices.Sorted(maps.Keys(root)) {
		val := root[key]
		path := joinKey("", key)
		kind, ok := kindOfTable(key)
		if !ok {
			fd.errorAt(path, "", "", topLevelProblem(key, val))
			continue
		}
		elems, ok := asArray(val)
		if !ok {
			if _, isTable := val.(map[string]any); isTable {
				fd.errorAt(path, "", "", fmt.Sprintf("write [[%s]] (an array of tables, one per %s), not [%s]", key, key, key))
			} else {
				fd.errorAt(path, "", "", fmt.Sprintf("%s must be an array of tables ([[%s]]), got %s", key, key, describeTOML(val)))
			}
			continue
		}
		for i, e := range elems {
			objs = append(objs, fd.decodeObject(key, kind, i, e))
		}
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].pos.offset < objs[j].pos.offset })
	return objs, fd.errs
}

// topLevelProblem explains an unknown top-level key.
func topLevelProblem(key string, val any) string {
	switch key {
	case "node", "nodes":
		return fmt.Sprintf("unknown kind %q: nodes come from gossip when a board joins (herd join); they cannot be declared in a manifest", key)
	case "pod", "pods":
		return fmt.Sprintf("unknown kind %q: pods are made by deployments and daemons; declare a [[deployment]] or [[daemon]]", key)
	case "secret", "secrets":
		return fmt.Sprintf("unknown kind %q: secrets never go in a manifest; create one with herdctl create secret NAME --from-file KEY=PATH and name it in a template's secrets", key)
	}
	_, isTable := val.(map[string]any)
	_, isArray := asArray(val)
	what := "key"
	if isTable || isArray {
		what = "kind"
	}
	msg := fmt.Sprintf("unknown %s %q", what, key)
	if s := suggest(key, []string{"deployment", "daemon", "service", "job"}); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	if what == "key" {
		return msg + ": keys go inside a [[deployment]], [[daemon]], [[service]] or [[job]] table"
	}
	return msg + ": a manifest declares [[deployment]], [[daemon]], [[service]] and [[job]] tables"
}

// asArray returns the elements of a TOML array (of tables or values).
func asArray(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case []map[string]any:
		out := make([]any, len(a))
		for i := range a {
			out[i] = a[i]
		}
		return out, true
	}
	return nil, false
}

// errorAt records an error at the position of path (or of the nearest
// enclosing path that has one).
func (fd *fileDecoder) errorAt(path, object, field, msg string) {
	p := fd.lookup(path)
	fd.errs = append(fd.errs, &ManifestError{File: fd.file, Line: p.line, Col: p.col, Object: object, Field: field, Message: msg})
}

// lookup finds the position of path, trimming trailing segments until one
// is known.
func (fd *fileDecoder) lookup(path string) tomlPos {
	for path != "" {
		if p, ok := fd.pos.lookup(path); ok {
			return p
		}
		path = parentPath(path)
	}
	return tomlPos{}
}

// parentPath drops the last segment (".key" or "[i]") of a path built by
// joinKey and indexKey.
func parentPath(path string) string {
	inQuote, last := false, -1
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case '.', '[':
			if !inQuote {
				last = i
			}
		}
	}
	if last < 0 {
		return ""
	}
	return path[:last]
}

// objectDecoder decodes one object's table.
type objectDecoder struct {
	*fileDecoder
	abs   string // path of the object's table, "deployment[0]"
	desc  string // `deployment "web"`
	nerrs int    // errors before this object
	table string // "deployment"
}

func (fd *fileDecoder) decodeObject(table string, kind Kind, i int, v any) decodedObject {
	abs := indexKey(joinKey("", table), i)
	d := decodedObject{table: table, pos: fd.lookup(abs)}
	d.namePos = d.pos
	if m, ok := v.(map[string]any); ok {
		if name, ok := m["name"].(string); ok {
			d.name = name
			d.namePos = fd.lookup(joinKey(abs, "name"))
		}
	}
	if d.name != "" {
		d.desc = fmt.Sprintf("%s %q", table, d.name)
	} else {
		d.desc = fmt.Sprintf("%s #%d", table, i+1)
	}
	od := &objectDecoder{fileDecoder: fd, abs: abs, desc: d.desc, nerrs: len(fd.errs), table: table}
	switch kind {
	case KindDeployment:
		var m manifestDeployment
		od.decode(abs, "", v, reflect.ValueOf(&m).Elem())
		d.obj = m.toAPI()
	case KindDaemon:
		var m manifestDaemon
		od.decode(abs, "", v, reflect.ValueOf(&m).Elem())
		d.obj = m.toAPI()
	case KindService:
		var m manifestService
		od.decode(abs, "", v, reflect.ValueOf(&m).Elem())
		d.obj = m.toAPI()
	case KindJob:
		var m manifestJob
		od.decode(abs, "", v, reflect.ValueOf(&m).Elem())
		d.obj = m.toAPI()
	}
	if len(fd.errs) > od.nerrs {
		return d // decode errors: validating would only add noise
	}
	for _, p := range validateObject(d.obj) {
		od.validationError(p)
	}
	d.valid = len(fd.errs) == od.nerrs
	return d
}

// validationError records a Validate problem at the key it is about.
func (od *objectDecoder) validationError(p problem) {
	field, ok := p.path.tomlString()
	if !ok {
		field = p.path.String()
	}
	pos := tomlPos{}
	for k := len(p.path); k >= 0; k-- {
		rel, ok := p.path[:k].tomlString()
		if !ok {
			continue
		}
		abs := od.abs
		if rel != "" {
			abs += "." + rel
		}
		if q, found := od.pos.lookup(abs); found {
			pos = q
			break
		}
	}
	od.errs = append(od.errs, &ManifestError{File: od.file, Line: pos.line, Col: pos.col, Object: od.desc, Field: field, Message: p.msg})
}

func (od *objectDecoder) fail(abs, rel, format string, args ...any) {
	od.errorAt(abs, od.desc, rel, fmt.Sprintf(format, args...))
}

var (
	portRefType      = reflect.TypeFor[portRef]()
	onDisconnectType = reflect.TypeFor[*manifestOnDisconnect]()
)

// decode decodes v into rv strictly. abs is v's path in the file, rel its
// path inside the object.
func (od *objectDecoder) decode(abs, rel string, v any, rv reflect.Value) {
	if s, isString := v.(string); isString && rv.Type() == onDisconnectType {
		// on_disconnect = "keep": the default, stored as no policy.
		if s != OnDisconnectKeep {
			od.typeError(abs, rel, v, rv.Type())
		}
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		od.decode(abs, rel, v, rv.Elem())
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			od.typeError(abs, rel, v, rv.Type())
			return
		}
		fields := tomlFields(rv.Type())
		for _, k := range slices.Sorted(maps.Keys(m)) {
			idx, ok := fields[k]
			if !ok {
				od.unknownKey(abs, rel, k, fields)
				continue
			}
			od.decode(joinKey(abs, k), joinRel(rel, k), m[k], rv.Field(idx))
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			od.typeError(abs, rel, v, rv.Type())
			return
		}
		out := make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s, ok := m[k].(string)
			if !ok {
				od.typeError(joinKey(abs, k), joinRel(rel, k), m[k], rv.Type().Elem())
				continue
			}
			out[k] = s
		}
		rv.Set(reflect.ValueOf(out))
	case reflect.Slice:
		a, ok := asArray(v)
		if !ok {
			od.typeError(abs, rel, v, rv.Type())
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(a), len(a))
		for i, e := range a {
			od.decode(indexKey(abs, i), indexKey(rel, i), e, s.Index(i))
		}
		rv.Set(s)
	case reflect.String:
		switch x := v.(type) {
		case string:
			rv.SetString(x)
		case int64:
			if rv.Type() != portRefType {
				od.typeError(abs, rel, v, rv.Type())
				return
			}
			rv.SetString(strconv.FormatInt(x, 10))
		default:
			od.typeError(abs, rel, v, rv.Type())
		}
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			od.typeError(abs, rel, v, rv.Type())
			return
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			od.fail(abs, rel, "%d is out of range", n)
			return
		}
		rv.SetInt(n)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			od.typeError(abs, rel, v, rv.Type())
			return
		}
		rv.SetBool(b)
	default:
		panic("api: manifest struct with unsupported field type " + rv.Type().String())
	}
}

func joinRel(rel, k string) string { return joinKey(rel, k) }

// tomlFields maps TOML key to field index.
func tomlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// describeGo says what a Go field wants, in TOML terms.
func describeGo(t reflect.Type) string {
	switch t {
	case portRefType:
		return "a port name or number"
	case onDisconnectType:
		return fmt.Sprintf("%q or a table such as { stop_after = \"30s\" }", OnDisconnectKeep)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describeGo(t.Elem())
	case reflect.Struct:
		return "a table"
	case reflect.Map:
		return "a table of strings, such as { key = \"value\" }"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of tables"
		}
		return "an array of strings, such as [\"a\", \"b\"]"
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "an integer"
	case reflect.Bool:
		return "a boolean (true or false)"
	}
	return t.String()
}

// describeTOML says what a decoded TOML value is.
func describeTOML(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return "string " + strconv.Quote(x)
	case int64:
		return "integer " + strconv.FormatInt(x, 10)
	case float64:
		return "float " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	}
	return "a date/time"
}

func (od *objectDecoder) typeError(abs, rel string, v any, want reflect.Type) {
	msg := fmt.Sprintf("want %s, got %s", describeGo(want), describeTOML(v))
	if want.Kind() == reflect.Slice && want.Elem().Kind() == reflect.Struct {
		if _, isTable := v.(map[string]any); isTable {
			header := stripIndices(abs)
			msg += fmt.Sprintf(": write [[%s]] (double brackets) for each element", header)
		}
	}
	if b, isBool := v.(bool); isBool && strings.HasSuffix(rel, "sandbox") && want.Kind() == reflect.String {
		if b {
			msg += fmt.Sprintf(" (write %q, the default)", SandboxDefault)
		} else {
			msg += fmt.Sprintf(" (write %q to turn the sandbox off)", SandboxNone)
		}
	}
	if want.Kind() == reflect.Int {
		if s, isString := v.(string); isString {
			if _, err := strconv.Atoi(s); err == nil {
				msg += fmt.Sprintf(" (write %s without quotes)", s)
			}
		}
	}
	od.fail(abs, rel, "%s", msg)
}

// stripIndices turns deployment[0].template.ports[1] into
// deployment.template.ports.
func stripIndices(path string) string {
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '"':
			inQuote = !inQuote
		case c == '\\' && inQuote:
			b.WriteByte(c)
			i++
			if i < len(path) {
				b.WriteByte(path[i])
			}
			continue
		case c == '[' && !inQuote:
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (od *objectDecoder) unknownKey(abs, rel, key string, fields map[string]int) {
	full := joinRel(rel, key)
	msg := fmt.Sprintf("unknown key %q", full)
	hint := ""
	objectLevel := rel == ""
	switch {
	case objectLevel && (key == "metadata" || key == "spec"):
		hint = fmt.Sprintf(": metadata and spec fields sit directly in [[%s]] (name = ..., labels = ..., template = ...)", od.table)
	case objectLevel && key == "kind":
		hint = fmt.Sprintf(": the table name gives the kind; [[%s]] already declares a %s", od.table, od.table)
	case objectLevel && od.table == "daemon" && key == "replicas":
		hint = ": a daemon runs one pod on every node matching template.node_selector; it has no replicas"
	case objectLevel && od.table == "daemon" && key == "selector":
		hint = ": a daemon picks nodes with template.node_selector"
	case objectLevel && od.table == "service" && (key == "port" || key == "target"):
		hint = ": service ports go in [[service.ports]] tables with name and target"
	default:
		// A pod setting written at the object level?
		_, isTemplateKey := tomlFields(reflect.TypeFor[manifestTemplate]())[key]
		if _, hasTemplate := fields["template"]; objectLevel && hasTemplate && isTemplateKey {
			hint = fmt.Sprintf(": pod settings go under [%s.template]", od.table)
		} else if s := suggest(key, slices.Sorted(maps.Keys(fields))); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		} else {
			hint = fmt.Sprintf(" (known keys: %s)", strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
	}
	od.errorAt(joinKey(abs, key), od.desc, "", msg+hint)
}

// suggest returns the candidate closest to key, or "" when none is close:
// same letters in another case, camelCase for snake_case, or an edit
// distance of at most 2 (1 for short keys).
func suggest(key string, candidates []string) string {
	lower := strings.ToLower(camelToSnake(key))
	lower = strings.ReplaceAll(lower, "-", "_")
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if lower == c {
			return c
		}
		d := editDistance(lower, c)
		limit := 2
		if len(c) <= 4 {
			limit = 1
		}
		if d <= limit && d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func camelToSnake(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' && i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z' {
			b.WriteByte('_')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt / 2
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
