package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

func TestGenerateAndWriteToken(t *testing.T) {
	tok, err := httpapi.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != httpapi.TokenBytes {
		t.Fatalf("token %q decodes to %d bytes (%v), want %d base64url bytes", tok, len(b), err, httpapi.TokenBytes)
	}
	if tok2, _ := httpapi.GenerateToken(); tok2 == tok {
		t.Error("two generated tokens are equal")
	}
	path := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := httpapi.WriteTokenFile(path, tok); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %o, want 600", fi.Mode().Perm())
	}
	got, err := api.ReadTokenFile(path)
	if err != nil || len(got) != 1 || got[0] != tok {
		t.Errorf("ReadTokenFile = %q, %v; want [%q]", got, err, tok)
	}
}

func TestParseTokens(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"one", "aaaaaaaaaaaaaaaa\n", []string{"aaaaaaaaaaaaaaaa"}, ""},
		{"rotation", "# new first\nbbbbbbbbbbbbbbbb\n\n  aaaaaaaaaaaaaaaa  \n", []string{"bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa"}, ""},
		{"no trailing newline", "aaaaaaaaaaaaaaaa", []string{"aaaaaaaaaaaaaaaa"}, ""},
		{"empty", "", nil, "f: no token in the file"},
		{"comments only", "# x\n\n", nil, "f: no token in the file"},
		{"short", "aaaaaaaaaaaaaaaa\nshort\n", nil, "f:2: token of 5 characters is too short"},
		{"blank inside", "aaaaaaaa aaaaaaaa\n", nil, "f:1: a token is printable ASCII without blanks"},
		{"control", "aaaaaaaa\x01aaaaaaaa\n", nil, "f:1: a token is printable ASCII without blanks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := api.ParseTokens("f", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTokens = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "tokens", tc.want, got)
		})
	}
}

func TestReadTokenFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, []byte(strings.Repeat("a", api.MaxTokenFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ReadTokenFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadTokenFile of a huge file = %v, want a size error", err)
	}
}

// statusWith sends GET /v1/status with token (none when "") and returns
// the status code.
func statusWith(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/v1/status", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestTokenFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.token")
	oldTok, newTok := "old-token-0123456789", "new-token-0123456789"
	if err := httpapi.WriteTokenFile(path, oldTok); err != nil {
		t.Fatal(err)
	}
	tf, err := httpapi.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reloadErrs []error
	tf.OnError = func(err error) { reloadErrs = append(reloadErrs, err) }
	e := newEnv(t, func(c *httpapi.Config) { c.Tokens = tf; c.Token = "" })
	if got := statusWith(t, e.srv.URL, oldTok); got != 200 {
		t.Fatalf("old token: %d, want 200", got)
	}
	if got := statusWith(t, e.srv.URL, newTok); got != 401 {
		t.Fatalf("new token before rotation: %d, want 401", got)
	}

	// Step 1: add the new token first; both work. The file is re-read
	// when it changes, without a restart.
	if err := os.WriteFile(path+".tmp", []byte(newTok+"\n"+oldTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, "new token accepted", func() bool { return statusWith(t, e.srv.URL, newTok) == 200 })
	if got := statusWith(t, e.srv.URL, oldTok); got != 200 {
		t.Errorf("old token during rotation: %d, want 200", got)
	}

	// A broken file keeps the tokens read before and is reported.
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, "bad file reported", func() bool {
		statusWith(t, e.srv.URL, newTok)
		return len(reloadErrs) > 0
	})
	if got := statusWith(t, e.srv.URL, newTok); got != 200 {
		t.Errorf("new token after a broken rewrite: %d, want 200 (previous tokens kept)", got)
	}

	// Step 2: drop the old token.
	if err := httpapi.WriteTokenFile(path, newTok); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, "old token refused", func() bool { return statusWith(t, e.srv.URL, oldTok) == 401 })
	if got := statusWith(t, e.srv.URL, newTok); got != 200 {
		t.Errorf("new token after rotation: %d, want 200", got)
	}
}

func TestPeerCredentialsOnSocket(t *testing.T) {
	tests := []struct {
		name      string
		uids      []int
		wantNoTok int
	}{
		{"own uid trusted", []int{os.Getuid()}, 200},
		{"other uid only", []int{os.Getuid() + 4242}, 401},
		{"none trusted", []int{}, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "api.sock")
			l, err := httpapi.ListenUnix(sock)
			if err != nil {
				t.Fatal(err)
			}
			cfg := httpapi.DefaultConfig()
			cfg.Store = raftstore.NewMemStore(nil)
			cfg.Logger = testutil.Logger(t)
			cfg.Token = testToken
			cfg.SocketUIDs = tc.uids
			s, err := httpapi.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			serve(t, s, l)
			noTok, _ := client.New([]string{"unix://" + sock}, client.Options{})
			_, err = noTok.Status(ctxT(t))
			switch tc.wantNoTok {
			case 200:
				if err != nil {
					t.Errorf("trusted peer without a token: %v", err)
				}
			default:
				apiErr(t, err, http.StatusUnauthorized, api.CodeUnauthorized)
			}
			withTok, _ := client.New([]string{"unix://" + sock}, client.Options{Token: testToken})
			if _, err := withTok.Status(ctxT(t)); err != nil {
				t.Errorf("with the token: %v", err)
			}
		})
	}
	// The default trusts root only.
	if d := httpapi.DefaultConfig().SocketUIDs; len(d) != 1 || d[0] != 0 {
		t.Errorf("default SocketUIDs = %v, want [0]", d)
	}
}

func TestPeerCredentialsDoNotApplyToTCP(t *testing.T) {
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	cfg.SocketUIDs = []int{os.Getuid()}
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, l)
	if got := statusWith(t, "http://"+l.Addr().String(), ""); got != 401 {
		t.Errorf("TCP without a token from a trusted uid: %d, want 401", got)
	}
}

func TestHostHeader(t *testing.T) {
	e := newEnv(t, func(c *httpapi.Config) { c.Hosts = []string{"herd.lan", "Board1.Example:8443"} })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.srv.URL, "http://"))
	tests := []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + port, 200},
		{"127.0.0.1:1", 200}, // an SSH port forward changes the port
		{"127.0.0.1", 200},
		{"[::1]:" + port, 200},
		{"10.0.0.1:" + port, 200}, // an IP literal cannot be rebound
		{"localhost:" + port, 200},
		{"LOCALHOST:9", 200},
		{"herd.lan:" + port, 200},
		{"herd.lan", 200},
		{"herd.lan:1", 200},
		{"board1.example:8443", 200},
		{"board1.example:" + port, 421},
		{"board1.example", 421},
		{"evil.example:" + port, 421},
		{"evil.example", 421},
		{"127.0.0.1.evil.example:" + port, 421},
		{"localhost.evil.example:" + port, 421},
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			code, body := e.raw(t, "GET", "/v1/status", "", "Host", tc.host)
			if code != tc.want {
				t.Fatalf("Host %q: %d %s, want %d", tc.host, code, body, tc.want)
			}
			if code == 421 && decodeErr(t, body).Code != api.CodeForbidden {
				t.Errorf("body %s: want code forbidden", body)
			}
		})
	}
}

func TestHostHeaderIgnoredOnSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := httpapi.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, newServer(t, testToken), l)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest("GET", "http://anything.example/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("socket request with Host anything.example: %d, want 200", resp.StatusCode)
	}
}

func TestOrigin(t *testing.T) {
	e := newEnv(t)
	self := e.srv.URL
	tests := []struct {
		origin string
		want   int
	}{
		{"", 200},
		{self, 200},
		{"http://evil.example", 403},
		{"null", 403},
		{"https://" + strings.TrimPrefix(self, "http://"), 403},
		{self + "/", 403},
	}
	for _, tc := range tests {
		t.Run(tc.origin, func(t *testing.T) {
			code, body := e.raw(t, "GET", "/v1/status", "", "Origin", tc.origin)
			if code != tc.want {
				t.Fatalf("Origin %q: %d %s, want %d", tc.origin, code, body, tc.want)
			}
		})
	}
	// A cross-origin write is refused even with the token, and changes
	// nothing.
	code, _ := e.raw(t, "POST", "/v1/deployments", jsonOf(t, deployment("web", nil)), "Origin", "http://evil.example")
	if code != 403 {
		t.Errorf("cross-origin create: %d, want 403", code)
	}
	if _, err := e.c.Get(ctxT(t), api.KindDeployment, "web"); !api.IsCode(err, "not_found") {
		t.Errorf("after a refused cross-origin create, Get = %v, want not_found", err)
	}
}

func jsonOf(t *testing.T, o api.Object) string {
	t.Helper()
	raw, err := api.ToRaw(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWritesNeedJSONContentType(t *testing.T) {
	e := newEnv(t)
	body := jsonOf(t, deployment("web", nil))
	for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "garbage;;"} {
		t.Run(ct, func(t *testing.T) {
			code, resp := e.raw(t, "POST", "/v1/deployments", body, "Content-Type", ct)
			if code != http.StatusUnsupportedMediaType {
				t.Fatalf("Content-Type %q: %d %s, want 415", ct, code, resp)
			}
		})
	}
	// A body without any Content-Type is refused too (a browser's
	// "simple" request may omit it).
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/apply", strings.NewReader(`{"objects":[]}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("POST without Content-Type: %d, want 415", resp.StatusCode)
	}
	if items, _, _ := e.c.List(ctxT(t), api.KindDeployment); len(items) != 0 {
		t.Errorf("refused writes stored %d objects", len(items))
	}
	code, resp2 := e.raw(t, "POST", "/v1/deployments", body, "Content-Type", "application/json; charset=utf-8")
	if code != http.StatusCreated {
		t.Errorf("application/json; charset=utf-8: %d %s, want 201", code, resp2)
	}
	// A DELETE without a body needs no Content-Type.
	code, resp2 = e.raw(t, "DELETE", "/v1/deployments/web", "")
	if code != http.StatusOK {
		t.Errorf("DELETE without body: %d %s, want 200", code, resp2)
	}
}

func TestUserCannotWriteStatus(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.Create(ctx, deployment("web", intp(2))); err != nil {
		t.Fatal(err)
	}
	before, _ := e.c.Get(ctx, api.KindDeployment, "web")
	code, body := e.raw(t, "PUT", "/v1/deployments/web/status", `{"status":{"replicas":9,"readyReplicas":9}}`)
	if code != http.StatusForbidden {
		t.Fatalf("PUT status: %d %s, want 403", code, body)
	}
	ae := decodeErr(t, body)
	if ae.Code != api.CodeForbidden || !strings.Contains(ae.Message, "written by herd's agents only") {
		t.Errorf("PUT status error %+v: want code forbidden saying who writes status", ae)
	}
	code, _ = e.raw(t, "PUT", "/v1/nodes/pi1/status", `{"status":{"address":"10.6.6.6"}}`)
	if code != http.StatusForbidden {
		t.Errorf("PUT node status: %d, want 403", code)
	}
	after, _ := e.c.Get(ctx, api.KindDeployment, "web")
	diff(t, "deployment after refused status write", before, after)
}

func TestConnectionCap(t *testing.T) {
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	cfg.MaxConns = 2
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, l)
	addr := l.Addr().String()
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A request proves the server accepted (and holds) the connection.
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, testToken)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection: %v %v", resp, err)
		}
		held = append(held, c)
	}
	hc := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("third connection answered %d while the cap of 2 was held", resp.StatusCode)
	}
	held[0].Close()
	hc.Timeout = 10 * time.Second
	req, _ = http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("after one held connection closed: %v", err)
	}
	resp.Body.Close()
	if d := httpapi.DefaultConfig().MaxConns; d != httpapi.DefaultMaxConns || d <= 0 {
		t.Errorf("default MaxConns %d", d)
	}
}

func TestBodyReadDeadline(t *testing.T) {
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = testToken
	cfg.ReadTimeout = 200 * time.Millisecond
	cfg.Heartbeat = 50 * time.Millisecond
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, l)
	addr := l.Addr().String()

	// A body that never finishes is cut off by the read deadline.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/deployments HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":", addr, testToken)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode < 400 {
			t.Errorf("stalled body answered %d %s, want an error", resp.StatusCode, b)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("stalled body: server neither answered nor closed within 10s")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("stalled body took %s to be cut off", time.Since(start))
	}

	// A watch stream outlives the read deadline many times over.
	wc, _ := client.New([]string{"http://" + addr}, client.Options{Token: testToken})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	wresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer wresp.Body.Close()
	br := bufio.NewReader(wresp.Body)
	deadline := time.Now().Add(5 * cfg.ReadTimeout)
	for time.Now().Before(deadline) {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("watch stream ended after %s: %v", time.Since(deadline.Add(-5*cfg.ReadTimeout)), err)
		}
	}
	if _, err := wc.Status(ctxT(t)); err != nil {
		t.Errorf("server unusable after the deadline tests: %v", err)
	}
}
