package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/bootstrap"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/raftstore"
	"github.com/herd-dev/herd/units/sshexec"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// serveStatus serves GET /v1/status answering node on l until the test
// ends.
func serveStatus(t *testing.T, l net.Listener, node string) {
	t.Helper()
	serveStatusMembers(t, l, node, node)
}

// serveStatusMembers serves a status whose leader is node, with members
// alive (the first a server).
func serveStatusMembers(t *testing.T, l net.Listener, node string, members ...string) {
	t.Helper()
	st := api.ClusterStatus{Node: node, Leader: node, Servers: []api.RaftServer{{ID: node, Suffrage: "voter", Leader: true}}}
	for i, m := range members {
		st.Members = append(st.Members, api.GossipMember{Name: m, Addr: "127.0.0.1:7946", State: "alive", Server: i == 0})
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(st)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// unixStatus serves the status API on a fresh unix socket; it returns the
// socket's path.
func unixStatus(t *testing.T, node string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	serveStatus(t, l, node)
	return p
}

// tcpStatus serves the status API on 127.0.0.1; it returns host:port.
func tcpStatus(t *testing.T, node string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveStatus(t, l, node)
	return l.Addr().String()
}

// hostFor is the tunnel host for srv, verified with its known_hosts.
func hostFor(t *testing.T, srv *sshdtest.Server) tunnelHost {
	t.Helper()
	kh, err := bootstrap.LoadKnownHosts([]string{srv.KnownHostsFile})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(srv.Addr, ":")
	var p int
	fmt.Sscan(port, &p)
	return tunnelHost{target: bootstrap.Target{Arg: srv.Addr, Alias: host, User: srv.User, Host: host, Port: p},
		signers: []ssh.Signer{srv.ClientSigner}, known: kh}
}

// deadHost is a tunnel host whose port refuses connections.
func deadHost(t *testing.T, like tunnelHost) tunnelHost {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	h := like
	h.target.Port = port
	h.target.Arg = fmt.Sprintf("dead:%d", port)
	return h
}

// silentHost is a tunnel host that accepts TCP connections and never
// says anything, like a hung board.
func silentHost(t *testing.T, like tunnelHost) tunnelHost {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	h := like
	h.target.Port = l.Addr().(*net.TCPAddr).Port
	h.target.Arg = fmt.Sprintf("silent:%d", h.target.Port)
	// known_hosts must know it, or it is refused before dialling.
	return h
}

func tunnelCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestTunnelSocketThenTCP(t *testing.T) {
	srv := sshdtest.Start(t)
	ctx := tunnelCtx(t)
	h := hostFor(t, srv)

	tun := newTunnel([]tunnelHost{h}, nil, nil)
	tun.socket = unixStatus(t, "via-socket")
	tun.tcpAddr = tcpStatus(t, "via-tcp")
	defer tun.Close()
	c, err := tun.apiClient("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Node != "via-socket" {
		t.Fatalf("Status = %+v, %v; want via the socket", st, err)
	}

	// No socket on the board: the loopback TCP API, over the same SSH
	// connection.
	tun.socket = filepath.Join(t.TempDir(), "missing.sock")
	tun2 := newTunnel([]tunnelHost{h}, nil, nil)
	tun2.socket = tun.socket
	tun2.tcpAddr = tun.tcpAddr
	defer tun2.Close()
	c2, _ := tun2.apiClient("", 10*time.Second)
	st, err = c2.Status(ctx)
	if err != nil || st.Node != "via-tcp" {
		t.Fatalf("Status = %+v, %v; want via TCP", st, err)
	}

	// Neither: a clear error naming both.
	tun3 := newTunnel([]tunnelHost{h}, nil, nil)
	tun3.socket = tun.socket
	tun3.tcpAddr = "127.0.0.1:1"
	defer tun3.Close()
	c3, _ := tun3.apiClient("", 10*time.Second)
	_, err = c3.Status(ctx)
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "missing.sock") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("err = %v", err)
	}
}

func TestTunnelFailover(t *testing.T) {
	good := sshdtest.Start(t)
	other := sshdtest.Start(t)
	ctx := tunnelCtx(t)
	gh := hostFor(t, good)

	// A known_hosts file that lists every host: the silent one with good's
	// key, and other's address with good's key (a mismatch).
	dead := deadHost(t, gh)
	silent := silentHost(t, gh)
	liar := hostFor(t, other)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	var lines []string
	for _, addr := range []string{good.Addr, dead.target.Addr(), silent.target.Addr(), other.Addr} {
		lines = append(lines, knownhosts.Line([]string{addr}, good.HostKey))
	}
	if err := os.WriteFile(kh, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	known, err := bootstrap.LoadKnownHosts([]string{kh})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*tunnelHost{&gh, &dead, &silent, &liar} {
		h.known = known
	}
	var mu sync.Mutex
	var warnings []string
	tun := newTunnel([]tunnelHost{dead, silent, liar, gh}, nil, func(s string) {
		mu.Lock()
		warnings = append(warnings, s)
		mu.Unlock()
	})
	tun.hostTimeout = 500 * time.Millisecond
	tun.socket = unixStatus(t, "good")
	defer tun.Close()
	c, err := tun.apiClient("", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Node != "good" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "host key mismatch") {
		t.Errorf("warnings = %q, want one host key mismatch", warnings)
	}
	tun.mu.Lock()
	cur := tun.cur
	tun.mu.Unlock()
	if cur != 3 {
		t.Errorf("cur = %d, want 3 (the host that answered)", cur)
	}

	// The kept connection dies (sshd restarted): the next request dials
	// again, transparently.
	good.Restart()
	st, err = c.Status(ctx)
	if err != nil || st.Node != "good" {
		t.Fatalf("after sshd restart: Status = %+v, %v", st, err)
	}

	// Every host down: the client's ErrUnreachable, naming each host.
	good.Kill()
	tun.Close()
	_, err = c.Status(ctx)
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	for _, want := range []string{dead.target.Arg, silent.target.Arg, "host key mismatch", good.Addr} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, sshexec.ErrHostKeyMismatch) {
		t.Errorf("error does not match ErrHostKeyMismatch: %v", err)
	}
}

func TestTunnelRefusesUnknownHost(t *testing.T) {
	srv := sshdtest.Start(t)
	h := hostFor(t, srv)
	other := sshdtest.Start(t)
	kh, err := bootstrap.LoadKnownHosts([]string{other.KnownHostsFile}) // knows only the other server
	if err != nil {
		t.Fatal(err)
	}
	h.known = kh
	tun := newTunnel([]tunnelHost{h}, nil, nil)
	defer tun.Close()
	_, err = tun.DialContext(tunnelCtx(t), "tcp", "herd-api:80")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, sshexec.ErrUnknownHost) {
		t.Errorf("err = %#v (%v), want a dial *net.OpError matching ErrUnknownHost", err, err)
	}
}

func TestResolveTunnel(t *testing.T) {
	home := t.TempDir()
	sshDir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		t.Fatal(err)
	}
	srv := sshdtest.Start(t)
	host, port, _ := strings.Cut(srv.Addr, ":")
	conf := fmt.Sprintf("Host pi1\n  HostName %s\n  Port %s\n  User fromconfig\n", host, port)
	if err := os.WriteFile(filepath.Join(sshDir, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	khData, _ := os.ReadFile(srv.KnownHostsFile)
	if err := os.WriteFile(filepath.Join(sshDir, "known_hosts"), khData, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "USER": "local"}
	getenv := func(k string) string { return env[k] }
	keyRel := "~/" + strings.TrimPrefix(srv.ClientKeyFile, home+"/")
	if !strings.HasPrefix(srv.ClientKeyFile, home) {
		keyRel = srv.ClientKeyFile
	}

	hosts, closer, err := resolveTunnel(sshConfig{User: "root", Key: keyRel, Hosts: []string{"pi1", "admin@" + srv.Addr}}, tunnelEnv{getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	got := []string{hosts[0].target.User + "@" + hosts[0].target.Addr(), hosts[1].target.User + "@" + hosts[1].target.Addr()}
	want := []string{"root@" + srv.Addr, "admin@" + srv.Addr}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
	if len(hosts[0].signers) != 1 || string(hosts[0].signers[0].PublicKey().Marshal()) != string(srv.ClientSigner.PublicKey().Marshal()) {
		t.Errorf("signers: want the context's key")
	}
	// It works end to end, through the TCP fallback.
	tun := newTunnel(hosts[:1], nil, nil)
	tun.socket = filepath.Join(t.TempDir(), "none.sock")
	tun.tcpAddr = tcpStatus(t, "resolved")
	defer tun.Close()
	c, _ := tun.apiClient("", 10*time.Second)
	if st, err := c.Status(tunnelCtx(t)); err != nil || st.Node != "resolved" {
		t.Errorf("Status = %+v, %v", st, err)
	}

	t.Run("no known_hosts", func(t *testing.T) {
		_, _, err := resolveTunnel(sshConfig{Key: srv.ClientKeyFile, KnownHosts: filepath.Join(home, "nope"), Hosts: []string{"pi1"}}, tunnelEnv{getenv: getenv})
		if err == nil || !strings.Contains(err.Error(), "no known_hosts file") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no hosts", func(t *testing.T) {
		if _, _, err := resolveTunnel(sshConfig{}, tunnelEnv{getenv: getenv}); err == nil {
			t.Error("no error")
		}
	})
}

func TestUseSSH(t *testing.T) {
	ssh := &sshConfig{Hosts: []string{"pi1"}}
	tests := []struct {
		name    string
		addrs   []string
		context string
		env     string
		want    bool
	}{
		{name: "current context", want: true},
		{name: "explicit context beats env", context: "lab", env: "http://a:1", want: true},
		{name: "env beats current context", env: "http://a:1", want: false},
		{name: "--addr beats everything", addrs: []string{"http://a:1"}, context: "lab", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &app{env: env{getenv: func(k string) string {
				if k == envAddr {
					return tt.env
				}
				return ""
			}}, addrs: tt.addrs, contextName: tt.context}
			tg := target{SSH: ssh}
			a.useSSH(&tg)
			if got := tg.SSH != nil; got != tt.want {
				t.Errorf("tunnel used = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTunnelCarriesTokenAndHost: through the tunnel, the real API (which
// checks the token and the Host header) answers over its TCP listener and
// its socket.
func TestTunnelCarriesTokenAndHost(t *testing.T) {
	srv := sshdtest.Start(t)
	const tok = "tunnel-token-0123456789"
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Token = tok
	cfg.SocketUIDs = []int{} // the socket peer (sshd, as root here) needs the token too
	cfg.Status = func(context.Context) api.ClusterStatus { return api.ClusterStatus{Node: "real"} }
	hs, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ul, err := httpapi.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hs.Serve(ctx, tl, ul) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, tc := range []struct{ name, socket string }{{"tcp", "/nonexistent/api.sock"}, {"socket", sock}} {
		t.Run(tc.name, func(t *testing.T) {
			tun := newTunnel([]tunnelHost{hostFor(t, srv)}, nil, nil)
			tun.socket = tc.socket
			tun.tcpAddr = tl.Addr().String()
			defer tun.Close()
			c, err := tun.apiClient(tok, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Status(tunnelCtx(t))
			if err != nil || st.Node != "real" {
				t.Fatalf("status through the tunnel with the token: %+v, %v", st, err)
			}
			noTok, _ := tun.apiClient("", 10*time.Second)
			if _, err := noTok.Status(tunnelCtx(t)); !api.IsCode(err, "unauthorized") {
				t.Errorf("through the tunnel without a token: %v, want unauthorized", err)
			}
		})
	}
}
