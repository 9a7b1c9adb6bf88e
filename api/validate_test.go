package api

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func validDeployment() *Deployment {
	return &Deployment{
		Metadata: ObjectMeta{Name: "web"},
		Spec: DeploymentSpec{Template: PodTemplate{
			Exec:  []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
			Ports: []Port{{Name: "http"}},
		}},
	}
}

func dep(mut func(d *Deployment)) *Deployment {
	d := validDeployment()
	mut(d)
	return d
}

// tmpl mutates the template of a valid deployment.
func tmpl(mut func(t *PodTemplate)) *Deployment {
	return dep(func(d *Deployment) { mut(&d.Spec.Template) })
}

func validService() *Service {
	return &Service{
		Metadata: ObjectMeta{Name: "web"},
		Spec: ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []ServicePort{{Target: "http"}},
		},
	}
}

func svc(mut func(s *Service)) *Service {
	s := validService()
	mut(s)
	return s
}

func probe(mut func(p *Probe)) *Deployment {
	return tmpl(func(t *PodTemplate) {
		t.Readiness = &Probe{TCP: "http"}
		mut(t.Readiness)
	})
}

func TestValidateValid(t *testing.T) {
	tests := []struct {
		name string
		obj  Object
	}{
		{"minimal deployment", validDeployment()},
		{"zero replicas", dep(func(d *Deployment) { d.Spec.Replicas = intp(0) })},
		{"max replicas", dep(func(d *Deployment) { d.Spec.Replicas = intp(MaxReplicas) })},
		{"63-character name", dep(func(d *Deployment) { d.Metadata.Name = strings.Repeat("a", 63) })},
		{"prefixed label key", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{"herd.dev/arch": "arm64", "a.b_c-d": ""} })},
		{"newline in argv and env", tmpl(func(t *PodTemplate) {
			t.Exec = append(t.Exec, "line\nbreak")
			t.Env = map[string]string{"MOTD": "a\nb", "_X1": ""}
		})},
		{"bare command name", tmpl(func(t *PodTemplate) { t.Exec = []string{"sleep", "10"} })},
		{"fixed and dynamic ports", tmpl(func(t *PodTemplate) {
			t.Ports = []Port{{Name: "a", Port: 80}, {Name: "b", Port: 80, Protocol: "udp"}, {Port: 0}, {Port: 65535}}
		})},
		{"limits and requests", tmpl(func(t *PodTemplate) {
			t.Resources = Resources{MemoryLimit: "1G", CPULimit: "150%", MemoryRequest: "512M", CPURequest: "150%"}
		})},
		{"percent memory limit", tmpl(func(t *PodTemplate) { t.Resources = Resources{MemoryLimit: "50%"} })},
		{"files", tmpl(func(t *PodTemplate) {
			t.Files = []File{{Path: "/etc/a", Content: "x\x00y"}, {Path: "/etc/b", Mode: "755"}, {Path: "/etc/c", Mode: "07777", AllowSetID: true}}
		})},
		{"user and working dir", tmpl(func(t *PodTemplate) { t.User = "_web-1"; t.WorkingDir = "/srv/web" })},
		{"http probe on first port", probe(func(p *Probe) { *p = Probe{HTTP: "/healthz?full=1"} })},
		{"tcp probe by number", probe(func(p *Probe) { p.TCP = "8080" })},
		{"exec probe", probe(func(p *Probe) { *p = Probe{Exec: []string{"/bin/check"}, PeriodSeconds: 1} })},
		{"node selector shorthand", tmpl(func(t *PodTemplate) { t.NodeSelector = map[string]string{"arch": "arm64", "herd.dev/arch": "arm64"} })},
		{"service", validService()},
		{"service target number", svc(func(s *Service) { s.Spec.Ports = []ServicePort{{Target: "8080"}, {Name: "b", Target: "http"}} })},
		{"service proxy port", svc(func(s *Service) { s.Spec.Ports[0].Port = 8080 })},
		{"service proxy tcp and udp", svc(func(s *Service) {
			s.Spec.Ports = []ServicePort{{Name: "a", Target: "http", Port: 53}, {Name: "b", Target: "http", Port: 53, Protocol: "udp"}}
		})},
		{"daemon", &Daemon{Metadata: ObjectMeta{Name: "agent"}, Spec: DaemonSpec{Template: PodTemplate{Exec: []string{"/bin/agent"}}}}},
		{"pod", &Pod{Metadata: ObjectMeta{Name: "web-1a2b3c4d5e-x7k2p"}, Spec: PodSpec{Template: PodTemplate{Exec: []string{"/bin/x"}}}}},
		{"node with dots and capitals", &Node{Metadata: ObjectMeta{Name: "Pi-1.local"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Validate(tt.obj); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestValidateRules has one case per rule: the field that must be reported
// and a piece of its message.
func TestValidateRules(t *testing.T) {
	tests := []struct {
		name  string
		obj   Object
		field string
		msg   string
	}{
		// names
		{"name required", dep(func(d *Deployment) { d.Metadata.Name = "" }), "metadata.name", "required"},
		{"name upper case", dep(func(d *Deployment) { d.Metadata.Name = "Web" }), "metadata.name", "lower-case"},
		{"name too long", dep(func(d *Deployment) { d.Metadata.Name = strings.Repeat("a", 64) }), "metadata.name", "at most 63"},
		{"name leading dash", dep(func(d *Deployment) { d.Metadata.Name = "-web" }), "metadata.name", "start and end"},
		{"name shell", dep(func(d *Deployment) { d.Metadata.Name = "web;rm -rf /" }), "metadata.name", "not a valid name"},
		{"name substitution", svc(func(s *Service) { s.Metadata.Name = "$(reboot)" }), "metadata.name", "not a valid name"},
		{"node name", &Node{Metadata: ObjectMeta{Name: "pi 1"}}, "metadata.name", "only letters"},
		{"kind mismatch", dep(func(d *Deployment) { d.Kind = KindPod }), "kind", "object is a deployments"},
		// labels
		{"label key", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{"a b": "x"} }), "metadata.labels[\"a b\"]", "invalid label key"},
		{"label key too long", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{strings.Repeat("k", 64): "x"} }), "metadata.labels[" + strings.Repeat("k", 64) + "]", "1 to 63"},
		{"label prefix", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{"Herd.dev/x": "x"} }), "metadata.labels[Herd.dev/x]", "DNS name"},
		{"label value", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{"k": "a b"} }), "metadata.labels[k]", "invalid label value"},
		{"label value too long", dep(func(d *Deployment) { d.Metadata.Labels = map[string]string{"k": strings.Repeat("v", 64)} }), "metadata.labels[k]", "at most 63"},
		// deployment
		{"replicas negative", dep(func(d *Deployment) { d.Spec.Replicas = intp(-1) }), "spec.replicas", "between 0 and 1000"},
		{"replicas too many", dep(func(d *Deployment) { d.Spec.Replicas = intp(1001) }), "spec.replicas", "between 0 and 1000"},
		{"surge negative", dep(func(d *Deployment) { d.Spec.Strategy.MaxSurge = intp(-1) }), "spec.strategy.maxSurge", "between 0"},
		{"unavailable negative", dep(func(d *Deployment) { d.Spec.Strategy.MaxUnavailable = intp(-1) }), "spec.strategy.maxUnavailable", "between 0"},
		{"strategy both zero", dep(func(d *Deployment) { d.Spec.Strategy.MaxSurge = intp(0) }), "spec.strategy", "both be 0"},
		{"selector mismatch", dep(func(d *Deployment) { d.Spec.Selector = map[string]string{"app": "api"} }), "spec.selector", "does not match the template labels"},
		{"selector bad label", dep(func(d *Deployment) {
			d.Spec.Selector = map[string]string{"app": "w b"}
			d.Spec.Template.Labels = map[string]string{"app": "w b"}
		}), "spec.selector[app]", "invalid label value"},
		{"allow unenforced without a limit", dep(func(d *Deployment) {
			d.Spec.Template.Resources = Resources{AllowUnenforcedLimits: true, MemoryRequest: "8M"}
		}), "spec.template.resources.allowUnenforcedLimits", "no memory_limit or cpu_limit"},
		// service
		{"service selector", svc(func(s *Service) { s.Spec.Selector = nil }), "spec.selector", "required"},
		{"service ports", svc(func(s *Service) { s.Spec.Ports = nil }), "spec.ports", "at least one port"},
		{"service target missing", svc(func(s *Service) { s.Spec.Ports = []ServicePort{{Name: "x"}} }), "spec.ports[0].target", "required"},
		{"service target number", svc(func(s *Service) { s.Spec.Ports[0].Target = "70000" }), "spec.ports[0].target", "between 1 and 65535"},
		{"service target name", svc(func(s *Service) { s.Spec.Ports[0].Target = "Http" }), "spec.ports[0].target", "neither a port name nor a port number"},
		{"service port name", svc(func(s *Service) { s.Spec.Ports[0].Name = "a_b" }), "spec.ports[0].name", "not a valid port name"},
		{"service proxy port range", svc(func(s *Service) { s.Spec.Ports[0].Port = 70000 }), "spec.ports[0].port", "between 1 and 65535"},
		{"service proxy protocol", svc(func(s *Service) { s.Spec.Ports[0].Port, s.Spec.Ports[0].Protocol = 80, "sctp" }), "spec.ports[0].protocol", "tcp or udp"},
		{"service protocol without port", svc(func(s *Service) { s.Spec.Ports[0].Protocol = "udp" }), "spec.ports[0].protocol", "needs a port"},
		{"service proxy herd port", svc(func(s *Service) { s.Spec.Ports[0].Port = 8600 }), "spec.ports[0].port", "herd's own ports"},
		{"service proxy duplicate", svc(func(s *Service) {
			s.Spec.Ports = []ServicePort{{Name: "a", Target: "http", Port: 80}, {Name: "b", Target: "http", Port: 80}}
		}), "spec.ports[1].port", "duplicate 80/tcp"},
		{"service port duplicate", svc(func(s *Service) { s.Spec.Ports = append(s.Spec.Ports, ServicePort{Target: "http"}) }), "spec.ports[1].name", "duplicate"},
		// exec
		{"exec missing", tmpl(func(t *PodTemplate) { t.Exec = nil }), "spec.template.exec", "required"},
		{"exec empty command", tmpl(func(t *PodTemplate) { t.Exec = []string{"", "x"} }), "spec.template.exec[0]", "must not be empty"},
		{"exec systemd prefix", tmpl(func(t *PodTemplate) { t.Exec = []string{"-/bin/x"} }), "spec.template.exec[0]", "must not start with"},
		{"exec relative path", tmpl(func(t *PodTemplate) { t.Exec = []string{"./run"} }), "spec.template.exec[0]", "absolute path or a bare command"},
		{"exec newline in command", tmpl(func(t *PodTemplate) { t.Exec = []string{"/bin/x\n"} }), "spec.template.exec[0]", "newlines"},
		{"argv NUL", tmpl(func(t *PodTemplate) { t.Exec = []string{"/bin/echo", "a\x00"} }), "spec.template.exec[1]", "NUL"},
		{"argv UTF-8", tmpl(func(t *PodTemplate) { t.Exec = []string{"/bin/echo", "\xff"} }), "spec.template.exec[1]", "UTF-8"},
		// env
		{"env key digit", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"1A": ""} }), "spec.template.env[1A]", "invalid environment variable name"},
		{"env key dash", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"A-B": ""} }), "spec.template.env[A-B]", "invalid environment variable name"},
		{"env key empty", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"": "x"} }), "spec.template.env[\"\"]", "invalid environment variable name"},
		{"env PORT", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"PORT": "80"} }), "spec.template.env[PORT]", "reserved"},
		{"env PORT_", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"PORT_HTTP": "80"} }), "spec.template.env[PORT_HTTP]", "reserved"},
		{"env value NUL", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"A": "\x00"} }), "spec.template.env[A]", "NUL"},
		// files
		{"file path missing", tmpl(func(t *PodTemplate) { t.Files = []File{{Content: "x"}} }), "spec.template.files[0].path", "required"},
		{"file path relative", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "etc/x"}} }), "spec.template.files[0].path", "absolute"},
		{"file path dotdot", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/etc/../x"}} }), "spec.template.files[0].path", `".."`},
		{"file path unclean", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/etc//x/"}} }), "spec.template.files[0].path", `did you mean "/etc/x"`},
		{"file path dot", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/etc/./x"}} }), "spec.template.files[0].path", "clean path"},
		{"file path NUL", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/etc/x\x00"}} }), "spec.template.files[0].path", "NUL"},
		{"file path newline", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/etc/x\ny"}} }), "spec.template.files[0].path", "newlines"},
		{"file path root", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/"}} }), "spec.template.files[0].path", "directory"},
		{"file path duplicate", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/x"}, {Path: "/x"}} }), "spec.template.files[1].path", "duplicate"},
		{"file mode digits", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/x", Mode: "0999"}} }), "spec.template.files[0].mode", "octal"},
		{"file mode too big", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/x", Mode: "10000"}} }), "spec.template.files[0].mode", "octal"},
		{"file content UTF-8", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/x", Content: "\xff"}} }), "spec.template.files[0].content", "UTF-8"},
		{"file content size", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/x", Content: strings.Repeat("x", MaxFileSize+1)}} }), "spec.template.files[0].content", "at most"},
		{"file setuid", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/opt/x", Mode: "4755"}} }), "spec.template.files[0].mode", "allow_setid = true"},
		{"file setgid", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/opt/x", Mode: "2711"}} }), "spec.template.files[0].mode", "setuid or setgid bit on /opt/x"},
		{"file in private tmp", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/var/tmp/x"}} }), "spec.template.files[0].path", "PrivateTmp"},
		{"file path too long", tmpl(func(t *PodTemplate) { t.Files = []File{{Path: "/" + strings.Repeat("\"", 1100)}} }), "spec.template.files[0].path", "one unit file line"},
		// unit file rules
		{"exec0 pipe", tmpl(func(t *PodTemplate) { t.Exec = []string{"|/bin/true"} }), "spec.template.exec[0]", "'|'"},
		{"exec0 dollar", tmpl(func(t *PodTemplate) { t.Exec = []string{"/opt/${PORT}/run"} }), "spec.template.exec[0]", "must not contain '$'"},
		{"exec0 dotdot", tmpl(func(t *PodTemplate) { t.Exec = []string{".."} }), "spec.template.exec[0]", "bare command name"},
		{"exec arg too long", tmpl(func(t *PodTemplate) { t.Exec = []string{"/bin/echo", strings.Repeat("%", 1020)} }), "spec.template.exec[1]", "once quoted"},
		{"env assignment too long", tmpl(func(t *PodTemplate) { t.Env = map[string]string{"A": strings.Repeat("x", MaxEnvAssignment-1)} }), "spec.template.env[A]", "131071"},
		{"working dir trailing blank", tmpl(func(t *PodTemplate) { t.WorkingDir = "/srv/app " }), "spec.template.workingDir", "blank"},
		{"working dir trailing backslash", tmpl(func(t *PodTemplate) { t.WorkingDir = `/srv/app\` }), "spec.template.workingDir", "backslash"},
		{"working dir control", tmpl(func(t *PodTemplate) { t.WorkingDir = "/srv/\x1b" }), "spec.template.workingDir", "control"},
		{"sandbox unknown", tmpl(func(t *PodTemplate) { t.Sandbox = "strict" }), "spec.template.sandbox", `"default" or "none"`},
		// on_disconnect
		{"stop_after missing", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{} }), "spec.template.onDisconnect.stopAfter", "required"},
		{"stop_after not a duration", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{StopAfter: "30"} }), "spec.template.onDisconnect.stopAfter", "not a duration"},
		{"stop_after systemd spelling", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{StopAfter: "30sec"} }), "spec.template.onDisconnect.stopAfter", "not a duration"},
		{"stop_after too short", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{StopAfter: "4.9s"} }), "spec.template.onDisconnect.stopAfter", "from 5s"},
		{"stop_after negative", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{StopAfter: "-30s"} }), "spec.template.onDisconnect.stopAfter", "from 5s"},
		{"stop_after too long", tmpl(func(t *PodTemplate) { t.OnDisconnect = &OnDisconnect{StopAfter: "24h1s"} }), "spec.template.onDisconnect.stopAfter", "from 5s"},
		{"template budget", tmpl(func(t *PodTemplate) {
			t.Files = []File{{Path: "/a", Content: strings.Repeat("<", MaxTemplateBytes/6)}}
		}), "spec.template", "Raft transaction of 1048576"},
		// pods
		{"pod owner kind", &Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Owner: OwnerRef{Kind: KindService, Name: "x"}, Template: PodTemplate{Exec: []string{"/x"}}}}, "spec.owner.kind", "deployments, daemons or jobs"},
		{"pod revision", &Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Revision: "a b", Template: PodTemplate{Exec: []string{"/x"}}}}, "spec.revision", "printable ASCII"},
		{"pod host port", &Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{HostPorts: map[string]int{"http": 0},
			Template: PodTemplate{Exec: []string{"/x"}, Ports: []Port{{Name: "http"}}}}}, "spec.hostPorts[http]", "outside 1-65535"},
		{"pod host port unknown", &Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{HostPorts: map[string]int{"web": 80},
			Template: PodTemplate{Exec: []string{"/x"}}}}, "spec.hostPorts[web]", "no port named"},
		// working dir and user
		{"working dir relative", tmpl(func(t *PodTemplate) { t.WorkingDir = "srv" }), "spec.template.workingDir", "absolute"},
		{"working dir dotdot", tmpl(func(t *PodTemplate) { t.WorkingDir = "/srv/.." }), "spec.template.workingDir", `".."`},
		{"user upper case", tmpl(func(t *PodTemplate) { t.User = "Web" }), "spec.template.user", "not a valid user name"},
		{"user digit first", tmpl(func(t *PodTemplate) { t.User = "1web" }), "spec.template.user", "not a valid user name"},
		{"user too long", tmpl(func(t *PodTemplate) { t.User = strings.Repeat("u", 33) }), "spec.template.user", "at most 32"},
		// ports
		{"port too big", tmpl(func(t *PodTemplate) { t.Ports[0].Port = 65536 }), "spec.template.ports[0].port", "between 1 and 65535"},
		{"port negative", tmpl(func(t *PodTemplate) { t.Ports[0].Port = -1 }), "spec.template.ports[0].port", "or 0"},
		{"port name", tmpl(func(t *PodTemplate) { t.Ports[0].Name = "HTTP" }), "spec.template.ports[0].name", "not a valid port name"},
		{"port name duplicate", tmpl(func(t *PodTemplate) { t.Ports = []Port{{Name: "a"}, {Name: "a"}} }), "spec.template.ports[1].name", "duplicate"},
		{"port name clashes with default", tmpl(func(t *PodTemplate) { t.Ports = []Port{{Name: "p1"}, {}} }), "spec.template.ports[1].name", "duplicate port name \"p1\""},
		{"port protocol", tmpl(func(t *PodTemplate) { t.Ports[0].Protocol = "sctp" }), "spec.template.ports[0].protocol", "tcp or udp"},
		{"port number duplicate", tmpl(func(t *PodTemplate) { t.Ports = []Port{{Port: 80}, {Port: 80}} }), "spec.template.ports[1].port", "also used"},
		// resources
		{"memory lower-case suffix", tmpl(func(t *PodTemplate) { t.Resources.MemoryLimit = "64m" }), "spec.template.resources.memoryLimit", `did you mean "64M"`},
		{"memory fraction", tmpl(func(t *PodTemplate) { t.Resources.MemoryLimit = "1.5G" }), "spec.template.resources.memoryLimit", "whole number"},
		{"memory MB", tmpl(func(t *PodTemplate) { t.Resources.MemoryLimit = "64MB" }), "spec.template.resources.memoryLimit", "not \"64MB\""},
		{"memory zero", tmpl(func(t *PodTemplate) { t.Resources.MemoryLimit = "0" }), "spec.template.resources.memoryLimit", "greater than zero"},
		{"memory percent", tmpl(func(t *PodTemplate) { t.Resources.MemoryLimit = "101%" }), "spec.template.resources.memoryLimit", "between 1% and 100%"},
		{"cpu fraction", tmpl(func(t *PodTemplate) { t.Resources.CPULimit = "0.5" }), "spec.template.resources.cpuLimit", "percentage of one core"},
		{"cpu zero", tmpl(func(t *PodTemplate) { t.Resources.CPULimit = "0%" }), "spec.template.resources.cpuLimit", "between 1%"},
		{"memory request percent", tmpl(func(t *PodTemplate) { t.Resources.MemoryRequest = "10%" }), "spec.template.resources.memoryRequest", "absolute"},
		{"memory request above limit", tmpl(func(t *PodTemplate) { t.Resources = Resources{MemoryLimit: "64M", MemoryRequest: "65M"} }), "spec.template.resources.memoryRequest", "more than the limit"},
		{"cpu request above limit", tmpl(func(t *PodTemplate) { t.Resources = Resources{CPULimit: "50%", CPURequest: "60%"} }), "spec.template.resources.cpuRequest", "more than the limit"},
		{"cpu request invalid", tmpl(func(t *PodTemplate) { t.Resources.CPURequest = "1" }), "spec.template.resources.cpuRequest", "percentage"},
		// restart
		{"restart policy", tmpl(func(t *PodTemplate) { t.RestartPolicy = "sometimes" }), "spec.template.restartPolicy", "always, on-failure or never"},
		// readiness
		{"probe none", probe(func(p *Probe) { p.TCP = "" }), "spec.template.readiness", "exactly one of tcp, http or exec, got 0"},
		{"probe two", probe(func(p *Probe) { p.HTTP = "/" }), "spec.template.readiness", "got 2"},
		{"probe tcp unknown port", probe(func(p *Probe) { p.TCP = "admin" }), "spec.template.readiness.tcp", "no port named \"admin\""},
		{"probe tcp port zero", probe(func(p *Probe) { p.TCP = "0" }), "spec.template.readiness.tcp", "between 1 and 65535"},
		{"probe http path", probe(func(p *Probe) { *p = Probe{HTTP: "healthz"} }), "spec.template.readiness.http", "starting with '/'"},
		{"probe http blank", probe(func(p *Probe) { *p = Probe{HTTP: "/a b"} }), "spec.template.readiness.http", "blanks"},
		{"probe http no port", dep(func(d *Deployment) {
			d.Spec.Template.Ports = nil
			d.Spec.Template.Readiness = &Probe{HTTP: "/"}
		}), "spec.template.readiness.httpPort", "no ports"},
		{"probe http_port without http", probe(func(p *Probe) { p.HTTPPort = "http" }), "spec.template.readiness.httpPort", "only used with http"},
		{"probe http_port unknown", probe(func(p *Probe) { *p = Probe{HTTP: "/", HTTPPort: "x"} }), "spec.template.readiness.httpPort", "no port named"},
		{"probe exec empty", probe(func(p *Probe) { *p = Probe{Exec: []string{}} }), "spec.template.readiness.exec", "must not be empty"},
		{"probe exec NUL", probe(func(p *Probe) { *p = Probe{Exec: []string{"/bin/x", "\x00"}} }), "spec.template.readiness.exec[1]", "NUL"},
		{"probe period", probe(func(p *Probe) { p.PeriodSeconds = -1 }), "spec.template.readiness.periodSeconds", "between 1 and 3600"},
		{"probe period too long", probe(func(p *Probe) { p.PeriodSeconds = 3601 }), "spec.template.readiness.periodSeconds", "between 1 and 3600"},
		{"probe timeout above period", probe(func(p *Probe) { p.PeriodSeconds = 2; p.TimeoutSeconds = 3 }), "spec.template.readiness.timeoutSeconds", "between 1 and period_seconds"},
		{"probe failure threshold negative", probe(func(p *Probe) { p.FailureThreshold = -1 }), "spec.template.readiness.failureThreshold", "between 1 and 100"},
		{"probe failure threshold too high", probe(func(p *Probe) { p.FailureThreshold = 101 }), "spec.template.readiness.failureThreshold", "between 1 and 100"},
		// node selector
		{"node selector key", tmpl(func(t *PodTemplate) { t.NodeSelector = map[string]string{"a=b": "c"} }), "spec.template.nodeSelector[\"a=b\"]", "invalid label key"},
		{"node selector conflict", tmpl(func(t *PodTemplate) { t.NodeSelector = map[string]string{"arch": "arm64", "herd.dev/arch": "amd64"} }), "spec.template.nodeSelector[arch]", "different value"},
		// template labels
		{"template label", tmpl(func(t *PodTemplate) { t.Labels = map[string]string{"app": "a/b"} }), "spec.template.labels[app]", "invalid label value"},
		// pods and daemons share the template rules
		{"pod name", &Pod{Metadata: ObjectMeta{Name: "Pod"}, Spec: PodSpec{Template: PodTemplate{Exec: []string{"/x"}}}}, "metadata.name", "not a valid name"},
		{"daemon exec", &Daemon{Metadata: ObjectMeta{Name: "d"}}, "spec.template.exec", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneObject(tt.obj)
			err := Validate(tt.obj)
			if diff := cmp.Diff(before, tt.obj); diff != "" {
				t.Errorf("Validate modified its argument:\n%s", diff)
			}
			if err == nil {
				t.Fatalf("Validate = nil, want a problem with %s", tt.field)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			var fes FieldErrors
			if !errors.As(err, &fes) {
				t.Fatalf("error is %T, want FieldErrors", err)
			}
			wantObj := ObjectRef(tt.obj.GetKind(), tt.obj.GetMeta().Name)
			for _, fe := range fes {
				if fe.Object != wantObj {
					t.Errorf("Object = %q, want %q", fe.Object, wantObj)
				}
				if fe.Field == tt.field && strings.Contains(fe.Message, tt.msg) {
					return
				}
			}
			t.Errorf("no problem with %s containing %q; got:\n%v", tt.field, tt.msg, err)
		})
	}
}

func TestValidateReportsEveryProblemOnePerLine(t *testing.T) {
	d := dep(func(d *Deployment) {
		d.Metadata.Name = "Web"
		d.Spec.Replicas = intp(-1)
		d.Spec.Template.Exec = nil
	})
	err := Validate(d)
	want := strings.Join([]string{
		`deployments/Web: metadata.name: "Web" is not a valid name: only lower-case letters, digits and '-' are allowed (a DNS label such as "web-1")`,
		`deployments/Web: spec.replicas: must be between 0 and 1000, got -1`,
		`deployments/Web: spec.template.exec: required: the command to run, as an argv array such as ["/usr/bin/python3", "-m", "http.server"]`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestValidateNil(t *testing.T) {
	if Validate(nil) == nil {
		t.Error("Validate(nil) = nil")
	}
}

func TestPortEnvName(t *testing.T) {
	if got := PortEnvName("http-alt"); got != "PORT_HTTP_ALT" {
		t.Errorf("PortEnvName = %q", got)
	}
}

func TestParseStopAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"5s", 5 * time.Second, true},
		{"10s", 10 * time.Second, true},
		{"2m", 2 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"24h", 24 * time.Hour, true},
		{"4s", 0, false},
		{"24h0m1s", 0, false},
		{"", 0, false},
		{"30", 0, false},
		{"keep", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseStopAfter(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseStopAfter(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		d, ok := (&OnDisconnect{StopAfter: tt.in}).StopAfterDuration()
		if ok != tt.ok || d != tt.want {
			t.Errorf("StopAfterDuration(%q) = %v, %v; want %v, %v", tt.in, d, ok, tt.want, tt.ok)
		}
	}
	if d, ok := (*OnDisconnect)(nil).StopAfterDuration(); ok || d != 0 {
		t.Errorf("nil (keep) StopAfterDuration = %v, %v; want 0, false", d, ok)
	}
}

func TestObjectRef(t *testing.T) {
	for _, tt := range []struct {
		kind       Kind
		name, want string
	}{
		{KindDeployment, "web", "deployments/web"},
		{KindEvent, "", "events/(unnamed)"},
	} {
		if got := ObjectRef(tt.kind, tt.name); got != tt.want {
			t.Errorf("ObjectRef(%s, %q) = %q, want %q", tt.kind, tt.name, got, tt.want)
		}
	}
}
