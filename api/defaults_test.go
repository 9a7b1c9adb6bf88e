package api

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSetDefaultsDeployment(t *testing.T) {
	d := &Deployment{
		Metadata: ObjectMeta{Name: "web"},
		Spec: DeploymentSpec{Template: PodTemplate{
			Exec:      []string{"/bin/web"},
			Ports:     []Port{{Port: 8080}, {Name: "admin"}},
			Files:     []File{{Path: "/a"}, {Path: "/b", Mode: "755"}, {Path: "/c", Mode: "00600"}},
			Resources: Resources{MemoryLimit: "064M", CPULimit: "050%"},
			Readiness: &Probe{HTTP: "/healthz"},
		}},
	}
	SetDefaults(d)
	want := &Deployment{
		Kind:     KindDeployment,
		Metadata: ObjectMeta{Name: "web"},
		Spec: DeploymentSpec{
			Selector: map[string]string{"app": "web"},
			Strategy: RolloutStrategy{MaxSurge: intp(1), MaxUnavailable: intp(0)},
			Template: PodTemplate{
				Labels:        map[string]string{"app": "web"},
				Exec:          []string{"/bin/web"},
				Ports:         []Port{{Name: "p0", Port: 8080, Protocol: "tcp"}, {Name: "admin", Protocol: "tcp"}},
				Files:         []File{{Path: "/a", Mode: "0644"}, {Path: "/b", Mode: "0755"}, {Path: "/c", Mode: "0600"}},
				Resources:     Resources{MemoryLimit: "64M", CPULimit: "50%", MemoryRequest: "64M", CPURequest: "50%"},
				RestartPolicy: RestartAlways, Sandbox: SandboxDefault,
				Readiness: &Probe{HTTP: "/healthz", HTTPPort: "p0", PeriodSeconds: 5, TimeoutSeconds: 2},
			},
		},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
	if d.Spec.Replicas != nil {
		t.Error("SetDefaults set Replicas; the server decides at apply")
	}
	// The selector is a copy, not the template's map.
	d.Spec.Selector["x"] = "y"
	if _, shared := d.Spec.Template.Labels["x"]; shared {
		t.Error("selector shares its map with the template labels")
	}
}

func TestSetDefaultsKeepsUserValues(t *testing.T) {
	d := &Deployment{
		Metadata: ObjectMeta{Name: "web"},
		Spec: DeploymentSpec{
			Replicas: intp(0),
			Selector: map[string]string{"app": "x"},
			Strategy: RolloutStrategy{MaxSurge: intp(0), MaxUnavailable: intp(2)},
			Template: PodTemplate{
				Labels:        map[string]string{"app": "x", "v": "2"},
				RestartPolicy: RestartNever, Sandbox: SandboxDefault,
				Ports:     []Port{{Name: "dns", Protocol: "udp"}},
				Resources: Resources{MemoryLimit: "1024K", MemoryRequest: "512K", CPULimit: "200%", CPURequest: "10%"},
				Readiness: &Probe{TCP: "dns", PeriodSeconds: 1},
			},
		},
	}
	want := cloneObject(d).(*Deployment)
	want.Kind = KindDeployment
	want.Spec.Template.Readiness.TimeoutSeconds = 1 // at most the period
	SetDefaults(d)
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("SetDefaults changed user values (-want +got):\n%s", diff)
	}
}

func TestSetDefaultsOther(t *testing.T) {
	tests := []struct {
		name     string
		in, want Object
	}{
		{
			"daemon labels and node selector shorthands",
			&Daemon{Metadata: ObjectMeta{Name: "exporter"}, Spec: DaemonSpec{Template: PodTemplate{
				NodeSelector: map[string]string{"arch": "arm64", "model": "rpi4", "zone": "a"},
			}}},
			&Daemon{Kind: KindDaemon, Metadata: ObjectMeta{Name: "exporter"}, Spec: DaemonSpec{Template: PodTemplate{
				Labels:        map[string]string{"app": "exporter"},
				RestartPolicy: RestartAlways, Sandbox: SandboxDefault,
				NodeSelector: map[string]string{LabelArch: "arm64", LabelModel: "rpi4", "zone": "a"},
			}}},
		},
		{
			"conflicting shorthand left for Validate",
			&Daemon{Metadata: ObjectMeta{Name: "x"}, Spec: DaemonSpec{Template: PodTemplate{
				Labels:       map[string]string{"k": "v"},
				NodeSelector: map[string]string{"arch": "arm64", LabelArch: "amd64"},
			}}},
			&Daemon{Kind: KindDaemon, Metadata: ObjectMeta{Name: "x"}, Spec: DaemonSpec{Template: PodTemplate{
				Labels:        map[string]string{"k": "v"},
				RestartPolicy: RestartAlways, Sandbox: SandboxDefault,
				NodeSelector: map[string]string{"arch": "arm64", LabelArch: "amd64"},
			}}},
		},
		{
			"service port names",
			&Service{Metadata: ObjectMeta{Name: "s"}, Spec: ServiceSpec{Ports: []ServicePort{{Target: "http"}, {Name: "x", Target: "80"}, {Target: "8080"}}}},
			&Service{Kind: KindService, Metadata: ObjectMeta{Name: "s"}, Spec: ServiceSpec{Ports: []ServicePort{{Name: "http", Target: "http"}, {Name: "x", Target: "80"}, {Name: "8080", Target: "8080"}}}},
		},
		{
			"percent memory limit gives no request",
			&Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Template: PodTemplate{Resources: Resources{MemoryLimit: "50%"}}}},
			&Pod{Kind: KindPod, Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Template: PodTemplate{RestartPolicy: RestartAlways, Sandbox: SandboxDefault, Resources: Resources{MemoryLimit: "50%"}}}},
		},
		{
			"invalid values are left alone",
			&Pod{Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Template: PodTemplate{
				Resources: Resources{MemoryLimit: "064m", CPULimit: "0.5"},
				Files:     []File{{Path: "/x", Mode: "0999"}},
			}}},
			&Pod{Kind: KindPod, Metadata: ObjectMeta{Name: "p"}, Spec: PodSpec{Template: PodTemplate{
				RestartPolicy: RestartAlways, Sandbox: SandboxDefault,
				Resources: Resources{MemoryLimit: "064m", CPULimit: "0.5"},
				Files:     []File{{Path: "/x", Mode: "0999"}},
			}}},
		},
		{
			"invalid name gives no labels",
			&Daemon{Metadata: ObjectMeta{Name: "A;b"}},
			&Daemon{Kind: KindDaemon, Metadata: ObjectMeta{Name: "A;b"}, Spec: DaemonSpec{Template: PodTemplate{RestartPolicy: RestartAlways, Sandbox: SandboxDefault}}},
		},
		{
			"node",
			&Node{Metadata: ObjectMeta{Name: "pi"}},
			&Node{Kind: KindNode, Metadata: ObjectMeta{Name: "pi"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDefaults(tt.in)
			if diff := cmp.Diff(tt.want, tt.in); diff != "" {
				t.Errorf("SetDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetDefaultsIdempotent defaults every good manifest and the validation
// fixtures twice.
func TestSetDefaultsIdempotent(t *testing.T) {
	var objs []Object
	files, _ := filepath.Glob("testdata/good/*.toml")
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeManifest(path, b)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, got...)
	}
	objs = append(objs,
		validDeployment(), validService(),
		tmpl(func(t *PodTemplate) {
			t.Ports = []Port{{}, {Name: "p0"}}
			t.Readiness = &Probe{HTTP: "/", PeriodSeconds: 1}
			t.NodeSelector = map[string]string{"arch": "x", "model": "y"}
			t.Resources = Resources{MemoryLimit: "0010M", CPULimit: "01%"}
		}),
	)
	for _, o := range objs {
		t.Run(string(o.GetKind())+"/"+o.GetMeta().Name, func(t *testing.T) {
			SetDefaults(o)
			once := cloneObject(o)
			SetDefaults(o)
			if diff := cmp.Diff(once, o); diff != "" {
				t.Errorf("SetDefaults twice differs from once (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestCloneObjectIsDeep(t *testing.T) {
	d := dep(func(d *Deployment) {
		d.Metadata.Labels = map[string]string{"a": "b"}
		d.Spec.Replicas = intp(1)
		d.Spec.Template.Readiness = &Probe{Exec: []string{"/x"}}
		d.Spec.Template.Env = map[string]string{"A": "1"}
	})
	c := cloneObject(d).(*Deployment)
	c.Metadata.Labels["a"] = "c"
	*c.Spec.Replicas = 2
	c.Spec.Template.Readiness.Exec[0] = "/y"
	c.Spec.Template.Env["A"] = "2"
	c.Spec.Template.Exec[0] = "/z"
	c.Spec.Template.Ports[0].Name = "q"
	if d.Metadata.Labels["a"] != "b" || *d.Spec.Replicas != 1 || d.Spec.Template.Readiness.Exec[0] != "/x" ||
		d.Spec.Template.Env["A"] != "1" || d.Spec.Template.Exec[0] == "/z" || d.Spec.Template.Ports[0].Name != "http" {
		t.Error("cloneObject shares memory with its argument")
	}
}

func TestPortName(t *testing.T) {
	tm := PodTemplate{Ports: []Port{{Name: "http", Port: 80}, {Port: 9000}}}
	if got := tm.PortName(0); got != "http" {
		t.Errorf("PortName(0) = %q, want http", got)
	}
	if got := tm.PortName(1); got != "p1" {
		t.Errorf("PortName(1) = %q, want p1", got)
	}
	d := Deployment{Metadata: ObjectMeta{Name: "web"}, Spec: DeploymentSpec{Template: tm}}
	SetDefaults(&d)
	if got := d.Spec.Template.Ports[1].Name; got != tm.PortName(1) {
		t.Errorf("SetDefaults named port 1 %q, PortName says %q", got, tm.PortName(1))
	}
}

func TestFilePerm(t *testing.T) {
	tests := []struct {
		mode    string
		want    fs.FileMode
		wantErr bool
	}{
		{"", 0o644, false},
		{"0600", 0o600, false},
		{"4755", 0o755 | fs.ModeSetuid, false},
		{"2750", 0o750 | fs.ModeSetgid, false},
		{"1777", 0o777 | fs.ModeSticky, false},
		{"0888", 0, true},
		{"17777", 0, true},
		{"rw-r--r--", 0, true},
	}
	for _, tt := range tests {
		got, err := File{Path: "/etc/x", Mode: tt.mode}.Perm()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Perm(%q) = %v, %v; want %v, error %v", tt.mode, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestOctalModeRoundTrip(t *testing.T) {
	for _, octal := range []uint32{0, 0o600, 0o644, 0o4755, 0o2750, 0o1777, 0o7777} {
		m := FileModeOf(octal)
		if got := OctalMode(m); got != octal {
			t.Errorf("OctalMode(FileModeOf(%#o)) = %#o (mode %v)", octal, got, m)
		}
	}
	if got := OctalMode(0o755 | fs.ModeSetuid | fs.ModeDir); got != 0o4755 {
		t.Errorf("OctalMode keeps only permission and special bits: got %#o, want 04755", got)
	}
}

func TestPhasePredicates(t *testing.T) {
	for ph, want := range map[PodPhase][3]bool{
		"": {false, false, true}, PodPending: {false, false, true},
		PodScheduled: {false, true, false}, PodStarting: {false, true, false}, PodRunning: {false, true, false},
		PodFailed: {true, false, false}, PodLost: {true, false, false}, PodSucceeded: {true, false, false},
	} {
		if got := [3]bool{ph.Terminal(), ph.Occupies(), ph.Pending()}; got != want {
			t.Errorf("%q: Terminal, Occupies, Pending = %v, want %v", ph, got, want)
		}
	}
}
