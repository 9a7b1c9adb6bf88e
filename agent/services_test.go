package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/herd-dev/herd/agent/svcproxy"
	"github.com/herd-dev/herd/agent/svcview"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/atomicfile"
	"github.com/herd-dev/herd/internal/testutil"
)

func TestServiceConfig(t *testing.T) {
	base := DefaultConfig()
	base.Name = "pi1"
	for _, c := range []struct {
		dns, proxy string
		server     bool
		want       string
	}{
		{"", "", false, ""},
		{"off", "off", false, ""},
		{"auto:8600", "10.0.0.1", false, ""},
		{"10.0.0.1:8600", "::1", true, ""},
		{"auto:dns", "", true, "auto:PORT"},
		{"nonsense", "", true, "dns_listen"},
		{"", "10.0.0.1:80", true, "service_proxy"},
	} {
		cfg := base
		cfg.DNSListen, cfg.ServiceProxy, cfg.Server = c.dns, c.proxy, c.server
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("dns_listen %q service_proxy %q (server %v): %v, want %q", c.dns, c.proxy, c.server, err, c.want)
		}
	}
}

func TestDNSAddrs(t *testing.T) {
	for _, c := range []struct {
		listen, adv string
		want        []string
		required    bool
	}{
		{"", "10.0.0.5:7946", []string{"127.0.0.1:8600", "10.0.0.5:8600"}, false},
		{"", "127.0.0.1:7946", []string{"127.0.0.1:8600"}, false},
		{"off", "10.0.0.5:7946", nil, false},
		{"auto:53", "10.0.0.5:7946", []string{"10.0.0.5:53"}, true},
		{"127.0.0.1:5353", "10.0.0.5:7946", []string{"127.0.0.1:5353"}, true},
	} {
		got, req := dnsAddrs(c.listen, c.adv)
		if !cmp.Equal(got, c.want) || req != c.required {
			t.Errorf("dnsAddrs(%q, %q) = %v, %v; want %v, %v", c.listen, c.adv, got, req, c.want, c.required)
		}
	}
}

// TestHerdPortsCoverAgentDefaults: a service cannot claim a port the
// agent uses by default (api.HerdPorts is the list admission checks).
func TestHerdPortsCoverAgentDefaults(t *testing.T) {
	for _, p := range []api.ProxyPort{
		{Port: DefaultGossipPort, Protocol: "tcp"}, {Port: DefaultGossipPort, Protocol: "udp"},
		{Port: DefaultRaftPort, Protocol: "tcp"}, {Port: 7948, Protocol: "tcp"},
		{Port: DefaultDNSPort, Protocol: "udp"}, {Port: DefaultDNSPort, Protocol: "tcp"},
	} {
		found := false
		for _, h := range api.HerdPorts {
			found = found || h == p
		}
		if !found {
			t.Errorf("api.HerdPorts lacks %s", p)
		}
	}
	if _, port, _ := net.SplitHostPort(DefaultAPIAddr); port != "7948" {
		t.Errorf("DefaultAPIAddr %s: update api.HerdPorts", DefaultAPIAddr)
	}
}

func TestProxyBindings(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	web := &api.Service{Metadata: api.ObjectMeta{Name: "web", Created: t0},
		Spec: api.ServiceSpec{Ports: []api.ServicePort{
			{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"},
			{Name: "admin", Target: "admin"}, // no proxy port
		}},
		Status: api.ServiceStatus{Endpoints: []api.Endpoint{
			{Port: "admin", Pod: "web-a", Node: "b1", Address: "10.0.0.1:20002"},
			{Port: "http", Pod: "web-a", Node: "b1", Address: "10.0.0.1:20001"},
			{Port: "http", Pod: "web-b", Node: "b2", Address: "10.0.0.2:20001"},
		}}}
	late := &api.Service{Metadata: api.ObjectMeta{Name: "late", Created: t0.Add(time.Hour)},
		Spec: api.ServiceSpec{Ports: []api.ServicePort{{Name: "http", Target: "http", Port: 8080, Protocol: "tcp"}}}}
	got := proxyBindings(svcview.Build([]*api.Service{late, web}, nil))
	want := []svcproxy.Binding{{Key: svcproxy.Key{Service: "web", Port: "http", Protocol: "tcp"}, Listen: 8080,
		Targets: []svcproxy.Target{{Addr: "10.0.0.1:20001", Node: "b1", Pod: "web-a"}, {Addr: "10.0.0.2:20001", Node: "b2", Pod: "web-b"}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("proxyBindings (-want +got):\n%s", d)
	}
}

// TestWorkerAnswersFromItsView: a worker (no state) answers DNS and
// forwards its service port from the view file the leader writes: an
// HTTP request through the worker's port reaches the endpoint, and a new
// view (the endpoint gone) takes effect without a restart.
func TestWorkerAnswersFromItsView(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from web-a") }))
	t.Cleanup(backend.Close)
	proxyPort := freePort(t)
	view := func(eps ...api.Endpoint) []byte {
		return svcview.Build([]*api.Service{{Metadata: api.ObjectMeta{Name: "web"},
			Spec:   api.ServiceSpec{Ports: []api.ServicePort{{Name: "http", Target: "http", Port: proxyPort, Protocol: "tcp"}}},
			Status: api.ServiceStatus{Endpoints: eps}}},
			[]*api.Node{{Metadata: api.ObjectMeta{Name: "b1"}, Status: api.NodeStatus{Phase: api.NodeReady, Address: "127.0.0.1"}}}).Encode()
	}
	viewFile := filepath.Join(t.TempDir(), "view", "services.json")
	if err := os.MkdirAll(filepath.Dir(viewFile), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, viewFile, view(api.Endpoint{Port: "http", Pod: "web-a", Node: "b1", Address: backend.Listener.Addr().String()}))

	cfg := workerConfig(t, "w1")
	cfg.DNSListen = "127.0.0.1:0"
	cfg.ServiceProxy = "127.0.0.1"
	a, err := New(cfg, Options{ClusterKey: make([]byte, 32), Logger: testutil.Logger(t), ServiceViewFile: viewFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	testutil.Eventually(t, 10*time.Second, "web.svc.herd. from the worker", func() error {
		q := new(dns.Msg)
		q.SetQuestion("web.svc.herd.", dns.TypeA)
		m, _, err := (&dns.Client{Timeout: time.Second}).Exchange(q, a.DNSAddr())
		if err != nil {
			return err
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			return fmt.Errorf("%s: %v", dns.RcodeToString[m.Rcode], m.Answer)
		}
		return nil
	})
	url := "http://127.0.0.1:" + strconv.Itoa(proxyPort) + "/"
	testutil.Eventually(t, 10*time.Second, "a request through the worker's service port", func() error {
		body, err := httpGet(url)
		if err != nil {
			return err
		}
		if body != "from web-a" {
			return fmt.Errorf("body %q", body)
		}
		return nil
	})
	// The request shows in the proxy's metrics, by endpoint.
	conns := testMetric(t, a, "herd_service_proxy_connections_total", "endpoint", backend.Listener.Addr().String())
	if conns < 1 {
		t.Errorf("herd_service_proxy_connections_total for the endpoint = %v, want ≥ 1", conns)
	}
	writeFileAtomic(t, viewFile, view())
	testutil.Eventually(t, 10*time.Second, "the port refusing once the endpoint is gone", func() error {
		if body, err := httpGet(url); err == nil {
			return fmt.Errorf("still answered %q", body)
		}
		return nil
	})
}

// TestLeaderWritesViewToWorkers: the leader writes the service view to a
// Ready worker's board (through the executor), not to servers.
func TestLeaderWritesViewToWorkers(t *testing.T) {
	f := newFleet(t, 1, 1)
	f.leader()
	cfg := workerConfig(t, "w1", f.agents[0].cfg.GossipBind)
	cfg.DNSListen = "off"
	f.start(cfg)
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Target: "http", Port: 8080}}}}
	if _, err := f.client(0).Apply(context.Background(), []api.Object{svc}, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "the view on w1's board", func() error {
		b, ok := f.boards.Board("w1").File(svcview.Path)
		if !ok {
			return errors.New("no view file")
		}
		v, err := svcview.Decode(b)
		if err != nil {
			return err
		}
		if len(v.Services) != 1 || v.Services[0].Spec.Ports[0].Port != 8080 {
			return fmt.Errorf("view services %+v", v.Services)
		}
		return nil
	})
	if mode, _ := f.boards.Board("w1").FileMode(svcview.Path); mode.Perm() != 0o600 {
		t.Errorf("view file mode %v, want 0600", mode)
	}
	if _, ok := f.boards.Board("a1").File(svcview.Path); ok {
		t.Error("the view was written to a server, which follows its own store")
	}
}

func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(testutil.FreeAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

func httpGet(url string) (string, error) {
	// A new connection each time: an open one keeps its endpoint
	// (draining), which is not what these requests test.
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
