package api

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func proxySvc(name string, created time.Time, ports ...ServicePort) *Service {
	return &Service{Kind: KindService, Metadata: ObjectMeta{Name: name, Created: created},
		Spec: ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports}}
}

func TestProxyOwnersFirstCreatedWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svcs := []*Service{
		proxySvc("b", t0.Add(time.Second), ServicePort{Name: "http", Target: "http", Port: 80}),
		proxySvc("a", t0.Add(2*time.Second), ServicePort{Name: "http", Target: "http", Port: 80}),
		proxySvc("c", t0, ServicePort{Name: "dns", Target: "dns", Port: 53, Protocol: "udp"},
			ServicePort{Name: "plain", Target: "x"}),
		nil,
	}
	got := ProxyOwners(svcs)
	want := []ProxyClaim{
		{ProxyPort: ProxyPort{53, "udp"}, Service: "c", Name: "dns", Created: t0},
		{ProxyPort: ProxyPort{80, "tcp"}, Service: "b", Name: "http", Created: t0.Add(time.Second)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ProxyOwners (-want +got):\n%s", d)
	}
}

func TestProxyConflicts(t *testing.T) {
	stored := []*Service{
		proxySvc("api", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"}),
		proxySvc("web", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 80, Protocol: "tcp"}),
	}
	cases := []struct {
		name    string
		applied []*Service
		want    []FieldError
	}{
		{"re-apply keeps own port", []*Service{proxySvc("web", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 80})}, nil},
		{"other protocol is free", []*Service{proxySvc("dns", time.Time{}, ServicePort{Name: "d", Target: "d", Port: 8080, Protocol: "udp"})}, nil},
		{"taken by stored", []*Service{proxySvc("new", time.Time{}, ServicePort{Name: "a", Target: "a"}, ServicePort{Name: "b", Target: "b", Port: 8080})},
			[]FieldError{{Object: "services/new", Field: "spec.ports[1].port", Message: "8080/tcp is already the port of service api: a port belongs to one service on every board"}}},
		{"moved from a re-applied service", []*Service{
			proxySvc("web", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 81}),
			proxySvc("new", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 80}),
		}, nil},
		{"two in one apply", []*Service{
			proxySvc("x", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 9000}),
			proxySvc("y", time.Time{}, ServicePort{Name: "http", Target: "http", Port: 9000}),
		}, []FieldError{{Object: "services/y", Field: "spec.ports[0].port", Message: "9000/tcp is already the port of service x: a port belongs to one service on every board"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, ProxyConflicts(c.applied, stored)); d != "" {
				t.Errorf("ProxyConflicts (-want +got):\n%s", d)
			}
		})
	}
}

func TestManifestServiceProxyPort(t *testing.T) {
	objs, err := DecodeManifest("m.toml", []byte(`
[[service]]
name = "web"
selector = { app = "web" }
[[service.ports]]
name = "http"
target = "http"
port = 8080
[[service.ports]]
name = "dns"
target = "dns"
port = 53
protocol = "udp"
`))
	if err != nil {
		t.Fatal(err)
	}
	s := objs[0].(*Service)
	SetDefaults(s)
	want := []ServicePort{{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"}, {Name: "dns", Target: "dns", Port: 53, Protocol: "udp"}}
	if d := cmp.Diff(want, s.Spec.Ports); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	out, err := EncodeManifest([]Object{s})
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest("out.toml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d := cmp.Diff(want, back[0].(*Service).Spec.Ports); d != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", d, out)
	}
}
