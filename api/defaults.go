package api

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
)

// Default values SetDefaults fills in.
const (
	DefaultMaxSurge       = 1
	DefaultMaxUnavailable = 0
	// DefaultDaemonMaxUnavailable is a daemon's max_unavailable when its
	// strategy leaves it out: one board at a time.
	DefaultDaemonMaxUnavailable = 1
	DefaultRestartPolicy        = RestartAlways
	DefaultProtocol             = "tcp"
	DefaultFileMode             = "0644"
	DefaultProbePeriodSeconds   = 5
	DefaultProbeTimeoutSeconds  = 2
	// DefaultProbeFailureThreshold is a readiness check's
	// failure_threshold when it is left out (Probe.Failures): one lost
	// packet must not take a ready pod out of its services.
	DefaultProbeFailureThreshold = 3
	DefaultTemplateLabelKey      = "app"
	// defaultPortNamePrefix + index names a port left unnamed (PortName).
	defaultPortNamePrefix = "p"
)

// SetDefaults fills in the fields a user may leave out and normalizes the
// spelling of the others, in place. The server calls it once, at admission,
// so that the stored spec is complete and a reconcile never flaps on a field
// the server filled in. It is idempotent: SetDefaults twice is SetDefaults
// once. It never makes an invalid object valid by guessing: values it does
// not understand are left for Validate to report.
//
// What it does, by kind:
//   - every kind: Kind is set to the struct's kind.
//   - Deployment: template labels default to {"app": name}; the selector
//     defaults to a copy of the template labels; strategy maxSurge 1,
//     maxUnavailable 0. Replicas is left alone: nil means the manifest does
//     not own it, and the server decides at apply (1 on create).
//   - Daemon: template labels default to {"app": name}.
//   - Service: a port's name defaults to its target, the protocol of a
//     proxy port (port > 0) to tcp.
//   - Job: template labels default to {"app": name}, the template's
//     restart policy to "never"; concurrency "forbid"; retries
//     DefaultJobRetries (3).
//   - Pod: template defaults only.
//   - Pod templates: restart "always"; sandbox "default"; port protocol "tcp"; port names
//     "p0", "p1", ... by index; file mode "0644", and modes are written with
//     four octal digits ("644" becomes "0644"); memory and CPU requests
//     default to the limits when those are absolute; quantities lose leading
//     zeros ("064M" becomes "64M", but "1024K" stays "1024K"); readiness
//     period 5 s, timeout 2 s (or the period, if shorter), and an HTTP check's
//     port defaults to the first port; node-selector shorthands "arch" and
//     "model" become LabelArch and LabelModel.
func SetDefaults(o Object) {
	switch v := o.(type) {
	case *Deployment:
		v.Kind = KindDeployment
		defaultTemplateLabels(&v.Spec.Template, v.Metadata.Name)
		if len(v.Spec.Selector) == 0 && len(v.Spec.Template.Labels) > 0 {
			v.Spec.Selector = maps.Clone(v.Spec.Template.Labels)
		}
		if v.Spec.Strategy.MaxSurge == nil {
			v.Spec.Strategy.MaxSurge = intPtr(DefaultMaxSurge)
		}
		if v.Spec.Strategy.MaxUnavailable == nil {
			v.Spec.Strategy.MaxUnavailable = intPtr(DefaultMaxUnavailable)
		}
		defaultTemplate(&v.Spec.Template)
	case *Daemon:
		v.Kind = KindDaemon
		defaultTemplateLabels(&v.Spec.Template, v.Metadata.Name)
		defaultTemplate(&v.Spec.Template)
	case *Service:
		v.Kind = KindService
		for i := range v.Spec.Ports {
			if v.Spec.Ports[i].Name == "" {
				v.Spec.Ports[i].Name = v.Spec.Ports[i].Target
			}
			if v.Spec.Ports[i].Port > 0 && v.Spec.Ports[i].Protocol == "" {
				v.Spec.Ports[i].Protocol = DefaultProtocol
			}
		}
	case *Job:
		v.Kind = KindJob
		defaultJob(v)
	case *Pod:
		v.Kind = KindPod
		defaultTemplate(&v.Spec.Template)
	case *Node:
		v.Kind = KindNode
	case *Secret:
		v.Kind = KindSecret
	}
}

func intPtr(i int) *int { return &i }

// defaultTemplateLabels gives a template without labels the label app=name,
// when name is valid (an invalid name would make an invalid label).
func defaultTemplateLabels(t *PodTemplate, name string) {
	if len(t.Labels) == 0 && nameProblem(name) == "" {
		t.Labels = map[string]string{DefaultTemplateLabelKey: name}
	}
}

// defaultTemplate applies the pod template defaults.
func defaultTemplate(t *PodTemplate) {
	if t.RestartPolicy == "" {
		t.RestartPolicy = DefaultRestartPolicy
	}
	if t.Sandbox == "" {
		t.Sandbox = SandboxDefault
	}
	for i := range t.Ports {
		p := &t.Ports[i]
		if p.Protocol == "" {
			p.Protocol = DefaultProtocol
		}
		p.Name = t.PortName(i)
	}
	for i := range t.Files {
		f := &t.Files[i]
		if f.Mode == "" {
			f.Mode = DefaultFileMode
		} else if m, ok := parseFileMode(f.Mode); ok {
			f.Mode = formatFileMode(m)
		}
	}
	defaultArtifacts(t)
	r := &t.Resources
	r.MemoryLimit = canonicalMemory(r.MemoryLimit)
	r.MemoryRequest = canonicalMemory(r.MemoryRequest)
	r.CPULimit = canonicalCPU(r.CPULimit)
	r.CPURequest = canonicalCPU(r.CPURequest)
	if r.MemoryRequest == "" && r.MemoryLimit != "" {
		if b, _, err := ParseMemory(r.MemoryLimit); err == nil && b > 0 {
			r.MemoryRequest = r.MemoryLimit
		}
	}
	if r.CPURequest == "" && r.CPULimit != "" {
		if _, err := ParseCPU(r.CPULimit); err == nil {
			r.CPURequest = r.CPULimit
		}
	}
	if p := t.Readiness; p != nil {
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = DefaultProbePeriodSeconds
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = min(DefaultProbeTimeoutSeconds, max(p.PeriodSeconds, 1))
		}
		if p.HTTP != "" && p.HTTPPort == "" && len(t.Ports) > 0 {
			p.HTTPPort = t.Ports[0].Name
		}
	}
	if len(t.NodeSelector) > 0 {
		for _, short := range nodeSelectorShortKeys() {
			long, _ := nodeSelectorLongForm(short)
			v, ok := t.NodeSelector[short]
			if !ok {
				continue
			}
			if lv, both := t.NodeSelector[long]; both && lv != v {
				continue // conflicting: leave both for Validate to report
			}
			t.NodeSelector[long] = v
			delete(t.NodeSelector, short)
		}
	}
}

// parseFileMode parses an octal permission string ("0644", "644", "4755")
// of at most 07777.
func parseFileMode(s string) (uint32, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return 0, false
		}
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, false
	}
	return uint32(m), true
}

// formatFileMode writes a mode with four octal digits.
func formatFileMode(m uint32) string {
	s := strconv.FormatUint(uint64(m), 8)
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

// ---------------------------------------------------------------------------
// Deep copies, so that Validate can default a copy without touching its
// argument.

// cloneObject returns a deep copy of the spec-bearing parts of o (metadata
// and spec; status is shared, as nothing here writes it).
func cloneObject(o Object) Object {
	switch v := o.(type) {
	case *Deployment:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Replicas = clonePtr(v.Spec.Replicas)
		c.Spec.Selector = maps.Clone(v.Spec.Selector)
		c.Spec.Strategy.MaxSurge = clonePtr(v.Spec.Strategy.MaxSurge)
		c.Spec.Strategy.MaxUnavailable = clonePtr(v.Spec.Strategy.MaxUnavailable)
		c.Spec.Template = v.Spec.Template.DeepCopy()
		return &c
	case *Daemon:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Strategy.MaxUnavailable = clonePtr(v.Spec.Strategy.MaxUnavailable)
		c.Spec.Template = v.Spec.Template.DeepCopy()
		return &c
	case *Service:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Selector = maps.Clone(v.Spec.Selector)
		c.Spec.Ports = slices.Clone(v.Spec.Ports)
		return &c
	case *Job:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Retries = clonePtr(v.Spec.Retries)
		c.Spec.Template = v.Spec.Template.DeepCopy()
		return &c
	case *Pod:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Template = v.Spec.Template.DeepCopy()
		c.Spec.HostPorts = maps.Clone(v.Spec.HostPorts)
		c.Spec.Secrets = slices.Clone(v.Spec.Secrets)
		return &c
	case *Node:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		return &c
	case *Secret:
		c := *v
		c.Metadata = cloneMeta(v.Metadata)
		c.Spec.Data = maps.Clone(v.Spec.Data)
		return &c
	}
	return o
}

func cloneMeta(m ObjectMeta) ObjectMeta {
	m.Labels = maps.Clone(m.Labels)
	return m
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// DeepCopy returns a copy of t that shares no map, slice or pointer with
// it, so a pod made from a template shares nothing with its owner.
func (t PodTemplate) DeepCopy() PodTemplate {
	t.Labels = maps.Clone(t.Labels)
	t.Exec = slices.Clone(t.Exec)
	t.Env = maps.Clone(t.Env)
	t.Files = slices.Clone(t.Files)
	t.Artifacts = slices.Clone(t.Artifacts)
	t.Ports = slices.Clone(t.Ports)
	t.NodeSelector = maps.Clone(t.NodeSelector)
	t.Devices = slices.Clone(t.Devices)
	t.Secrets = slices.Clone(t.Secrets)
	if t.Readiness != nil {
		p := *t.Readiness
		p.Exec = slices.Clone(p.Exec)
		t.Readiness = &p
	}
	t.OnDisconnect = clonePtr(t.OnDisconnect)
	return t
}

// PortName is the name of the template's port i: its own, or the default
// SetDefaults gives an unnamed port ("p" and its index), so a spec stored
// before defaulting names its ports the same way.
func (t *PodTemplate) PortName(i int) string {
	if n := t.Ports[i].Name; n != "" {
		return n
	}
	return defaultPortNamePrefix + strconv.Itoa(i)
}

// Perm returns the file's mode as an fs.FileMode (permission bits plus
// setuid, setgid and sticky), the empty Mode being DefaultFileMode. A mode
// that is not an octal permission string is an error naming it; Validate
// refuses such a file at admission.
func (f File) Perm() (fs.FileMode, error) {
	s := f.Mode
	if s == "" {
		s = DefaultFileMode
	}
	m, ok := parseFileMode(s)
	if !ok {
		return 0, fmt.Errorf("api: file %s: mode %q is not an octal permission string such as 0644", f.Path, s)
	}
	return FileModeOf(m), nil
}

// FileModeOf turns octal permission bits, as chmod takes them (setuid
// 04000, setgid 02000 and sticky 01000 included), into an fs.FileMode.
func FileModeOf(octal uint32) fs.FileMode {
	mode := fs.FileMode(octal & 0o777)
	if octal&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if octal&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if octal&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// OctalMode is FileModeOf the other way round: m's permission, setuid,
// setgid and sticky bits as chmod takes them.
func OctalMode(m fs.FileMode) uint32 {
	octal := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		octal |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		octal |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		octal |= 0o1000
	}
	return octal
}
