package svcview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
)

func svc(name string, eps ...api.Endpoint) *api.Service {
	return &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"team": "x"}, ResourceVersion: 7},
		Spec:   api.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []api.ServicePort{{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"}}},
		Status: api.ServiceStatus{Endpoints: eps, Conditions: []api.Condition{{Type: "Ready"}}}}
}

func node(name, addr string, phase api.NodePhase, server bool) *api.Node {
	n := &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}},
		Status: api.NodeStatus{Phase: phase, Address: addr, SSHAddress: addr + ":22", BoardFacts: api.BoardFacts{MemoryBytes: 1 << 30}}}
	if server {
		n.Status.RaftAddress = addr + ":7947"
	}
	return n
}

func TestBuildTrimsAndSorts(t *testing.T) {
	ep := api.Endpoint{Port: "http", Pod: "web-a", Node: "b1", Address: "10.0.0.1:20001"}
	in := []*api.Service{svc("web", ep), nil, svc("api")}
	nodes := []*api.Node{node("b2", "10.0.0.2", api.NodeReady, false), node("b1", "10.0.0.1", api.NodeReady, true)}
	v := Build(in, nodes)
	want := View{
		Services: []*api.Service{
			{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "api"}, Spec: api.ServiceSpec{Ports: in[2].Spec.Ports}},
			{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Ports: in[0].Spec.Ports},
				Status: api.ServiceStatus{Endpoints: []api.Endpoint{ep}}},
		},
		Nodes: []*api.Node{
			{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b1"}, Status: api.NodeStatus{Phase: api.NodeReady, Address: "10.0.0.1", RaftAddress: "10.0.0.1:7947"}},
			{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b2"}, Status: api.NodeStatus{Phase: api.NodeReady, Address: "10.0.0.2"}},
		},
	}
	if d := cmp.Diff(want, v); d != "" {
		t.Errorf("Build (-want +got):\n%s", d)
	}
	if in[0].Status.Conditions == nil || in[0].Metadata.Labels == nil {
		t.Error("Build modified its input")
	}
	if d := cmp.Diff([]string{"b2"}, v.Workers()); d != "" {
		t.Errorf("Workers (-want +got):\n%s", d)
	}
	// Same objects in another order: same bytes.
	if !bytes.Equal(v.Encode(), Build([]*api.Service{in[2], in[0]}, []*api.Node{nodes[1], nodes[0]}).Encode()) {
		t.Error("Encode depends on input order")
	}
	back, err := Decode(v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(v, back); d != "" {
		t.Errorf("Decode(Encode) (-want +got):\n%s", d)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not json", "{", "svcview: decode"},
		{"wrong shape", `{"services":{}}`, "svcview: decode"},
		{"too big", `{"services":[]}` + strings.Repeat(" ", MaxBytes), "more than the"},
	} {
		if _, err := Decode([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	v, err := Decode([]byte(`{"services":[null],"nodes":[null]}`))
	if err != nil || len(v.Services) != 0 || len(v.Nodes) != 0 {
		t.Errorf("nil entries: %+v, %v", v, err)
	}
}

func TestFeedWakesOnlyOnChange(t *testing.T) {
	f := NewFeed()
	if _, _, ok := f.Current(); ok {
		t.Fatal("a new feed has a view")
	}
	if st := f.DNSState(); st.Services != nil || st.Nodes != nil {
		t.Errorf("DNSState before any view = %+v", st)
	}
	ch, stop := f.Subscribe()
	defer stop()
	v := Build([]*api.Service{svc("web")}, nil)
	if !f.Set(v) {
		t.Error("first Set reports no change")
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake after the first view")
	}
	if f.Set(Build([]*api.Service{svc("web")}, nil)) {
		t.Error("an equal view reports a change")
	}
	select {
	case <-ch:
		t.Error("woken by an equal view")
	default:
	}
	if got := f.DNSState().Services; len(got) != 1 || got[0].Metadata.Name != "web" {
		t.Errorf("DNSState services = %v", got)
	}
}
