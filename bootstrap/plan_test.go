package bootstrap

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

func targets(t *testing.T, args ...string) []Target {
	t.Helper()
	var out []Target
	for _, a := range args {
		tg, err := (*SSHConfig)(nil).Resolve("root@" + a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tg)
	}
	return out
}

func TestRoles(t *testing.T) {
	founded := &State{Cluster: "lab", Dir: "/state", Boards: []StateBoard{
		{Name: "b1", Target: "b1:22", Server: true, BootstrapExpect: 2},
		{Name: "b2", Target: "b2:22", Server: true, BootstrapExpect: 2},
		{Name: "b5", Target: "b5:22", Server: true},
		{Name: "b3", Target: "b3:22"},
	}}
	empty := &State{Cluster: "lab", Dir: "/state"}
	srv := func(n int) Role { return Role{Server: true, BootstrapExpect: n} }
	tests := []struct {
		name    string
		in      RolesInput
		want    []Role
		wantErr string
	}{
		{name: "first three are servers",
			in:   RolesInput{Targets: targets(t, "b1", "b2", "b3", "b4"), State: empty, Servers: 3},
			want: []Role{srv(3), srv(3), srv(3), {}}},
		{name: "fewer boards than servers",
			in:   RolesInput{Targets: targets(t, "b1", "b2"), State: empty, Servers: 3},
			want: []Role{srv(2), srv(2)}},
		{name: "same run again",
			in:   RolesInput{Targets: targets(t, "b1", "b2", "b3"), State: founded, Servers: 2},
			want: []Role{srv(2), srv(2), {}}},
		{name: "rerun of only the servers",
			in:   RolesInput{Targets: targets(t, "b1", "b2"), State: founded, Servers: 2},
			want: []Role{srv(2), srv(2)}},
		{name: "order changed",
			in:      RolesInput{Targets: targets(t, "b3", "b1", "b2"), State: founded, Servers: 2},
			wantErr: "b3 was bootstrapped as a worker, this run would make it a founding server"},
		{name: "new boards without --add",
			in:      RolesInput{Targets: targets(t, "b7", "b8"), State: founded, Servers: 2},
			wantErr: "founded with server b1:22"},
		{name: "add: new boards are workers, known keep their role",
			in:   RolesInput{Targets: targets(t, "b6", "b1", "b5", "b3"), State: founded, Add: true},
			want: []Role{{}, srv(2), {Server: true}, {}}},
		{name: "add --server",
			in:   RolesInput{Targets: targets(t, "b6"), State: founded, Add: true, AddServers: true},
			want: []Role{{Server: true}}},
		{name: "add without a cluster",
			in:      RolesInput{Targets: targets(t, "b6"), State: empty, Add: true},
			wantErr: "has no servers recorded"},
		{name: "same board twice",
			in:      RolesInput{Targets: targets(t, "b1", "b1:22"), State: empty, Servers: 3},
			wantErr: "same board"},
		{name: "servers out of range",
			in:      RolesInput{Targets: targets(t, "b1"), State: empty, Servers: 9},
			wantErr: "--servers 9"},
		{name: "no boards", in: RolesInput{State: empty, Servers: 3}, wantErr: "no boards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Roles(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	ts := targets(t, "b1", "b2", "b3:2222", "b4")
	probe := func(host, ip string) *Probe {
		return &Probe{Hostname: host, Address: ip, HostKeyFile: HostKeyFiles[0], Arch: ArchARM64}
	}
	roles := []Role{{true, 2}, {true, 2}, {}, {}}
	st := &State{Cluster: "lab"}
	plans, errs := Plan(PlanInput{
		Targets: ts, Roles: roles, State: st, SSHUser: "root",
		Probes: []*Probe{probe("b1.lan", "10.0.0.2"), probe("B2", "10.0.0.3"), probe("b3", "10.0.0.4"), nil},
		Labels: map[string]string{"room": "attic"},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("board %d: %v", i, err)
		}
	}
	// Addresses are left to the agents ("auto": the address on the route
	// to their peers); the join list holds the probed seed IPs.
	full := func(name string, r Role, join []string, sshPort string) AgentConfig {
		c := AgentConfig{Name: name, DataDir: DataDir, Server: r.Server, BootstrapExpect: r.BootstrapExpect, Join: join,
			GossipKeyFile: GossipKeyPath, GossipBind: "0.0.0.0:7946", GossipAdvertise: "auto",
			RaftBind: "0.0.0.0:7947", RaftAdvertise: "auto", APIListen: []string{APIAddr, "unix://" + APISocket},
			SSHAddress: "auto:" + sshPort, SSHHostKeyFile: HostKeyFiles[0], SSHUser: "root",
			Labels: map[string]string{"room": "attic"}, MetricsListen: MetricsListen, MetricsTokenFile: MetricsTokenPath}
		if r.Server {
			c.ServerKeyFile, c.APITokenFile, c.SSHKeyFile = ServerKeyPath, APITokenPath, ClusterSSHKey
		}
		return c
	}
	want := []BoardPlan{
		{Target: ts[0], Role: roles[0], Name: "b1", Agent: full("b1", roles[0], []string{"10.0.0.3:7946"}, "22")},
		{Target: ts[1], Role: roles[1], Name: "b2", Agent: full("b2", roles[1], []string{"10.0.0.2:7946"}, "22")},
		{Target: ts[2], Role: roles[2], Name: "b3", Agent: full("b3", roles[2], []string{"10.0.0.2:7946", "10.0.0.3:7946"}, "2222")},
		{}, // probe failed
	}
	if diff := cmp.Diff(want, plans); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}

	t.Run("seeds from state when a founding server is not in this run", func(t *testing.T) {
		st := &State{Cluster: "lab", Boards: []StateBoard{
			{Name: "b1", Target: "b1:22", Address: "10.0.0.2", Server: true, BootstrapExpect: 1},
		}}
		plans, errs := Plan(PlanInput{Targets: targets(t, "b9"), Roles: []Role{{}}, State: st,
			Probes: []*Probe{probe("b9", "10.0.0.10")}})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		if diff := cmp.Diff([]string{"10.0.0.2:7946"}, plans[0].Agent.Join); diff != "" {
			t.Errorf("join (-want +got):\n%s", diff)
		}
	})
	t.Run("--advertise: the board advertises it and the others join it", func(t *testing.T) {
		b1 := probe("b1", "10.0.0.2")
		b1.Address, b1.Advertised = "192.168.7.2", true // herdctl reached it over a VPN
		plans, errs := Plan(PlanInput{Targets: targets(t, "b1", "b2:2222"), Roles: []Role{{true, 2}, {true, 2}}, State: &State{},
			Probes: []*Probe{b1, probe("b2", "10.0.0.3")}})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		a := plans[0].Agent
		if a.GossipAdvertise != "192.168.7.2:7946" || a.RaftAdvertise != "192.168.7.2:7947" || a.SSHAddress != "192.168.7.2:22" {
			t.Errorf("b1 addresses: %s %s %s", a.GossipAdvertise, a.RaftAdvertise, a.SSHAddress)
		}
		if b := plans[1].Agent; b.GossipAdvertise != "auto" || b.SSHAddress != "auto:2222" || !cmp.Equal(b.Join, []string{"192.168.7.2:7946"}) {
			t.Errorf("b2: advertise %s, ssh %s, join %v", b.GossipAdvertise, b.SSHAddress, b.Join)
		}
	})
	t.Run("single server joins nobody", func(t *testing.T) {
		plans, errs := Plan(PlanInput{Targets: targets(t, "b1"), Roles: []Role{{true, 1}}, State: &State{},
			Probes: []*Probe{probe("b1", "10.0.0.2")}})
		if errs[0] != nil || plans[0].Agent.Join == nil || len(plans[0].Agent.Join) != 0 {
			t.Errorf("join = %#v, %v; want empty", plans[0].Agent.Join, errs[0])
		}
	})
	t.Run("duplicate and invalid names", func(t *testing.T) {
		st := &State{Boards: []StateBoard{{Name: "old", Target: "elsewhere:22"}, {Name: "b7", Target: "b7:22"}}}
		_, errs := Plan(PlanInput{Targets: targets(t, "x1", "x2", "x3", "x4", "b7"), Roles: make([]Role, 5), State: st,
			Probes: []*Probe{probe("same", "1.1.1.1"), probe("same", "1.1.1.2"), probe("old", "1.1.1.3"), probe("bad_name!", "1.1.1.4"), probe("renamed", "1.1.1.5")}})
		wants := []string{"", `x1 and root@x2 would both be named "same"`, `the name of the already bootstrapped elsewhere:22`, "does not make a valid node name", `was bootstrapped as "b7" and would now be named "renamed"`}
		for i, w := range wants {
			if w == "" {
				if errs[i] != nil {
					t.Errorf("board %d: %v", i, errs[i])
				}
				continue
			}
			if errs[i] == nil || !strings.Contains(errs[i].Error(), w) {
				t.Errorf("board %d: err = %v, want %q", i, errs[i], w)
			}
		}
	})
}

func TestBoardName(t *testing.T) {
	tg := func(alias string) Target { return Target{Arg: alias, Alias: alias} }
	tests := []struct {
		from, alias, hostname, want, wantErr string
	}{
		{"", "x", "raspberrypi", "raspberrypi", ""},
		{"hostname", "x", "Pi-4.lan", "pi-4", ""},
		{"alias", "b1.lab.example", "ignored", "b1", ""},
		{"alias", "10.0.0.2", "ignored", "10-0-0-2", ""},
		{"alias", "fd00::5", "ignored", "fd00--5", ""},
		{"hostname", "x", "under_score", "", "does not make a valid node name"},
		{"hostname", "x", "", "", "does not make a valid node name"},
		{"mac", "x", "y", "", "--name-from"},
	}
	for _, tt := range tests {
		t.Run(tt.from+"/"+tt.alias+"/"+tt.hostname, func(t *testing.T) {
			got, err := BoardName(tt.from, tg(tt.alias), tt.hostname)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("BoardName = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BoardName = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"room=attic", "herd.dev/tier=edge", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"room": "attic", "herd.dev/tier": "edge", "empty": ""}, got); diff != "" {
		t.Error(diff)
	}
	for _, bad := range [][]string{{"novalue"}, {"a b=c"}, {"k=v v"}, {"k=1", "k=2"}, {"=v"}} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q) accepted", bad)
		}
	}
}

func TestFilesToWrite(t *testing.T) {
	a := NewFile("/etc/herd/a", []byte("a"), 0o600)
	b := NewFile("/etc/herd/b", []byte("b"), 0o644)
	c := NewFile("/etc/herd/c", []byte("c"), 0o755)
	have := map[string]Observed{
		a.Path: {Sum: a.Sum, Mode: 0o600},
		b.Path: {Sum: sha256.Sum256([]byte("old")), Mode: 0o644},
	}
	got := FilesToWrite([]File{a, b, c}, have)
	want := []Change{{b, "content differs"}, {c, "missing"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	have[b.Path] = Observed{Sum: b.Sum, Mode: 0o666}
	have[c.Path] = Observed{Sum: c.Sum, Mode: 0o755}
	got = FilesToWrite([]File{a, b, c}, have)
	if diff := cmp.Diff([]Change{{b, "mode 0666, want 0644"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	have[b.Path] = Observed{Sum: b.Sum, Mode: 0o644}
	if got := FilesToWrite([]File{a, b, c}, have); len(got) != 0 {
		t.Errorf("all in place, still %v", got)
	}
}

func TestAuthorizedKeyLine(t *testing.T) {
	_, pub, err := NewSSHKey("lab")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	got, err := AuthorizedKeyLine(string(pub), []string{"10.0.0.2", "10.0.0.3", "fd00::5"})
	if err != nil {
		t.Fatal(err)
	}
	want := `restrict,from="10.0.0.2,10.0.0.3,fd00::5",command="/usr/local/bin/herd ssh-gate" ` + f[0] + " " + f[1] + " herd-cluster-lab"
	if got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
	// sshd's own parser reads the options back.
	_, comment, opts, _, err := ssh.ParseAuthorizedKey([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"restrict", `from="10.0.0.2,10.0.0.3,fd00::5"`, `command="/usr/local/bin/herd ssh-gate"`}, opts); diff != "" || comment != "herd-cluster-lab" {
		t.Errorf("options (-want +got):\n%s; comment %q", diff, comment)
	}
	for name, from := range map[string][]string{
		"no servers":     nil,
		"a host name":    {"b1.lan"},
		"a quote":        {`10.0.0.2",command="/bin/sh`},
		"a cidr pattern": {"10.0.0.0/8"},
	} {
		if l, err := AuthorizedKeyLine(string(pub), from); err == nil {
			t.Errorf("%s: accepted: %s", name, l)
		}
	}
	if _, err := AuthorizedKeyLine("not a key", []string{"10.0.0.2"}); err == nil {
		t.Error("a bad public key was accepted")
	}
}

func TestSetAuthorizedKeys(t *testing.T) {
	newKey := func() (ssh.PublicKey, string) {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := ssh.NewPublicKey(pub)
		return k, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
	}
	cur, curLine := newKey()
	old, oldLine := newKey()
	_, other := newKey()
	const comment = "herd-cluster-lab"
	want := `restrict,from="10.0.0.2",command="/usr/local/bin/herd ssh-gate" ` + curLine + " " + comment
	tests := []struct {
		name     string
		existing string
		want     string
		changed  bool
	}{
		{"empty", "", want + "\n", true},
		{"other keys", other + " me@laptop\n", other + " me@laptop\n" + want + "\n", true},
		{"no final newline", "# keys\n" + other, "# keys\n" + other + "\n" + want + "\n", true},
		{"already there", other + "\n" + want + "\n", other + "\n" + want + "\n", false},
		{"unrestricted line of an older bootstrap", curLine + " " + comment + "\n" + other + "\n", other + "\n" + want + "\n", true},
		{"same key, other options and comment", `from="10.0.0.0/8",no-pty ` + curLine + " old-comment\n", want + "\n", true},
		{"old from= list", `restrict,from="10.0.0.9",command="/usr/local/bin/herd ssh-gate" ` + curLine + " " + comment + "\n", want + "\n", true},
		{"rotated-out key by comment", oldLine + " " + comment + "\n" + other + " me\n", other + " me\n" + want + "\n", true},
		{"rotated-out key by key", oldLine + " renamed\n", want + "\n", true},
		{"commented out is kept", "# " + curLine + "\n", "# " + curLine + "\n" + want + "\n", true},
		{"garbage kept", "not a key\n", "not a key\n" + want + "\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := SetAuthorizedKeys([]byte(tt.existing), comment, []ssh.PublicKey{cur, old}, []string{want})
			if string(got) != tt.want || changed != tt.changed {
				t.Errorf("got %q, %v; want %q, %v", got, changed, tt.want, tt.changed)
			}
		})
	}
}

func TestBoardFiles(t *testing.T) {
	sec, err := GenerateSecrets("lab")
	if err != nil {
		t.Fatal(err)
	}
	bin := NewFile(BinaryPath, []byte("ELF"), 0o755)
	server := BoardPlan{Role: Role{Server: true}, Name: "b1", Agent: AgentConfig{Name: "b1", Server: true}}
	worker := BoardPlan{Role: Role{}, Name: "b4", Agent: AgentConfig{Name: "b4"}}
	type got struct {
		Path string
		Mode os.FileMode
	}
	files := func(p BoardPlan) []got {
		fs, err := BoardFiles(p, sec, bin)
		if err != nil {
			t.Fatal(err)
		}
		var out []got
		for _, f := range fs {
			out = append(out, got{f.Path, f.Mode})
		}
		return out
	}
	wantServer := []got{
		{BinaryPath, 0o755}, {GossipKeyPath, 0o600}, {MetricsTokenPath, 0o600}, {ServerKeyPath, 0o600}, {ClusterSSHKey, 0o600}, {APITokenPath, 0o600},
		{SudoersPath, 0o440}, {AgentConfigPath, 0o644}, {UnitPath, 0o644},
	}
	wantWorker := []got{{BinaryPath, 0o755}, {GossipKeyPath, 0o600}, {MetricsTokenPath, 0o600}, {SudoersPath, 0o440}, {AgentConfigPath, 0o644}, {UnitPath, 0o644}}
	if diff := cmp.Diff(wantServer, files(server)); diff != "" {
		t.Errorf("server files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantWorker, files(worker)); diff != "" {
		t.Errorf("worker files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ClusterKeyPath, ClusterSSHPub, ServerKeyPath, ClusterSSHKey, APITokenPath}, StalePaths(worker.Role)); diff != "" {
		t.Errorf("worker stale paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ClusterKeyPath, ClusterSSHPub}, StalePaths(server.Role)); diff != "" {
		t.Errorf("server stale paths (-want +got):\n%s", diff)
	}
	fs, _ := BoardFiles(worker, sec, bin)
	for _, f := range fs {
		for _, secret := range [][]byte{sec.ServerKey, sec.SSHPrivateKey, sec.APIToken} {
			if bytes.Contains(f.Content, bytes.TrimSpace(secret)) {
				t.Errorf("worker file %s holds a server secret", f.Path)
			}
		}
	}
}

func TestServiceSteps(t *testing.T) {
	reload := []string{"systemctl", "daemon-reload"}
	enable := []string{"systemctl", "enable", UnitName}
	start := []string{"systemctl", "start", UnitName}
	restart := []string{"systemctl", "restart", UnitName}
	tests := []struct {
		name        string
		unit, files bool
		st          ServiceState
		want        [][]string
	}{
		{"fresh board", true, true, ServiceState{}, [][]string{reload, enable, start}},
		{"nothing changed, running", false, false, ServiceState{true, true}, nil},
		{"config changed, running", false, true, ServiceState{true, true}, [][]string{restart}},
		{"unit changed, running", true, true, ServiceState{true, true}, [][]string{reload, restart}},
		{"nothing changed, stopped", false, false, ServiceState{true, false}, [][]string{start}},
		{"nothing changed, disabled", false, false, ServiceState{false, true}, [][]string{enable}},
		{"config changed, stopped", false, true, ServiceState{true, false}, [][]string{start}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ServiceSteps(tt.unit, tt.files, tt.st)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	h, m, err := ParseUname([]byte("b1 aarch64\n"))
	if err != nil || h != "b1" || m != "aarch64" {
		t.Errorf("ParseUname = %q %q %v", h, m, err)
	}
	if _, _, err := ParseUname([]byte("Linux b1 6.1 aarch64\n")); err == nil {
		t.Error("ParseUname accepted 4 fields")
	}
	s1 := sha256.Sum256([]byte("1"))
	s2 := sha256.Sum256([]byte("2"))
	out := hexs(s1) + "  /r/etc/herd/agent.toml\n" + hexs(s2) + " */r/usr/local/bin/herd\n\\" + hexs(s2) + "  /r/odd\\nname\nnot a line\n" + hexs(s1) + "  /elsewhere\n"
	sums := ParseSums([]byte(out), "/r")
	if diff := cmp.Diff(map[string][32]byte{"/etc/herd/agent.toml": s1, "/usr/local/bin/herd": s2}, sums); diff != "" {
		t.Errorf("ParseSums (-want +got):\n%s", diff)
	}
	modes := ParseModes([]byte("600 /r/etc/herd/cluster.key\n755 /r/usr/local/bin/herd\n4755 /r/x\nbad\n644 /other\n"), "/r")
	if diff := cmp.Diff(map[string]os.FileMode{"/etc/herd/cluster.key": 0o600, "/usr/local/bin/herd": 0o755, "/x": 0o755}, modes); diff != "" {
		t.Errorf("ParseModes (-want +got):\n%s", diff)
	}
}

func hexs(b [32]byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int]string{64: "64 B", 64000: "64.0 kB", 15_900_000: "15.9 MB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseAdvertise(t *testing.T) {
	boards := []string{"pi@pi1.local", "pi2", "10.0.0.4"}
	got, err := ParseAdvertise([]string{"pi@pi1.local=192.168.7.2", "pi2=fd00::0005", "pi2=fd00::5"}, boards)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"pi@pi1.local": "192.168.7.2", "pi2": "fd00::5"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, err := ParseAdvertise(nil, boards); got != nil || err != nil {
		t.Errorf("no values: %v, %v", got, err)
	}
	for _, tt := range []struct{ val, want string }{
		{"pi2", "want BOARD=IP"},
		{"=10.0.0.1", "want BOARD=IP"},
		{"pi2=", "want BOARD=IP"},
		{"pi9=10.0.0.1", `"pi9" is not one of the boards given`},
		{"pi1.local=10.0.0.1", "is not one of the boards given"}, // the argument was pi@pi1.local
		{"pi2=pi2.lan", "is not an IP address"},
		{"pi2=10.0.0.1:7946", "is not an IP address"},
		{"pi2=0.0.0.0", "cannot be a board's address"},
		{"pi2=224.0.0.1", "cannot be a board's address"},
	} {
		if _, err := ParseAdvertise([]string{tt.val}, boards); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAdvertise(%q) = %v, want %q", tt.val, err, tt.want)
		}
	}
	if _, err := ParseAdvertise([]string{"pi2=10.0.0.1", "pi2=10.0.0.2"}, boards); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("twice: %v", err)
	}
}
