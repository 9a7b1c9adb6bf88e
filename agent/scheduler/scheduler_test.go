package scheduler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/api"
)

const gib = int64(1) << 30

// node returns a Ready node with 1 GiB and 4 CPUs, then applies opts.
func node(name string, opts ...func(*api.Node)) *api.Node {
	n := &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name},
		Status: api.NodeStatus{Phase: api.NodeReady, Fenced: true, BoardFacts: api.BoardFacts{MemoryBytes: gib, CPUs: 4, Arch: "arm64", Model: "Raspberry Pi 4 Model B"}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *api.Node)          { n.Status.Phase = api.NodeNotReady }
func cordoned(n *api.Node)          { n.Spec.Unschedulable = true }
func mem(b int64) func(*api.Node)   { return func(n *api.Node) { n.Status.MemoryBytes = b } }
func cpus(c int) func(*api.Node)    { return func(n *api.Node) { n.Status.CPUs = c } }
func arch(a string) func(*api.Node) { return func(n *api.Node) { n.Status.Arch = a } }
func nodeLabels(kv ...string) func(*api.Node) {
	return func(n *api.Node) { n.Metadata.Labels = kvMap(kv...) }
}

func kvMap(kv ...string) map[string]string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// pod returns a Pending pod owned by deployments/web, then applies opts.
func pod(name string, opts ...func(*api.Pod)) *api.Pod {
	p := &api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: name},
		Spec:   api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "web"}, Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
		Status: api.PodStatus{Phase: api.PodPending}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// on binds the pod to a node as Running.
func on(nodeName string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Node = nodeName; p.Status.Phase = api.PodRunning }
}
func phase(ph api.PodPhase) func(*api.Pod) { return func(p *api.Pod) { p.Status.Phase = ph } }
func owner(name string) func(*api.Pod) {
	return func(p *api.Pod) {
		p.Spec.Owner = api.OwnerRef{Kind: api.KindDeployment, Name: name}
		if name == "" {
			p.Spec.Owner = api.OwnerRef{}
		}
	}
}
func memReq(s string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Template.Resources.MemoryRequest = s }
}
func cpuReq(s string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Template.Resources.CPURequest = s }
}
func ports(ps ...api.Port) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Template.Ports = ps }
}
func hostPorts(kv map[string]int) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.HostPorts = kv }
}
func selector(kv ...string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Template.NodeSelector = kvMap(kv...) }
}
func pinned(n string) func(*api.Pod) { return func(p *api.Pod) { p.Spec.Node = n } }

// cgroup sets the board's reported cgroup facts.
func cgroup(layout string, controllers ...string) func(*api.Node) {
	return func(n *api.Node) { n.Status.Cgroup, n.Status.CgroupControllers = layout, controllers }
}

// devices sets the board's advertised device nodes.
func devices(names ...string) func(*api.Node) {
	return func(n *api.Node) { n.Status.Devices = names }
}

// wants sets the template's devices.
func wants(paths ...string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Template.Devices = paths }
}

// memLimit sets a memory limit; allow also sets allow_unenforced_limits.
func memLimit(l string, allow bool) func(*api.Pod) {
	return func(p *api.Pod) {
		p.Spec.Template.Resources.MemoryLimit = l
		p.Spec.Template.Resources.AllowUnenforcedLimits = allow
	}
}

func TestPlaceFilters(t *testing.T) {
	http := api.Port{Name: "http", Port: 8080}
	tests := []struct {
		name     string
		nodes    []*api.Node
		pods     []*api.Pod
		pod      *api.Pod
		wantNode string
		wantErr  string
	}{
		{
			name:     "device: only the board that has it",
			nodes:    []*api.Node{node("a", mem(4*gib)), node("b", devices("gpiochip0", "ttyUSB0")), node("c", devices("i2c-1"))},
			pod:      pod("p", wants("/dev/ttyUSB0")),
			wantNode: "b",
		},
		{
			name:     "devices: every one needed",
			nodes:    []*api.Node{node("a", devices("gpiochip0"), mem(4*gib)), node("b", devices("gpiochip0", "i2c-1"))},
			pod:      pod("p", wants("/dev/gpiochip0", "/dev/i2c-1")),
			wantNode: "b",
		},
		{
			name:    "device: no board has it, the reason names it",
			nodes:   []*api.Node{node("a"), node("b", devices("ttyUSB1")), node("c", devices("ttyUSB0"), notReady)},
			pod:     pod("p", wants("/dev/ttyUSB0")),
			wantErr: "0/3 boards: 2 missing device /dev/ttyUSB0, 1 not ready",
		},
		{
			name:    "device: the first missing one is the reason",
			nodes:   []*api.Node{node("a", devices("gpiochip0")), node("b", devices("i2c-1"))},
			pod:     pod("p", wants("/dev/gpiochip0", "/dev/i2c-1")),
			wantErr: "0/2 boards: 1 missing device /dev/gpiochip0, 1 missing device /dev/i2c-1",
		},
		{
			name:    "device: a pinned daemon pod waits for its board's device",
			nodes:   []*api.Node{node("a", devices("i2c-1")), node("b")},
			pod:     pod("p", wants("/dev/i2c-1"), pinned("b")),
			wantErr: "0/1 boards: 1 missing device /dev/i2c-1",
		},
		{
			name:     "device: selector checked first",
			nodes:    []*api.Node{node("a", devices("i2c-1")), node("b", devices("i2c-1"), nodeLabels("zone", "attic"))},
			pod:      pod("p", wants("/dev/i2c-1"), selector("zone", "attic")),
			wantNode: "b",
		},
		{
			name:     "memory limit: board without the memory controller skipped",
			nodes:    []*api.Node{node("a", cgroup("v2", "cpu", "io", "pids"), mem(4*gib)), node("b", cgroup("v2", "cpu", "memory"))},
			pod:      pod("p", memLimit("64M", false)),
			wantNode: "b",
		},
		{
			name:    "memory limit: no board enforces it",
			nodes:   []*api.Node{node("a", cgroup("v2", "cpu", "io", "pids")), node("b", cgroup("none")), node("c", notReady)},
			pod:     pod("p", memLimit("64M", false)),
			wantErr: "0/3 boards: 1 cannot enforce memory_limit: cgroup memory controller disabled, 1 cannot enforce memory_limit: no cgroup file system mounted, 1 not ready",
		},
		{
			name:     "memory limit allowed unenforced",
			nodes:    []*api.Node{node("a", cgroup("v2", "cpu", "io", "pids"), mem(4*gib)), node("b", cgroup("v2", "cpu", "memory"))},
			pod:      pod("p", memLimit("64M", true)),
			wantNode: "a",
		},
		{
			name:     "no limit: any board",
			nodes:    []*api.Node{node("a", cgroup("v2", "cpu"), mem(4*gib)), node("b", cgroup("v2", "cpu", "memory"))},
			pod:      pod("p"),
			wantNode: "a",
		},
		{
			name:     "old agent without cgroup facts counts as enforcing",
			nodes:    []*api.Node{node("a", mem(4*gib)), node("b", cgroup("v2", "cpu", "memory"))},
			pod:      pod("p", memLimit("64M", false)),
			wantNode: "a",
		},
		{
			name:    "cpu limit needs the cpu controller",
			nodes:   []*api.Node{node("a", cgroup("v1", "memory"))},
			pod:     pod("p", func(p *api.Pod) { p.Spec.Template.Resources.CPULimit = "50%" }),
			wantErr: "0/1 boards: 1 cannot enforce cpu_limit: cgroup cpu controller disabled",
		},
		{
			name:    "pinned daemon pod on a board that cannot enforce",
			nodes:   []*api.Node{node("a", cgroup("v2", "cpu")), node("b")},
			pod:     pod("p", pinned("a"), memLimit("16M", false)),
			wantErr: "0/1 boards: 1 cannot enforce memory_limit: cgroup memory controller disabled",
		},
		{
			name:     "only ready node",
			nodes:    []*api.Node{node("a", notReady), node("b")},
			pod:      pod("p"),
			wantNode: "b",
		},
		{
			name:    "nothing ready",
			nodes:   []*api.Node{node("a", notReady), node("b", func(n *api.Node) { n.Status.Phase = api.NodeLeft })},
			pod:     pod("p"),
			wantErr: "0/2 boards: 2 not ready",
		},
		{
			name:     "cordoned skipped",
			nodes:    []*api.Node{node("a", cordoned), node("b")},
			pod:      pod("p"),
			wantNode: "b",
		},
		{
			name:     "selector on user label",
			nodes:    []*api.Node{node("a"), node("b", nodeLabels("disk", "ssd"))},
			pod:      pod("p", selector("disk", "ssd")),
			wantNode: "b",
		},
		{
			name:     "selector arch shorthand",
			nodes:    []*api.Node{node("a"), node("b", arch("amd64"))},
			pod:      pod("p", selector("arch", "amd64")),
			wantNode: "b",
		},
		{
			name:     "selector well-known arch",
			nodes:    []*api.Node{node("a", arch("arm")), node("b")},
			pod:      pod("p", selector(api.LabelArch, "arm")),
			wantNode: "a",
		},
		{
			name:     "selector model shorthand",
			nodes:    []*api.Node{node("a", func(n *api.Node) { n.Status.Model = "Pi 3" }), node("b")},
			pod:      pod("p", selector("model", "Pi 3")),
			wantNode: "a",
		},
		{
			name:     "selector node name",
			nodes:    []*api.Node{node("a"), node("b"), node("c")},
			pod:      pod("p", selector(api.LabelNode, "c")),
			wantNode: "c",
		},
		{
			name:     "user label cannot spoof well-known",
			nodes:    []*api.Node{node("a", nodeLabels(api.LabelArch, "riscv64")), node("b", arch("riscv64"))},
			pod:      pod("p", selector("arch", "riscv64")),
			wantNode: "b",
		},
		{
			name:    "selector matches nothing",
			nodes:   []*api.Node{node("a"), node("b", notReady)},
			pod:     pod("p", selector("disk", "ssd")),
			wantErr: "0/2 boards: 1 node selector mismatch, 1 not ready",
		},
		{
			name:     "fixed port in use",
			nodes:    []*api.Node{node("a"), node("b")},
			pods:     []*api.Pod{pod("x", on("a"), owner("other"), ports(http))},
			pod:      pod("p", ports(http)),
			wantNode: "b",
		},
		{
			name:    "fixed port in use everywhere",
			nodes:   []*api.Node{node("a"), node("b"), node("c", notReady)},
			pods:    []*api.Pod{pod("x", on("a"), ports(http)), pod("y", on("b"), ports(http))},
			pod:     pod("p", ports(http)),
			wantErr: "0/3 boards: 2 port 8080 in use, 1 not ready",
		},
		{
			name:     "same port other protocol is free",
			nodes:    []*api.Node{node("a")},
			pods:     []*api.Pod{pod("x", on("a"), ports(api.Port{Name: "dns", Port: 53, Protocol: "udp"}))},
			pod:      pod("p", ports(api.Port{Name: "dns", Port: 53, Protocol: "tcp"})),
			wantNode: "a",
		},
		{
			name:    "udp port in use",
			nodes:   []*api.Node{node("a")},
			pods:    []*api.Pod{pod("x", on("a"), ports(api.Port{Name: "dns", Port: 53, Protocol: "udp"}))},
			pod:     pod("p", ports(api.Port{Name: "dns", Port: 53, Protocol: "udp"})),
			wantErr: "0/1 boards: 1 port 53/udp in use",
		},
		{
			name:     "dynamic port assigned earlier blocks fixed port",
			nodes:    []*api.Node{node("a"), node("b")},
			pods:     []*api.Pod{pod("x", on("a"), ports(api.Port{Name: "http"}), hostPorts(map[string]int{"http": 20001}))},
			pod:      pod("p", ports(api.Port{Name: "x", Port: 20001})),
			wantNode: "b",
		},
		{
			name:     "terminal pods free their ports",
			nodes:    []*api.Node{node("a")},
			pods:     []*api.Pod{pod("x", on("a"), phase(api.PodLost), ports(http)), pod("y", on("a"), phase(api.PodFailed), ports(http)), pod("z", on("a"), phase(api.PodSucceeded), ports(http))},
			pod:      pod("p", ports(http)),
			wantNode: "a",
		},
		{
			name:     "pending pinned pods hold nothing",
			nodes:    []*api.Node{node("a")},
			pods:     []*api.Pod{pod("x", pinned("a"), ports(http))},
			pod:      pod("p", ports(http)),
			wantNode: "a",
		},
		{
			name:     "insufficient memory",
			nodes:    []*api.Node{node("a"), node("b", mem(2*gib))},
			pods:     []*api.Pod{pod("x", on("b"), memReq("512M"))},
			pod:      pod("p", memReq("1536M")),
			wantNode: "b",
		},
		{
			name:    "insufficient memory everywhere",
			nodes:   []*api.Node{node("a"), node("b")},
			pods:    []*api.Pod{pod("x", on("a"), memReq("600M")), pod("y", on("b"), memReq("600M"))},
			pod:     pod("p", memReq("600M")),
			wantErr: "0/2 boards: 2 insufficient memory",
		},
		{
			name:     "memory limit is the default request",
			nodes:    []*api.Node{node("a"), node("b", mem(4*gib))},
			pod:      pod("p", func(p *api.Pod) { p.Spec.Template.Resources.MemoryLimit = "2G" }),
			wantNode: "b",
		},
		{
			name:    "percent memory request is per node",
			nodes:   []*api.Node{node("a")},
			pods:    []*api.Pod{pod("x", on("a"), memReq("60%"))},
			pod:     pod("p", memReq("50%")),
			wantErr: "0/1 boards: 1 insufficient memory",
		},
		{
			name:    "insufficient cpu",
			nodes:   []*api.Node{node("a", cpus(1))},
			pods:    []*api.Pod{pod("x", on("a"), cpuReq("60%"))},
			pod:     pod("p", cpuReq("50%")),
			wantErr: "0/1 boards: 1 insufficient cpu",
		},
		{
			name:     "cpu limit is the default request",
			nodes:    []*api.Node{node("a", cpus(1)), node("b", cpus(2))},
			pod:      pod("p", func(p *api.Pod) { p.Spec.Template.Resources.CPULimit = "150%" }),
			wantNode: "b",
		},
		{
			name:     "pinned pod goes only to its node",
			nodes:    []*api.Node{node("a"), node("b", mem(8*gib))},
			pod:      pod("p", pinned("a")),
			wantNode: "a",
		},
		{
			name:    "pinned pod filtered on its node",
			nodes:   []*api.Node{node("a", cordoned), node("b")},
			pod:     pod("p", pinned("a")),
			wantErr: "0/1 boards: 1 cordoned",
		},
		{
			name:    "pinned to unknown node",
			nodes:   []*api.Node{node("a")},
			pod:     pod("p", pinned("zz")),
			wantErr: `0/1 boards: 1 unknown board "zz"`,
		},
		{
			name:    "no nodes",
			pod:     pod("p"),
			wantErr: "0/0 boards: no boards",
		},
		{
			name:  "dynamic range exhausted",
			nodes: []*api.Node{node("a")},
			pods: func() []*api.Pod {
				var ps []*api.Pod
				for port := DefaultPortMin; port <= DefaultPortMax; port++ {
					ps = append(ps, pod(fmt.Sprint("x", port), on("a"), ports(api.Port{Name: "p", Port: port})))
				}
				return ps
			}(),
			pod:     pod("p", ports(api.Port{Name: "p"})),
			wantErr: "0/1 boards: 1 no free port in 20000-29999",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &Snapshot{Nodes: tt.nodes, Pods: tt.pods}
			d, err := Place(snap, tt.pod)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Place = %+v, want error %q", d, tt.wantErr)
				}
				if !errors.Is(err, ErrUnschedulable) {
					t.Errorf("errors.Is(%v, ErrUnschedulable) = false", err)
				}
				var u *Unschedulable
				if !errors.As(err, &u) || u.Pod != tt.pod.Metadata.Name {
					t.Errorf("error %#v is not an *Unschedulable for pod %q", err, tt.pod.Metadata.Name)
				}
				if err.Error() != tt.wantErr {
					t.Errorf("error = %q, want %q", err.Error(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			if d.Node != tt.wantNode {
				t.Errorf("Place node = %q, want %q (reason %q)", d.Node, tt.wantNode, d.Reason)
			}
		})
	}
}

func TestPlaceScoring(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []*api.Node
		pods     []*api.Pod
		pod      *api.Pod
		wantNode string
	}{
		{
			name:     "tie broken by name",
			nodes:    []*api.Node{node("c"), node("b"), node("a")},
			pod:      pod("p"),
			wantNode: "a",
		},
		{
			name:     "spread before free memory",
			nodes:    []*api.Node{node("a", mem(8*gib)), node("b")},
			pods:     []*api.Pod{pod("x", on("a"))},
			pod:      pod("p"),
			wantNode: "b",
		},
		{
			name:     "spread counts only the same owner",
			nodes:    []*api.Node{node("a"), node("b")},
			pods:     []*api.Pod{pod("x", on("a"), owner("other")), pod("y", on("a"), owner("other")), pod("z", on("b"))},
			pod:      pod("p"),
			wantNode: "a",
		},
		{
			name:     "spread ignores terminal pods",
			nodes:    []*api.Node{node("a"), node("b")},
			pods:     []*api.Pod{pod("x", on("a"), phase(api.PodLost)), pod("z", on("b"))},
			pod:      pod("p"),
			wantNode: "a",
		},
		{
			name:     "least allocated fraction",
			nodes:    []*api.Node{node("a", mem(4*gib)), node("b", mem(2*gib))},
			pods:     []*api.Pod{pod("x", on("a"), owner("o"), memReq("3G"))},
			pod:      pod("p", memReq("256M")),
			wantNode: "b",
		},
		{
			name:     "larger node wins when equally used",
			nodes:    []*api.Node{node("a", mem(1*gib)), node("b", mem(2*gib))},
			pod:      pod("p", memReq("512M")),
			wantNode: "b",
		},
		{
			name:     "ownerless pods are not spread",
			nodes:    []*api.Node{node("a", mem(2*gib)), node("b")},
			pods:     []*api.Pod{pod("x", on("a"), owner(""))},
			pod:      pod("p", owner("")),
			wantNode: "a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Place(&Snapshot{Nodes: tt.nodes, Pods: tt.pods}, tt.pod)
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			if d.Node != tt.wantNode {
				t.Errorf("Place node = %q, want %q (reason %q)", d.Node, tt.wantNode, d.Reason)
			}
		})
	}
}

func TestPlaceHostPorts(t *testing.T) {
	nodes := []*api.Node{node("a")}
	p := pod("web-abcde", ports(api.Port{Name: "http", Port: 8080}, api.Port{Name: "metrics"}, api.Port{Name: "dns", Protocol: "udp"}))
	d, err := Place(&Snapshot{Nodes: nodes}, p)
	if err != nil {
		t.Fatal(err)
	}
	if d.HostPorts["http"] != 8080 {
		t.Errorf("http = %d, want the fixed 8080", d.HostPorts["http"])
	}
	for _, name := range []string{"metrics", "dns"} {
		if hp := d.HostPorts[name]; hp < DefaultPortMin || hp > DefaultPortMax {
			t.Errorf("%s = %d, want in %d-%d", name, hp, DefaultPortMin, DefaultPortMax)
		}
	}
	d2, err := Place(&Snapshot{Nodes: nodes}, p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, d2); diff != "" {
		t.Errorf("Place is not deterministic (-first +second):\n%s", diff)
	}

	// A port already used on the node is skipped: occupy the pick and
	// place again.
	taken := pod("other", on("a"), owner("o"), ports(api.Port{Name: "m", Port: d.HostPorts["metrics"]}))
	d3, err := Place(&Snapshot{Nodes: nodes, Pods: []*api.Pod{taken}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if d3.HostPorts["metrics"] == d.HostPorts["metrics"] {
		t.Errorf("metrics got %d, which is in use on the node", d3.HostPorts["metrics"])
	}
	if d3.HostPorts["dns"] != d.HostPorts["dns"] {
		t.Errorf("dns moved from %d to %d although only a tcp port was taken", d.HostPorts["dns"], d3.HostPorts["dns"])
	}

	// No ports: no map.
	d4, err := Place(&Snapshot{Nodes: nodes}, pod("plain"))
	if err != nil {
		t.Fatal(err)
	}
	if d4.HostPorts != nil {
		t.Errorf("HostPorts = %v, want nil", d4.HostPorts)
	}
}

func TestPlaceDynamicAvoidsOwnFixedPort(t *testing.T) {
	// With a one-port range that the pod's own fixed port takes, the
	// dynamic port has nowhere to go.
	sc, err := New(Config{PortMin: 30000, PortMax: 30001})
	if err != nil {
		t.Fatal(err)
	}
	p := pod("p", ports(api.Port{Name: "a", Port: 30000}, api.Port{Name: "b"}, api.Port{Name: "c"}))
	_, err = sc.Place(&Snapshot{Nodes: []*api.Node{node("n")}}, p)
	if err == nil || err.Error() != "0/1 boards: 1 no free port in 30000-30001" {
		t.Fatalf("Place err = %v, want no free port", err)
	}
	p.Spec.Template.Ports = p.Spec.Template.Ports[:2]
	d, err := sc.Place(&Snapshot{Nodes: []*api.Node{node("n")}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"a": 30000, "b": 30001}; !cmp.Equal(d.HostPorts, want) {
		t.Errorf("HostPorts = %v, want %v", d.HostPorts, want)
	}
}

func TestPlaceAll(t *testing.T) {
	nodes := []*api.Node{node("a", mem(2*gib)), node("b", mem(2*gib))}
	http := api.Port{Name: "http", Port: 80}
	pods := []*api.Pod{
		pod("p1", memReq("1G"), ports(http, api.Port{Name: "dyn"})),
		pod("p2", memReq("1G"), ports(http, api.Port{Name: "dyn"})),
		pod("p3", memReq("1G"), ports(http)),
		pod("p4", memReq("1G")),
		pod("p5", memReq("1G")),
		pod("p6", memReq("1G")),
	}
	got := PlaceAll(&Snapshot{Nodes: nodes}, pods)
	var summary []string
	for _, pl := range got {
		if pl.Err != nil {
			summary = append(summary, pl.Pod.Metadata.Name+": "+pl.Err.Error())
		} else {
			summary = append(summary, pl.Pod.Metadata.Name+"->"+pl.Decision.Node)
		}
	}
	want := []string{
		"p1->a", // tie: a by name
		"p2->b", // port 80 taken on a, and spread
		"p3: 0/2 boards: 2 port 80 in use",
		"p4->a", // spread 1/1, equal memory, name
		"p5->b",
		"p6: 0/2 boards: 2 insufficient memory",
	}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Errorf("PlaceAll (-want +got):\n%s", diff)
	}
	if got[0].Decision.HostPorts["dyn"] == 0 || got[1].Decision.HostPorts["dyn"] == 0 {
		t.Errorf("dynamic ports not assigned: %v %v", got[0].Decision.HostPorts, got[1].Decision.HostPorts)
	}
}

func TestPlaceAllDynamicPortsDistinct(t *testing.T) {
	// A two-port range and three pods on one node: the first two get the
	// two ports, the third does not fit.
	sc, err := New(Config{PortMin: 40000, PortMax: 40001})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*api.Pod
	for i := range 3 {
		pods = append(pods, pod(fmt.Sprint("p", i), ports(api.Port{Name: "http"})))
	}
	got := sc.PlaceAll(&Snapshot{Nodes: []*api.Node{node("a")}}, pods)
	if got[0].Err != nil || got[1].Err != nil {
		t.Fatalf("first two pods: %v, %v", got[0].Err, got[1].Err)
	}
	if got[0].Decision.HostPorts["http"] == got[1].Decision.HostPorts["http"] {
		t.Errorf("two pods got port %d on the same node", got[0].Decision.HostPorts["http"])
	}
	if got[2].Err == nil {
		t.Errorf("third pod placed with %v, want no free port", got[2].Decision.HostPorts)
	}
}

func TestPlaceInvalid(t *testing.T) {
	if _, err := Place(&Snapshot{Nodes: []*api.Node{node("a")}}, nil); !errors.Is(err, ErrInvalidPod) {
		t.Errorf("nil pod: err = %v, want ErrInvalidPod", err)
	}
	_, err := Place(&Snapshot{Nodes: []*api.Node{node("a")}}, pod("p", memReq("12Q")))
	if !errors.Is(err, ErrInvalidPod) {
		t.Fatalf("bad quantity: err = %v, want ErrInvalidPod", err)
	}
	want := `scheduler: invalid pod: pods/p: spec.template.resources.memoryRequest: api: invalid quantity: memory "12Q": the suffix must be K, M, G or T (base 1024), or % of the board's memory`
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	// A bad quantity on a pod already placed counts as zero.
	d, err := Place(&Snapshot{Nodes: []*api.Node{node("a")}, Pods: []*api.Pod{pod("x", on("a"), cpuReq("lots"))}}, pod("p", cpuReq("400%")))
	if err != nil || d.Node != "a" {
		t.Errorf("Place = %v, %v; want a", d, err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{PortMin: 0, PortMax: 10}, {PortMin: 10, PortMax: 9}, {PortMin: 1, PortMax: 70000}} {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) err = %v, want ErrInvalidConfig", c, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

// TestPlaceKeepsServicePortsFree: a service's proxy port is held on every
// board: a fixed pod port on it fits nowhere, and no dynamic port is picked
// there (a two-port range where the service holds one).
func TestPlaceKeepsServicePortsFree(t *testing.T) {
	svc := &api.Service{Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{
		Ports: []api.ServicePort{{Name: "http", Target: "http", Port: 30000, Protocol: "tcp"}}}}
	snap := &Snapshot{Nodes: []*api.Node{node("a"), node("b")}, Services: []*api.Service{svc}}
	_, err := Place(snap, pod("p", ports(api.Port{Name: "http", Port: 30000, Protocol: "tcp"})))
	if err == nil || err.Error() != "0/2 boards: 2 port 30000/tcp is service web's port on every board" {
		t.Fatalf("fixed port on a service port: err = %v", err)
	}
	if _, err := Place(snap, pod("u", ports(api.Port{Name: "dns", Port: 30000, Protocol: "udp"}))); err != nil {
		t.Errorf("the same port over udp is free: %v", err)
	}
	sc, err := New(Config{PortMin: 30000, PortMax: 30001})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d, err := sc.Place(snap, pod(fmt.Sprintf("d%d", i), ports(api.Port{Name: "http", Protocol: "tcp"})))
		if err != nil {
			t.Fatal(err)
		}
		if d.HostPorts["http"] != 30001 {
			t.Errorf("pod d%d got port %d, want 30001 (30000 is the service's)", i, d.HostPorts["http"])
		}
	}
}
