package units

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/artifact"
)

var update = flag.Bool("update", false, "rewrite testdata/*.service from the current renderer")

// golden is one testdata case: an input pod and its expected unit file.
type golden struct {
	name string // file stem
	pod  *api.Pod
	unit string // path of the .service file
}

func loadGoldens(t *testing.T) []golden {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.pod.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.pod.json")
	}
	var out []golden
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var p api.Pod
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		stem := strings.TrimSuffix(filepath.Base(in), ".pod.json")
		out = append(out, golden{name: stem, pod: &p, unit: filepath.Join("testdata", stem+".service")})
	}
	return out
}

func TestUnitName(t *testing.T) {
	if got := api.UnitName("web-1"); got != "herd-web-1.service" {
		t.Errorf("api.UnitName(web-1) = %q", got)
	}
	for _, tc := range []struct {
		in   string
		pod  string
		herd bool
	}{
		{"herd-web-1.service", "web-1", true},
		{"herd-a.service", "a", true},
		{"herd-.service", "", false},
		{"herd-web.socket", "", false},
		{"herd-Web.service", "", false},
		{"herd-web-.service", "", false},
		{"herd-a b.service", "", false},
		{"herdweb.service", "", false},
		{"sshd.service", "", false},
		{"herd-" + strings.Repeat("a", 64) + ".service", "", false},
		{"", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			pod, ok := api.PodFromUnitName(tc.in)
			if pod != tc.pod || ok != tc.herd {
				t.Errorf("api.PodFromUnitName(%q) = %q, %v; want %q, %v", tc.in, pod, ok, tc.pod, tc.herd)
			}
			if IsHerdUnit(tc.in) != tc.herd {
				t.Errorf("IsHerdUnit(%q) = %v", tc.in, !tc.herd)
			}
			if ok && api.UnitName(pod) != tc.in {
				t.Errorf("api.UnitName(%q) = %q, want %q", pod, api.UnitName(pod), tc.in)
			}
		})
	}
}

func TestRenderGolden(t *testing.T) {
	for _, g := range loadGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			got, err := Render(g.pod)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if *update {
				if err := os.WriteFile(g.unit, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(g.unit)
			if err != nil {
				t.Fatalf("%v (run go test ./units -run TestRenderGolden -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Render(%s) differs from %s (-want +got):\n%s", g.name, g.unit, diff)
			}

			// A scheduled job's timer, beside its service.
			timerPath := strings.TrimSuffix(g.unit, ".service") + ".timer"
			if g.pod.Spec.Scheduled() {
				timer, err := RenderTimer(g.pod)
				if err != nil {
					t.Fatalf("RenderTimer: %v", err)
				}
				if *update {
					if err := os.WriteFile(timerPath, timer, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(timerPath)
				if err != nil {
					t.Fatalf("%v (run go test ./units -run TestRenderGolden -update)", err)
				}
				if diff := cmp.Diff(string(want), string(timer)); diff != "" {
					t.Errorf("RenderTimer(%s) differs from %s (-want +got):\n%s", g.name, timerPath, diff)
				}
			} else if _, err := RenderTimer(g.pod); err == nil {
				t.Errorf("RenderTimer of a pod without a schedule did not fail")
			}
			// A replacing or overlapping job's kick unit, which its
			// timer starts.
			kickPath := strings.TrimSuffix(g.unit, ".service") + ".kick"
			if g.pod.Spec.ReplacesRuns() || g.pod.Spec.OverlapsRuns() {
				kick, err := RenderKick(g.pod)
				if err != nil {
					t.Fatalf("RenderKick: %v", err)
				}
				if *update {
					if err := os.WriteFile(kickPath, kick, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(kickPath)
				if err != nil {
					t.Fatalf("%v (run go test ./units -run TestRenderGolden -update)", err)
				}
				if diff := cmp.Diff(string(want), string(kick)); diff != "" {
					t.Errorf("RenderKick(%s) differs from %s (-want +got):\n%s", g.name, kickPath, diff)
				}
			} else if _, err := RenderKick(g.pod); err == nil {
				t.Errorf("RenderKick of a pod whose runs neither replace nor overlap did not fail")
			}
			// Only an overlapping job's runs stay loaded after they end.
			if remain := bytes.Contains(got, []byte("\nRemainAfterExit=yes\n")); remain != (g.pod.Spec.OverlapsRuns() || g.pod.Spec.RunsToCompletion() && !g.pod.Spec.Scheduled()) {
				t.Errorf("RemainAfterExit=yes: %v", remain)
			}
			if hasInstall := bytes.Contains(got, []byte("\n[Install]\n")); hasInstall == g.pod.Spec.RunsToCompletion() {
				t.Errorf("unit has [Install]: %v; a job's unit must have none, others must", hasInstall)
			}

			// The environment file, and the unit's hash of it.
			envGot, err := RenderEnvFile(g.pod)
			if err != nil {
				t.Fatalf("RenderEnvFile: %v", err)
			}
			envPath := strings.TrimSuffix(g.unit, ".service") + ".env"
			if *update {
				if err := os.WriteFile(envPath, envGot, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			envWant, err := os.ReadFile(envPath)
			if err != nil {
				t.Fatalf("%v (run go test ./units -run TestRenderGolden -update)", err)
			}
			if diff := cmp.Diff(string(envWant), string(envGot)); diff != "" {
				t.Errorf("RenderEnvFile(%s) differs from %s (-want +got):\n%s", g.name, envPath, diff)
			}
			for _, v := range g.pod.Spec.Template.Env {
				if len(v) >= 4 && bytes.Contains(got, []byte(v)) {
					t.Errorf("unit file carries the environment value %q", v)
				}
			}
			if bytes.Contains(got, []byte(Hash(envGot))) {
				t.Errorf("unit file carries the environment file's hash")
			}
			if !bytes.Contains(got, []byte("\nEnvironmentFile="+EnvFilePath(api.UnitName(g.pod.Metadata.Name))+"\n")) {
				t.Errorf("unit does not name its environment file %s", EnvFilePath(api.UnitName(g.pod.Metadata.Name)))
			}
			if bytes.Contains(got, []byte("\nEnvironment=")) {
				t.Errorf("unit file carries Environment= lines: values belong in the 0600 environment file")
			}

			// Deterministic: map order must not leak into the bytes.
			for range 20 {
				again, err := Render(g.pod)
				if err != nil || !bytes.Equal(again, got) {
					t.Fatalf("Render is not deterministic (err %v)", err)
				}
			}

			// Round trip through go-systemd's parser.
			opts, err := RenderOptions(g.pod)
			if err != nil {
				t.Fatal(err)
			}
			back, err := unit.DeserializeOptions(bytes.NewReader(got))
			if err != nil {
				t.Fatalf("DeserializeOptions: %v", err)
			}
			if diff := cmp.Diff(optionValues(opts), optionValues(back)); diff != "" {
				t.Errorf("Deserialize(Render(p)) != RenderOptions(p) (-rendered +parsed):\n%s", diff)
			}

			// The process gets exactly the argv and environment asked for.
			env := renderedEnv(t, envGot)
			wantEnv := expectedEnv(g.pod)
			if diff := cmp.Diff(wantEnv, env); diff != "" {
				t.Errorf("environment as systemd sees it (-want +got):\n%s", diff)
			}
			if len(g.pod.Spec.Template.Secrets) > 0 {
				// systemd adds it to what the process gets (and
				// expands it in ExecStart=).
				env[api.CredentialsDirVar] = "/run/credentials/" + api.UnitName(g.pod.Metadata.Name)
			}
			argv, err := sdExecArgv(optionValue(t, opts, sectionService, "ExecStart"), env)
			if err != nil {
				t.Fatalf("unquoting ExecStart: %v", err)
			}
			if diff := cmp.Diff(expectedArgv(g.pod.Spec.Template.Exec, env), argv); diff != "" {
				t.Errorf("argv as systemd starts it (-want +got):\n%s", diff)
			}

			// herd's bookkeeping reads back.
			m, err := ReadMeta(bytes.NewReader(got))
			if err != nil {
				t.Fatalf("ReadMeta: %v", err)
			}
			var files []string
			for _, f := range g.pod.Spec.Template.Files {
				files = append(files, f.Path)
			}
			if g.pod.Spec.OverlapsRuns() {
				files = append(files, TemplatePath(g.pod.Metadata.Name))
			}
			if g.pod.Spec.ReplacesRuns() || g.pod.Spec.OverlapsRuns() {
				files = append(files, KickPath(g.pod.Metadata.Name))
			}
			for _, a := range g.pod.Spec.Template.Artifacts {
				files = append(files, a.Path)
			}
			if arts := g.pod.Spec.Template.Artifacts; len(arts) > 0 {
				// The fetch step runs as root ('+') and gets its
				// words literally: no specifier, no variable expanded.
				pre, ok := strings.CutPrefix(optionValue(t, opts, sectionService, "ExecStartPre"), "+")
				if !ok {
					t.Errorf("ExecStartPre does not start with '+'")
				}
				argv, err := sdExecArgv(pre, env)
				if err != nil {
					t.Fatalf("unquoting ExecStartPre: %v", err)
				}
				if diff := cmp.Diff(artifact.Argv(api.UnitName(g.pod.Metadata.Name), arts), argv); diff != "" {
					t.Errorf("ExecStartPre argv as systemd starts it (-want +got):\n%s", diff)
				}
			}
			var creds []string
			for _, c := range Credentials(g.pod) {
				creds = append(creds, CredentialPath(api.UnitName(g.pod.Metadata.Name), c.ID()))
			}
			wantMeta := Meta{Pod: g.pod.Metadata.Name, Owner: g.pod.Spec.Owner, Revision: g.pod.Spec.Revision,
				Generation: g.pod.Metadata.Generation, Files: files, Credentials: creds, OnDisconnect: g.pod.Spec.Template.OnDisconnect}
			if diff := cmp.Diff(wantMeta, m); diff != "" {
				t.Errorf("ReadMeta (-want +got):\n%s", diff)
			}
		})
	}
}

// expectedEnv is the environment a pod's process should get, computed from
// the spec independently of the renderer.
func expectedEnv(p *api.Pod) map[string]string {
	env := map[string]string{}
	for k, v := range p.Spec.Template.Env {
		env[k] = v
	}
	for i, port := range p.Spec.Template.Ports {
		name := port.Name
		if name == "" {
			name = fmt.Sprintf("p%d", i)
		}
		host, ok := p.Spec.HostPorts[name]
		if !ok {
			host = port.Port
		}
		env["PORT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))] = strconv.Itoa(host)
		if i == 0 {
			env["PORT"] = strconv.Itoa(host)
		}
	}
	return env
}

// expectedArgv replaces ${NAME} references to variables in env, in one
// pass, as the documented rule says; everything else stays literal.
func expectedArgv(argv []string, env map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		var b strings.Builder
		for a != "" {
			if strings.HasPrefix(a, "${") {
				if end := strings.IndexByte(a, '}'); end > 0 {
					if v, ok := env[a[2:end]]; ok {
						b.WriteString(v)
						a = a[end+1:]
						continue
					}
				}
			}
			b.WriteByte(a[0])
			a = a[1:]
		}
		out[i] = b.String()
	}
	return out
}

func optionValues(opts []*unit.UnitOption) []unit.UnitOption {
	out := make([]unit.UnitOption, len(opts))
	for i, o := range opts {
		out[i] = *o
	}
	return out
}

func optionValue(t *testing.T, opts []*unit.UnitOption, section, name string) string {
	t.Helper()
	for _, o := range opts {
		if o.Section == section && o.Name == name {
			return o.Value
		}
	}
	t.Fatalf("no %s= in [%s]", name, section)
	return ""
}

// renderedEnv decodes the Environment= options the way systemd does.
func renderedEnv(t *testing.T, envFile []byte) map[string]string {
	t.Helper()
	env, keys, err := sdEnvFile(string(envFile))
	if err != nil {
		t.Fatalf("environment file: %v\n%s", err, envFile)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("environment file not sorted by key: %q", keys)
	}
	return env
}

// sdEnvFile parses an environment file the way systemd's
// parse_env_file_internal does (src/basic/env-file.c): lines of KEY=VALUE,
// '#' and ';' start comment lines, blanks around the key and before the
// value are skipped; in a value, '...' is literal up to the next ', "..."
// takes \", \\, \`, \$ as escapes and a backslash-newline as nothing,
// an unquoted backslash escapes the next character, unquoted trailing
// blanks are dropped, and quoted and unquoted parts join into one value.
func sdEnvFile(s string) (map[string]string, []string, error) {
	env := map[string]string{}
	var keys []string
	const (
		preKey = iota
		inKey
		preValue
		inValue
		valueEscape
		single
		double
		doubleEscape
		comment
	)
	state := preKey
	var key, value strings.Builder
	lastWS := -1 // length of value before unquoted trailing blanks
	push := func() error {
		k := strings.TrimRight(key.String(), " \t")
		v := value.String()
		if lastWS >= 0 {
			v = v[:lastWS]
		}
		if k == "" {
			return errors.New("empty key")
		}
		if _, dup := env[k]; dup {
			return fmt.Errorf("key %s twice", k)
		}
		env[k] = v
		keys = append(keys, k)
		key.Reset()
		value.Reset()
		lastWS = -1
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case preKey:
			switch {
			case c == '#' || c == ';':
				state = comment
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			default:
				state = inKey
				key.WriteByte(c)
			}
		case inKey:
			switch {
			case c == '\n' || c == '\r':
				return nil, nil, fmt.Errorf("key %q without '='", key.String())
			case c == '=':
				state = preValue
			default:
				key.WriteByte(c)
			}
		case preValue:
			switch {
			case c == '\n' || c == '\r':
				state = preKey
				if err := push(); err != nil {
					return nil, nil, err
				}
			case c == '\'':
				state = single
			case c == '"':
				state = double
			case c == '\\':
				state = valueEscape
			case c == ' ' || c == '\t':
			default:
				state = inValue
				value.WriteByte(c)
			}
		case inValue:
			switch {
			case c == '\n' || c == '\r':
				state = preKey
				if err := push(); err != nil {
					return nil, nil, err
				}
			case c == '\\':
				state = valueEscape
				lastWS = -1
			default:
				if c == ' ' || c == '\t' {
					if lastWS < 0 {
						lastWS = value.Len()
					}
				} else {
					lastWS = -1
				}
				value.WriteByte(c)
			}
		case valueEscape:
			state = inValue
			if c != '\n' {
				value.WriteByte(c)
			}
		case single:
			if c == '\'' {
				state = preValue
			} else {
				value.WriteByte(c)
			}
		case double:
			switch c {
			case '"':
				state = preValue
			case '\\':
				state = doubleEscape
			default:
				value.WriteByte(c)
			}
		case doubleEscape:
			state = double
			switch {
			case strings.IndexByte("\"\\`$", c) >= 0:
				value.WriteByte(c)
			case c == '\n':
			default:
				value.WriteByte('\\')
				value.WriteByte(c)
			}
		case comment:
			if c == '\n' || c == '\r' {
				state = preKey
			}
		}
	}
	switch state {
	case preKey, comment:
	case preValue, inValue, valueEscape:
		if err := push(); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("file ends inside a key or a quoted value (state %d)", state)
	}
	return env, keys, nil
}

func TestRenderErrors(t *testing.T) {
	base := func() *api.Pod {
		return &api.Pod{
			Kind:     api.KindPod,
			Metadata: api.ObjectMeta{Name: "web-1", Generation: 1},
			Spec: api.PodSpec{
				Owner:    api.OwnerRef{Kind: api.KindDeployment, Name: "web"},
				Template: api.PodTemplate{Exec: []string{"/bin/true"}},
			},
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(p *api.Pod)
		field string
	}{
		{"bad pod name", func(p *api.Pod) { p.Metadata.Name = "Web_1" }, "metadata.name"},
		{"empty pod name", func(p *api.Pod) { p.Metadata.Name = "" }, "metadata.name"},
		{"empty exec", func(p *api.Pod) { p.Spec.Template.Exec = nil }, "spec.template.exec"},
		{"empty exec0", func(p *api.Pod) { p.Spec.Template.Exec = []string{""} }, "spec.template.exec[0]"},
		{"exec0 prefix -", func(p *api.Pod) { p.Spec.Template.Exec = []string{"-/bin/true"} }, "spec.template.exec[0]"},
		{"exec0 prefix @", func(p *api.Pod) { p.Spec.Template.Exec = []string{"@/bin/true", "x"} }, "spec.template.exec[0]"},
		{"exec0 prefix +", func(p *api.Pod) { p.Spec.Template.Exec = []string{"+true"} }, "spec.template.exec[0]"},
		{"exec0 relative path", func(p *api.Pod) { p.Spec.Template.Exec = []string{"bin/true"} }, "spec.template.exec[0]"},
		{"exec0 dotdot", func(p *api.Pod) { p.Spec.Template.Exec = []string{".."} }, "spec.template.exec[0]"},
		{"exec0 dollar", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/opt/$x"} }, "spec.template.exec[0]"},
		{"NUL in argv", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/bin/echo", "a\x00b"} }, "spec.template.exec[1]"},
		{"invalid UTF-8 in argv", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/bin/echo", "\xff"} }, "spec.template.exec[1]"},
		{"argv too long", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/bin/echo", strings.Repeat("a", 2040)} }, "spec.template.exec[1]"},
		{"NUL in env value", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"A": "\x00"} }, `spec.template.env[A]`},
		{"env key with =", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"A=B": "1"} }, `spec.template.env["A=B"]`},
		{"env key empty", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"": "1"} }, `spec.template.env[""]`},
		{"env key digit first", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"1A": "1"} }, `spec.template.env[1A]`},
		{"env key space", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"A B": "1"} }, `spec.template.env["A B"]`},
		{"env value too long", func(p *api.Pod) {
			p.Spec.Template.Env = map[string]string{"A": strings.Repeat("x", api.MaxEnvAssignment)}
		}, `spec.template.env[A]`},
		{"env invalid UTF-8", func(p *api.Pod) { p.Spec.Template.Env = map[string]string{"A": "\xc3"} }, `spec.template.env[A]`},
		{"dynamic port unassigned", func(p *api.Pod) { p.Spec.Template.Ports = []api.Port{{Name: "http"}} }, `spec.hostPorts[http]`},
		{"host port out of range", func(p *api.Pod) {
			p.Spec.Template.Ports = []api.Port{{Name: "http"}}
			p.Spec.HostPorts = map[string]int{"http": 70000}
		}, `spec.hostPorts[http]`},
		{"duplicate port name", func(p *api.Pod) {
			p.Spec.Template.Ports = []api.Port{{Name: "http", Port: 80}, {Name: "http", Port: 81}}
		}, "spec.template.ports[1].name"},
		{"bad port name", func(p *api.Pod) { p.Spec.Template.Ports = []api.Port{{Name: "HTTP", Port: 80}} }, "spec.template.ports[0].name"},
		{"bad restart policy", func(p *api.Pod) { p.Spec.Template.RestartPolicy = "sometimes" }, "spec.template.restartPolicy"},
		{"bad user", func(p *api.Pod) { p.Spec.Template.User = "root\nExecStartPre=/bin/reboot" }, "spec.template.user"},
		{"user with space", func(p *api.Pod) { p.Spec.Template.User = "a b" }, "spec.template.user"},
		{"relative working dir", func(p *api.Pod) { p.Spec.Template.WorkingDir = "srv" }, "spec.template.workingDir"},
		{"working dir dotdot", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/srv/../etc" }, "spec.template.workingDir"},
		{"working dir trailing slash", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/srv/" }, "spec.template.workingDir"},
		{"working dir newline", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/srv\nUser=root" }, "spec.template.workingDir"},
		{"working dir trailing backslash", func(p *api.Pod) { p.Spec.Template.WorkingDir = `/srv\` }, "spec.template.workingDir"},
		{"memory injection", func(p *api.Pod) { p.Spec.Template.Resources.MemoryLimit = "1G\nUser=root" }, "spec.template.resources.memoryLimit"},
		{"memory with space", func(p *api.Pod) { p.Spec.Template.Resources.MemoryLimit = "1 G" }, "spec.template.resources.memoryLimit"},
		{"cpu without percent", func(p *api.Pod) { p.Spec.Template.Resources.CPULimit = "50" }, "spec.template.resources.cpuLimit"},
		{"revision with space", func(p *api.Pod) { p.Spec.Revision = "a b" }, "spec.revision"},
		{"bad owner kind", func(p *api.Pod) { p.Spec.Owner.Kind = "Deploy ments" }, "spec.owner.kind"},
		{"bad owner name", func(p *api.Pod) { p.Spec.Owner.Name = "%n" }, "spec.owner.name"},
		{"relative file path", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "etc/x"}} }, "spec.template.files[0].path"},
		{"NUL in file path", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/etc/x\x00"}} }, "spec.template.files[0].path"},
		{"file path too long", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/" + strings.Repeat("d", 2040)}} }, "spec.template.files[0].path"},
		{"exec0 prefix |", func(p *api.Pod) { p.Spec.Template.Exec = []string{"|true"} }, "spec.template.exec[0]"},
		{"exec0 dollar bare", func(p *api.Pod) { p.Spec.Template.Exec = []string{"${PORT}"} }, "spec.template.exec[0]"},
		{"exec0 dot", func(p *api.Pod) { p.Spec.Template.Exec = []string{"."} }, "spec.template.exec[0]"},
		{"argv too long with dollars", func(p *api.Pod) { p.Spec.Template.Exec = []string{"/bin/echo", strings.Repeat("$", 1100)} }, "spec.template.exec[1]"},
		{"working dir trailing blank", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/srv " }, "spec.template.workingDir"},
		{"working dir tab", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/srv/a\tb" }, "spec.template.workingDir"},
		{"working dir too long", func(p *api.Pod) { p.Spec.Template.WorkingDir = "/" + strings.Repeat("%", 1100) }, "spec.template.workingDir"},
		{"setuid file", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/opt/x", Mode: "4755"}} }, "spec.template.files[0].mode"},
		{"setgid file", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/opt/x", Mode: "2755"}} }, "spec.template.files[0].mode"},
		{"sandboxed file in /tmp", func(p *api.Pod) { p.Spec.Template.Files = []api.File{{Path: "/tmp/x"}} }, "spec.template.files[0].path"},
		{"bad sandbox", func(p *api.Pod) { p.Spec.Template.Sandbox = "strict" }, "spec.template.sandbox"},
		{"env too large", func(p *api.Pod) {
			p.Spec.Template.Env = map[string]string{"A": strings.Repeat("\n", api.MaxEnvAssignment)}
		}, "spec.template.env[A]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.edit(p)
			b, err := Render(p)
			if err == nil {
				t.Fatalf("Render succeeded, want an error on %s; got:\n%s", tc.field, b)
			}
			if !errors.Is(err, ErrUnrenderable) {
				t.Errorf("error %v does not match ErrUnrenderable", err)
			}
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("error %T is not a *RenderError", err)
			}
			if re.Field != tc.field {
				t.Errorf("field = %q, want %q (error: %v)", re.Field, tc.field, err)
			}
			if !strings.HasPrefix(err.Error(), "units: pod ") {
				t.Errorf("error %q lacks the package prefix", err)
			}

			// Admission is the one gate: it refuses the same field, for
			// the pod and, for template fields, for a deployment holding
			// the template. Only a host port missing for a dynamic port is
			// left to the bind, which assigns it.
			if tc.name == "dynamic port unassigned" {
				if err := api.Validate(p); err != nil {
					t.Errorf("admission refuses a pending pod without host ports: %v", err)
				}
				return
			}
			admissionRefuses(t, p, tc.field)
			if rest, ok := strings.CutPrefix(tc.field, "spec.template"); ok {
				d := &api.Deployment{Kind: api.KindDeployment, Metadata: api.ObjectMeta{Name: "web"},
					Spec: api.DeploymentSpec{Template: p.Spec.Template}}
				admissionRefuses(t, d, "spec.template"+rest)
			}
		})
	}
	t.Run("nil pod", func(t *testing.T) {
		if _, err := Render(nil); !errors.Is(err, ErrUnrenderable) {
			t.Errorf("Render(nil) = %v", err)
		}
	})
}

// admissionRefuses checks that api.Validate reports field of o.
func admissionRefuses(t *testing.T, o api.Object, field string) {
	t.Helper()
	err := api.Validate(o)
	var fes api.FieldErrors
	if !errors.As(err, &fes) {
		t.Fatalf("admission accepts %s %s, which the renderer refuses (err %v)", o.GetKind(), o.GetMeta().Name, err)
	}
	for _, fe := range fes {
		if fe.Field == field {
			return
		}
	}
	t.Errorf("admission refuses %s but not on %s:\n%v", o.GetKind(), field, err)
}

func TestRenderLongArgvContinues(t *testing.T) {
	var argv []string
	argv = append(argv, "/bin/echo")
	for i := range 300 {
		argv = append(argv, fmt.Sprintf("arg-%d-%s", i, strings.Repeat("y", i%50)))
	}
	argv = append(argv, strings.Repeat("z", api.MaxUnitLine-len("ExecStart=")-5))
	p := &api.Pod{Metadata: api.ObjectMeta{Name: "long"}, Spec: api.PodSpec{Template: api.PodTemplate{Exec: argv}}}
	b, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if len(line) > api.MaxUnitLine {
			t.Errorf("line %d is %d bytes, more than %d", i+1, len(line), api.MaxUnitLine)
		}
	}
	opts, err := unit.DeserializeOptions(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got, err := sdExecArgv(optionValue(t, opts, sectionService, "ExecStart"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(argv, got); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
}

// TestQuoteManyInputs checks unquote(quote(s)) == s, the way systemd reads
// an ExecStart word, for every single byte, every pair of special bytes and
// many random strings.
func TestQuoteManyInputs(t *testing.T) {
	var inputs []string
	for c := 1; c < 0x80; c++ {
		inputs = append(inputs, string(rune(c)), "a"+string(rune(c))+"b")
	}
	special := []string{`"`, `\`, "$", "%", "{", "}", "\n", "'", " ", "`", ";", "x", "é", "\x01"}
	for _, a := range special {
		for _, b := range special {
			inputs = append(inputs, a+b, a+b+a)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab $%{}\\\"'`;\n\t\r\x01\x7fé✓🐑HOME")
	for range 5000 {
		n := rng.IntN(20)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(r))
	}
	for _, s := range inputs {
		w := api.QuoteUnitWord(s, api.UnitQuoting{Percent: true, Dollar: true})
		words, err := sdLoadWords(w)
		if err != nil {
			t.Fatalf("quote(%q) = %s: %v", s, w, err)
		}
		if len(words) != 1 {
			t.Fatalf("quote(%q) = %s reads as %d words", s, w, len(words))
		}
		got, err := sdExpand(words[0], nil)
		if err != nil {
			t.Fatalf("quote(%q) = %s: %v", s, w, err)
		}
		if got != s {
			t.Errorf("quote(%q) = %s reads back as %q", s, w, got)
		}
		// The X-Herd-Files flavour reads back with splitQuoted.
		back, err := splitQuoted(api.QuoteUnitWord(s, api.UnitQuoting{}) + " \\\n" + api.QuoteUnitWord(s, api.UnitQuoting{}))
		if err != nil || len(back) != 2 || back[0] != s || back[1] != s {
			t.Errorf("splitQuoted(quote(%q)) = %q, %v", s, back, err)
		}
	}
}

func TestQuoteKnownVariables(t *testing.T) {
	env := map[string]string{"PORT": "8080", "A": "x y"}
	q := api.UnitQuoting{Percent: true, Dollar: true, Vars: map[string]bool{"PORT": true, "A": true}}
	for _, tc := range []struct{ in, quoted, expanded string }{
		{"${PORT}", `"${PORT}"`, "8080"},
		{"--port=${PORT}", `"--port=${PORT}"`, "--port=8080"},
		{"${A}", `"${A}"`, "x y"},
		{"$A", `"$$A"`, "$A"},
		{"$PORT", `"$$PORT"`, "$PORT"},
		{"${HOME}", `"$${HOME}"`, "${HOME}"},
		{"$${PORT}", `"$$${PORT}"`, "$8080"},
		{"${PORT", `"$${PORT"`, "${PORT"},
		{"${PORT:-1}", `"$${PORT:-1}"`, "${PORT:-1}"},
		{"%${PORT}%", `"%%${PORT}%%"`, "%8080%"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			w := api.QuoteUnitWord(tc.in, q)
			if w != tc.quoted {
				t.Errorf("quote(%q) = %s, want %s", tc.in, w, tc.quoted)
			}
			got, err := sdExecArgv(w, env)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.expanded {
				t.Errorf("systemd would pass %q, want %q", got, tc.expanded)
			}
		})
	}
}

func FuzzRenderExec(f *testing.F) {
	for _, seed := range [][3]string{
		{"", "", ""},
		{"$HOME", "%n", `"quoted"`},
		{"a\nb", `back\slash\`, "$(reboot)"},
		{"`x`", ";", "\\;"},
		{"é✓", "\x01\x7f", "$$"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		argv := []string{"/bin/echo", a, b, c}
		for _, s := range argv {
			if strings.Contains(s, "${") {
				t.Skip("${ sequences are expansion requests")
			}
		}
		p := &api.Pod{
			Metadata: api.ObjectMeta{Name: "fuzz"},
			Spec:     api.PodSpec{Template: api.PodTemplate{Exec: argv, Env: map[string]string{"X": "1"}}},
		}
		opts, err := RenderOptions(p)
		if err != nil {
			if !errors.Is(err, ErrUnrenderable) {
				t.Fatalf("error %v is not ErrUnrenderable", err)
			}
			for _, s := range argv {
				if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) || len(api.QuoteUnitWord(s, api.UnitQuoting{Percent: true, Dollar: true})) > api.MaxUnitLine-len("ExecStart=")-3 {
					return
				}
			}
			t.Fatalf("Render(%q) failed on representable input: %v", argv, err)
		}
		file, err := io.ReadAll(unit.Serialize(opts))
		if err != nil {
			t.Fatal(err)
		}
		back, err := unit.DeserializeOptions(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("DeserializeOptions: %v\n%s", err, file)
		}
		got, err := sdExecArgv(optionValue(t, back, sectionService, "ExecStart"), map[string]string{"X": "1"})
		if err != nil {
			t.Fatalf("unquote: %v\n%s", err, file)
		}
		if diff := cmp.Diff(argv, got); diff != "" {
			t.Fatalf("argv (-want +got):\n%s\nunit:\n%s", diff, file)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	p := &api.Pod{
		Metadata: api.ObjectMeta{Name: "web-7f9c2", Generation: 3},
		Spec: api.PodSpec{
			Owner:     api.OwnerRef{Kind: api.KindDeployment, Name: "web"},
			Revision:  "5d41402abc4b2a76",
			HostPorts: map[string]int{"http": 31234},
			Template: api.PodTemplate{
				Exec:      []string{"/usr/bin/python3", "-m", "http.server", "${PORT}"},
				Env:       map[string]string{"A": "1", "B": "two words", "C": "$HOME"},
				Ports:     []api.Port{{Name: "http"}},
				Resources: api.Resources{MemoryLimit: "64M", CPULimit: "50%"},
			},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(p); err != nil {
			b.Fatal(err)
		}
	}
}

// ---------------------------------------------------------------------------
// systemd's rules, written independently of the renderer.

// sdLoadWords splits an option value into words the way systemd's unit
// loader does for ExecStart= and Environment=: lines ending in a backslash
// are joined with a space, words are separated by whitespace, double and
// single quotes group, C escapes are decoded, and specifiers expanded (only
// %% is expected: it becomes %). The result is what `systemd --test` dumps.
func sdLoadWords(v string) ([]string, error) {
	lines := strings.Split(v, "\n")
	for i := range len(lines) - 1 {
		l, ok := strings.CutSuffix(lines[i], `\`)
		if !ok {
			return nil, fmt.Errorf("raw newline not preceded by a backslash in %q", v)
		}
		lines[i] = l + " "
	}
	s := strings.Join(lines, "")
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	var words []string
	for i := 0; ; {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		var w []byte
		var q byte
		for i < len(s) && (q != 0 || !isSpace(s[i])) {
			c := s[i]
			switch {
			case q != 0 && c == q:
				q = 0
				i++
			case q == 0 && (c == '"' || c == '\''):
				q = c
				i++
			case c == '\\':
				b, n, err := sdUnescape(s[i+1:])
				if err != nil {
					return nil, fmt.Errorf("at offset %d of %q: %w", i, s, err)
				}
				w = append(w, b...)
				i += 1 + n
			default:
				w = append(w, c)
				i++
			}
		}
		if q != 0 {
			return nil, fmt.Errorf("unbalanced quoting in %q", s)
		}
		word, err := sdSpecifiers(string(w))
		if err != nil {
			return nil, err
		}
		words = append(words, word)
	}
}

// sdUnescape decodes one C escape (after the backslash) as systemd's
// cunescape_one does and returns the bytes and how much input it used.
func sdUnescape(s string) ([]byte, int, error) {
	if s == "" {
		return nil, 0, errors.New("backslash at end")
	}
	simple := map[byte]byte{'a': 7, 'b': 8, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11,
		'\\': '\\', '"': '"', '\'': '\'', 's': ' '}
	if c, ok := simple[s[0]]; ok {
		return []byte{c}, 1, nil
	}
	num := func(digits string, base, size int) (uint64, error) {
		if len(digits) < size {
			return 0, fmt.Errorf("short escape %q", digits)
		}
		n, err := strconv.ParseUint(digits[:size], base, 32)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("bad escape %q", digits[:size])
		}
		return n, nil
	}
	switch c := s[0]; {
	case c == 'x':
		n, err := num(s[1:], 16, 2)
		return []byte{byte(n)}, 3, err
	case '0' <= c && c <= '7':
		n, err := num(s, 8, 3)
		return []byte{byte(n)}, 3, err
	case c == 'u':
		n, err := num(s[1:], 16, 4)
		return utf8.AppendRune(nil, rune(n)), 5, err
	case c == 'U':
		n, err := num(s[1:], 16, 8)
		return utf8.AppendRune(nil, rune(n)), 9, err
	}
	return nil, 0, fmt.Errorf("unknown escape \\%c", s[0])
}

// sdSpecifiers expands specifiers in a word; herd writes only %%.
func sdSpecifiers(w string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] != '%' {
			b.WriteByte(w[i])
			continue
		}
		if i+1 < len(w) && w[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return "", fmt.Errorf("specifier %q would be expanded in %q", w[i:min(i+2, len(w))], w)
	}
	return b.String(), nil
}

// sdExpand does what systemd does to an ExecStart word when it starts the
// process: $$ becomes $, ${NAME} becomes NAME's value (empty if unset), and
// a word that is exactly $NAME would be split into several arguments, which
// herd must never produce.
func sdExpand(w string, env map[string]string) (string, error) {
	if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "$$") && !strings.HasPrefix(w, "${") {
		return "", fmt.Errorf("word %q would be expanded and split as a whole-word variable", w)
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch {
		case strings.HasPrefix(w[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(w[i:], "${"):
			end := strings.IndexByte(w[i:], '}')
			if end < 0 {
				b.WriteString(w[i:])
				return b.String(), nil
			}
			b.WriteString(env[w[i+2:i+end]])
			i += end
		default:
			b.WriteByte(w[i])
		}
	}
	return b.String(), nil
}

// sdExecArgv is the argv systemd starts for an ExecStart= value.
func sdExecArgv(v string, env map[string]string) ([]string, error) {
	words, err := sdLoadWords(v)
	if err != nil {
		return nil, err
	}
	for i, w := range words {
		if words[i], err = sdExpand(w, env); err != nil {
			return nil, err
		}
	}
	return words, nil
}

// ---------------------------------------------------------------------------
// The real systemd, when this machine has it.

// goldenUnits returns the rendered goldens by unit name.
func goldenUnits(t *testing.T) (map[string][]byte, map[string][]*unit.UnitOption) {
	t.Helper()
	files := map[string][]byte{}
	opts := map[string][]*unit.UnitOption{}
	for _, g := range loadGoldens(t) {
		b, err := Render(g.pod)
		if err != nil {
			t.Fatal(err)
		}
		o, err := RenderOptions(g.pod)
		if err != nil {
			t.Fatal(err)
		}
		name := api.UnitName(g.pod.Metadata.Name)
		files[name] = b
		opts[name] = o
	}
	return files, opts
}

// writeUnits writes units into a fresh directory readable by everyone.
func writeUnits(t *testing.T, units map[string][]byte) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "herd-units-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range units {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on every golden.
func TestSystemdAnalyzeVerify(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	files, _ := goldenUnits(t)
	dir := writeUnits(t, files)
	args := []string{"verify", "--man=no"}
	for name := range files {
		args = append(args, filepath.Join(dir, name))
	}
	slices.Sort(args[2:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case line == "":
		case strings.Contains(line, "is not executable"):
			// The goldens name programs that this machine may lack.
			t.Logf("ignored (host lacks the program): %s", line)
		default:
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Errorf("systemd-analyze verify complained (exit %v):\n%s", err, strings.Join(problems, "\n"))
	}
}

// TestSystemdParsesUnits loads every golden into systemd's own parser
// (`systemd --test --user`, which dumps the units without running them) and
// checks that systemd reads back exactly the argv, environment, working
// directory and description herd meant. It needs a systemd binary, and, as
// root, runuser and the nobody user, since test mode refuses root.
func TestSystemdParsesUnits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux only")
	}
	bin := ""
	for _, p := range []string{"/lib/systemd/systemd", "/usr/lib/systemd/systemd"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no systemd binary")
	}
	files, opts := goldenUnits(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	all := map[string][]byte{"herd-test-all.target": []byte("[Unit]\nWants=" + strings.Join(names, " ") + "\n")}
	for k, v := range files {
		all[k] = v
	}
	dir := writeUnits(t, all)
	xdg := filepath.Join(dir, "xdg")
	if err := os.Mkdir(xdg, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(xdg, 0o777); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_RUNTIME_DIR=" + xdg, "SYSTEMD_UNIT_PATH=" + dir + ":", "SYSTEMD_LOG_LEVEL=warning",
		"SYSTEMD_LOG_TARGET=console", "SYSTEMD_PAGER=", "LANG=C.UTF-8"}
	argv := []string{bin, "--test", "--user", "--unit=herd-test-all.target", "--no-pager"}
	if os.Geteuid() == 0 {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Skip("systemd --test refuses root and runuser is missing")
		}
		if _, err := user.Lookup("nobody"); err != nil {
			t.Skip("systemd --test refuses root and there is no nobody user")
		}
		argv = append([]string{runuser, "-u", "nobody", "--", "env"}, append(env, argv...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if !strings.Contains(out, "-> By units:") {
		t.Skipf("systemd --test did not run here (%v): %.500s", err, out)
	}
	// Warnings about our units come before the dump.
	head, _, _ := strings.Cut(out, "-> By units:")
	for _, line := range strings.Split(head, "\n") {
		for _, name := range names {
			if strings.Contains(line, name) {
				t.Errorf("systemd: %s", line)
				break
			}
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			block := dumpBlock(out, name)
			if block == "" {
				t.Fatalf("systemd did not dump %s", name)
			}
			if !strings.Contains(block, "\t\tUnit Load State: loaded\n") {
				t.Errorf("%s not loaded:\n%.400s", name, block)
			}
			o := opts[name]
			wantArgv, err := sdLoadWords(optionValue(t, o, sectionService, "ExecStart"))
			if err != nil {
				t.Fatal(err)
			}
			lines := dumpFields(block, "Command Line")
			if len(lines) != 1 {
				t.Fatalf("want one Command Line, got %q", lines)
			}
			gotArgv, err := parseDumpCommandLine(lines[0])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantArgv, gotArgv); diff != "" {
				t.Errorf("ExecStart as systemd parsed it (-herd's unquoter +systemd):\n%s", diff)
			}
			var wantEnv strings.Builder
			for _, opt := range o {
				if opt.Name == "Environment" {
					words, err := sdLoadWords(opt.Value)
					if err != nil {
						t.Fatal(err)
					}
					for _, w := range words {
						wantEnv.WriteString("\t\tEnvironment: " + w + "\n")
					}
				}
			}
			if !strings.Contains(block, wantEnv.String()) {
				t.Errorf("environment dump lacks\n%s\ndump:\n%s", wantEnv.String(), block)
			}
			for _, opt := range o {
				var want string
				switch opt.Name {
				case "Description":
					want = "\t\tDescription: " + strings.ReplaceAll(opt.Value, "%%", "%") + "\n"
				case "WorkingDirectory":
					want = "\t\tWorkingDirectory: " + strings.ReplaceAll(opt.Value, "%%", "%") + "\n"
				case "Restart":
					want = "\t\tRestart: " + opt.Value + "\n"
				default:
					continue
				}
				if !strings.Contains(block, want) {
					t.Errorf("dump lacks %q", want)
				}
			}
		})
	}
}

// dumpBlock returns the part of a `systemd --test` dump about one unit.
func dumpBlock(out, name string) string {
	_, rest, ok := strings.Cut(out, "\t-> Unit "+name+":\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n\t-> Unit "); i >= 0 {
		rest = rest[:i+1]
	}
	if i := strings.Index(rest, "\n-> "); i >= 0 {
		rest = rest[:i+1]
	}
	return rest
}

// dumpFields returns the values of "Key: value" lines in a dump block.
func dumpFields(block, key string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimLeft(line, "\t"), key+": "); ok {
			out = append(out, v)
		}
	}
	return out
}

// parseDumpCommandLine splits systemd's quote_command_line output: words
// separated by spaces, plain or double-quoted with backslash escapes (C
// escapes, \NNN octal, and \$ \` \" \\ for themselves).
func parseDumpCommandLine(s string) ([]string, error) {
	var words []string
	for s != "" {
		if s[0] == ' ' {
			s = s[1:]
			continue
		}
		if s[0] != '"' {
			w, rest, _ := strings.Cut(s, " ")
			words = append(words, w)
			s = rest
			continue
		}
		var b []byte
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' {
				b = append(b, s[i])
				continue
			}
			i++
			if i >= len(s) {
				return nil, fmt.Errorf("dangling backslash in %q", s)
			}
			if c := s[i]; '0' <= c && c <= '7' && i+2 < len(s) {
				n, err := strconv.ParseUint(s[i:i+3], 8, 8)
				if err != nil {
					return nil, fmt.Errorf("bad octal escape in %q", s)
				}
				b = append(b, byte(n))
				i += 2
				continue
			}
			if c, ok := map[byte]byte{'a': 7, 'b': 8, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11}[s[i]]; ok {
				b = append(b, c)
			} else {
				b = append(b, s[i])
			}
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unterminated quote in %q", s)
		}
		words = append(words, string(b))
		s = s[i+1:]
	}
	return words, nil
}

// FuzzAdmittedRenders checks the promise of admission: every pod that
// api.Validate accepts (once bound: host ports assigned) renders, its unit
// file parses back, and its environment file gives the process exactly the
// template's environment.
func FuzzAdmittedRenders(f *testing.F) {
	for _, seed := range [][6]string{
		{"/bin/echo", "${PORT}", "v", "/srv", "/srv/a", "0644"},
		{"python3", "$HOME %n", "it's \"q\" \\ $x\n", "/srv/a b", "/etc/x y", "4755"},
		{"/opt/$x", "a\x00", "\xff", "/srv ", "/tmp/x", "2755"},
		{"|true", strings.Repeat("$", 1100), strings.Repeat("'", 3000), `/srv\`, "/" + strings.Repeat("p", 2100), "755"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], false)
	}
	f.Fuzz(func(t *testing.T, exec0, arg, envValue, workDir, filePath, mode string, none bool) {
		p := &api.Pod{
			Kind:     api.KindPod,
			Metadata: api.ObjectMeta{Name: "fuzz-1"},
			Spec: api.PodSpec{
				Owner:     api.OwnerRef{Kind: api.KindDeployment, Name: "fuzz"},
				HostPorts: map[string]int{"http": 30000},
				Template: api.PodTemplate{
					Exec:       []string{exec0, arg, "${V}"},
					Env:        map[string]string{"V": envValue},
					WorkingDir: workDir,
					Files:      []api.File{{Path: filePath, Mode: mode}},
					Ports:      []api.Port{{Name: "http"}},
				},
			},
		}
		if none {
			p.Spec.Template.Sandbox = api.SandboxNone
		}
		if api.Validate(p) != nil {
			return
		}
		api.SetDefaults(p)
		b, err := Render(p)
		if err != nil {
			t.Fatalf("admission accepts the pod, Render refuses it: %v", err)
		}
		envFile, err := RenderEnvFile(p)
		if err != nil {
			t.Fatalf("admission accepts the pod, RenderEnvFile refuses it: %v", err)
		}
		opts, err := unit.DeserializeOptions(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("unit does not parse back: %v\n%s", err, b)
		}
		env, _, err := sdEnvFile(string(envFile))
		if err != nil {
			t.Fatalf("environment file does not parse: %v\n%s", err, envFile)
		}
		want := map[string]string{"V": envValue, "PORT": "30000", "PORT_HTTP": "30000"}
		if diff := cmp.Diff(want, env); diff != "" {
			t.Fatalf("environment (-want +got):\n%s", diff)
		}
		argv, err := sdExecArgv(optionValue(t, opts, sectionService, "ExecStart"), env)
		if err != nil {
			t.Fatalf("ExecStart: %v", err)
		}
		if diff := cmp.Diff(expectedArgv(p.Spec.Template.Exec, env), argv); diff != "" {
			t.Fatalf("argv (-want +got):\n%s", diff)
		}
	})
}

// TestRenderDevices: a template's devices become DevicePolicy=closed and
// one DeviceAllow= per device, in order, in either sandbox; without devices
// neither is written; PrivateDevices= (which would hide the nodes) never.
func TestRenderDevices(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sandbox string
		devices []string
		want    []string // DevicePolicy and DeviceAllow values, in order
	}{
		{"none", "", nil, nil},
		{"one", "", []string{"/dev/i2c-1"}, []string{"DevicePolicy=closed", "DeviceAllow=/dev/i2c-1 rw"}},
		{"several in order", "", []string{"/dev/ttyUSB0", "/dev/gpiochip0"},
			[]string{"DevicePolicy=closed", "DeviceAllow=/dev/ttyUSB0 rw", "DeviceAllow=/dev/gpiochip0 rw"}},
		{"sandbox none", api.SandboxNone, []string{"/dev/video0"}, []string{"DevicePolicy=closed", "DeviceAllow=/dev/video0 rw"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "sensor-1"},
				Spec: api.PodSpec{Template: api.PodTemplate{Exec: []string{"/opt/sensor"}, Sandbox: tt.sandbox, Devices: tt.devices}}}
			opts, err := RenderOptions(p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range opts {
				switch o.Name {
				case "DevicePolicy", "DeviceAllow":
					if o.Section != "Service" {
						t.Errorf("%s in [%s]", o.Name, o.Section)
					}
					got = append(got, o.Name+"="+o.Value)
				case "PrivateDevices":
					t.Errorf("PrivateDevices=%s rendered", o.Value)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderOnDisconnect: the on_disconnect policy reaches the unit file
// only when it stops the unit, so "keep" (nil) renders the bytes units had
// before the setting existed and an upgrade restarts nothing.
func TestRenderOnDisconnect(t *testing.T) {
	base := func(o *api.OnDisconnect) *api.Pod {
		return &api.Pod{
			Metadata: api.ObjectMeta{Name: "sensor-1", Generation: 1},
			Spec:     api.PodSpec{Template: api.PodTemplate{Exec: []string{"/bin/sensor"}, OnDisconnect: o}},
		}
	}
	tests := []struct {
		name    string
		policy  *api.OnDisconnect
		wantKey string // "" = no X-Herd-Disconnect-Stop-After line
		wantDur time.Duration
		wantOK  bool
	}{
		{"keep", nil, "", 0, false},
		{"stop after 10s", &api.OnDisconnect{StopAfter: "10s"}, "10s", 10 * time.Second, true},
		{"stop after 2m", &api.OnDisconnect{StopAfter: "2m"}, "2m", 2 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := RenderOptions(base(tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, o := range opts {
				if o.Name == keyStopAfter {
					if o.Section != sectionUnit {
						t.Errorf("%s in [%s], want [Unit]", keyStopAfter, o.Section)
					}
					got = o.Value
				}
			}
			if got != tt.wantKey {
				t.Errorf("%s = %q, want %q", keyStopAfter, got, tt.wantKey)
			}
			b, err := Render(base(tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			m, err := ReadMeta(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			d, ok := m.OnDisconnect.StopAfterDuration()
			if d != tt.wantDur || ok != tt.wantOK {
				t.Errorf("read back: %v, %v; want %v, %v", d, ok, tt.wantDur, tt.wantOK)
			}
		})
	}
	keep, _ := Render(base(nil))
	plain := base(nil)
	plain.Spec.Template.OnDisconnect = nil
	if b, _ := Render(plain); !bytes.Equal(b, keep) {
		t.Error("keep renders differently from a template without the setting")
	}
	if _, err := Render(base(&api.OnDisconnect{StopAfter: "1s"})); !errors.Is(err, ErrUnrenderable) {
		t.Errorf("stop_after 1s rendered: %v; want ErrUnrenderable", err)
	}
}

// TestReadMetaBadStopAfter: a unit file whose stop-after does not parse
// still reads (its pod files can still be removed); the board treats it
// as "keep".
func TestReadMetaBadStopAfter(t *testing.T) {
	m, err := ReadMeta(strings.NewReader("[Unit]\nX-Herd-Pod=a\nX-Herd-Disconnect-Stop-After=soon\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := m.OnDisconnect.StopAfterDuration(); ok {
		t.Errorf("StopAfterDuration = %v, true; want false (keep)", d)
	}
}

func TestRenderArtifacts(t *testing.T) {
	const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	art := func(p string) api.Artifact { return api.Artifact{URL: "http://files.lan/x", SHA256: sha, Path: p} }
	for _, tt := range []struct {
		name      string
		restart   api.RestartPolicy
		files     []api.File
		artifacts []api.Artifact
		want      []string // ExecStartPre (its first word), TimeoutStartSec, X-Herd-Files
	}{
		{"none", "", nil, nil, nil},
		{"one", "", nil, []api.Artifact{art("/opt/a")},
			[]string{"ExecStartPre=+/usr/local/bin/herd", "TimeoutStartSec=360", `X-Herd-Files="/opt/a"`}},
		{"two after the files", "", []api.File{{Path: "/etc/a.toml"}}, []api.Artifact{art("/opt/a"), art("/opt/b")},
			[]string{"ExecStartPre=+/usr/local/bin/herd", "TimeoutStartSec=690", `X-Herd-Files="/etc/a.toml" "/opt/a" "/opt/b"`}},
		{"restart never", api.RestartNever, nil, []api.Artifact{art("/opt/a")},
			[]string{"ExecStartPre=+/usr/local/bin/herd", "TimeoutStartSec=360", `X-Herd-Files="/opt/a"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "sensor-1"},
				Spec: api.PodSpec{Template: api.PodTemplate{Exec: []string{"/opt/a"}, RestartPolicy: tt.restart, Files: tt.files, Artifacts: tt.artifacts}}}
			opts, err := RenderOptions(p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			pres := 0
			for _, o := range opts {
				switch o.Name {
				case "ExecStartPre":
					pres++
					first, _, _ := strings.Cut(o.Value, " ")
					got = append(got, o.Name+"="+first)
				case "TimeoutStartSec":
					got = append(got, o.Name+"="+o.Value)
				case keyFiles:
					got = append(got, o.Name+"="+o.Value)
				}
			}
			if diff := cmp.Diff(tt.want, sortedLast(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if pres > 1 {
				t.Errorf("%d ExecStartPre lines, want one for all artifacts", pres)
			}
		})
	}
}

// sortedLast moves X-Herd-Files (a [Unit] key, rendered first) to the end.
func sortedLast(s []string) []string {
	if len(s) > 0 && strings.HasPrefix(s[0], keyFiles) {
		return append(s[1:], s[0])
	}
	return s
}

// TestReadMetaCredentials: a removal finds a unit's credential files in its
// LoadCredential= lines, and only paths under CredentialDir.
func TestReadMetaCredentials(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "secrets.service"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadMeta(strings.NewReader(string(b) + "LoadCredential=x:/etc/shadow\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/var/lib/herd/credentials/herd-web-7f9c2.db_password",
		"/var/lib/herd/credentials/herd-web-7f9c2.db_user",
		"/var/lib/herd/credentials/herd-web-7f9c2.tls_tls.crt",
		"/var/lib/herd/credentials/herd-web-7f9c2.tls_tls.key",
	}
	if diff := cmp.Diff(want, m.Credentials); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	for _, p := range want {
		if !IsCredentialPath("herd-web-7f9c2.service", p) {
			t.Errorf("IsCredentialPath(%q) = false", p)
		}
	}
	for _, p := range []string{"/etc/shadow", "/var/lib/herd/credentials/herd-web-7f9c2.", "/var/lib/herd/credentials/herd-other.db_password", "/var/lib/herd/credentials/herd-web-7f9c2.x/../../y"} {
		if IsCredentialPath("herd-web-7f9c2.service", p) {
			t.Errorf("IsCredentialPath(%q) = true", p)
		}
	}
}
