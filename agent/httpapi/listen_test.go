package httpapi_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

func newServer(t *testing.T, token string) *httpapi.Server {
	t.Helper()
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	cfg.Logger = testutil.Logger(t)
	cfg.Token = token
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve runs s.Serve in the background; the returned func stops it and
// returns Serve's error.
func serve(t *testing.T, s *httpapi.Server, ls ...net.Listener) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ls...) }()
	stopped := false
	var err error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return after cancel")
			}
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestEveryListenerNeedsAToken(t *testing.T) {
	cfg := httpapi.DefaultConfig()
	cfg.Store = raftstore.NewMemStore(nil)
	if _, err := httpapi.New(cfg); !errors.Is(err, httpapi.ErrNoToken) {
		t.Errorf("New without a token = %v, want ErrNoToken", err)
	}

	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skipf("cannot listen on 0.0.0.0: %v", err)
	}
	stop := serve(t, newServer(t, testToken), l)
	port := l.Addr().(*net.TCPAddr).Port
	addr := "http://127.0.0.1:" + strconv.Itoa(port)
	c, _ := client.New([]string{addr}, client.Options{Token: testToken})
	if _, err := c.Status(ctxT(t)); err != nil {
		t.Errorf("Status with token: %v", err)
	}
	// Loopback is no exception.
	noTok, _ := client.New([]string{addr}, client.Options{})
	if _, err := noTok.Status(ctxT(t)); !api.IsCode(err, api.CodeUnauthorized) {
		t.Errorf("Status over loopback without a token = %v, want unauthorized", err)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after cancel, want nil", err)
	}
}

func TestUnixSocketRoundTrip(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := httpapi.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o660 {
		t.Errorf("socket mode %o, want 660", perm)
	}
	if _, err := httpapi.ListenUnix(sock); !errors.Is(err, httpapi.ErrSocketInUse) {
		t.Errorf("second ListenUnix = %v, want ErrSocketInUse", err)
	}

	stop := serve(t, newServer(t, testToken), l)
	c, err := client.New([]string{"unix://" + sock}, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := c.Create(ctx, deployment("web", nil)); err != nil {
		t.Fatalf("Create over unix socket: %v", err)
	}
	got, err := c.Get(ctx, api.KindDeployment, "web")
	if err != nil || got.Metadata.Name != "web" {
		t.Fatalf("Get over unix socket = %+v, %v", got.Metadata, err)
	}
	ch, err := c.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Shutting the server down ends open watches instead of waiting on them.
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	waitClosed(t, ch)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind after shutdown: %v", err)
	}
}

func TestListenUnixStaleAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	l, err := httpapi.ListenUnix(stale)
	if err != nil {
		t.Fatalf("ListenUnix over a stale socket: %v", err)
	}
	l.Close()

	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.ListenUnix(regular); err == nil || !strings.Contains(err.Error(), "not a unix socket") {
		t.Errorf("ListenUnix over a regular file = %v, want an error", err)
	}
	if _, err := httpapi.ListenUnix("relative.sock"); err == nil {
		t.Error("ListenUnix accepted a relative path")
	}
	if _, err := httpapi.Listen("nonsense"); err == nil {
		t.Error("Listen accepted an address without a port")
	}
}
