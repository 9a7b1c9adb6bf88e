package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
)

// buildBins builds herd and herdctl into dir.
func buildBins(t *testing.T, dir string) (herd, herdctl string) {
	t.Helper()
	herd, herdctl = filepath.Join(dir, "herd"), filepath.Join(dir, "herdctl")
	for _, b := range []struct{ out, pkg string }{{herd, "."}, {herdctl, "../herdctl"}} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return herd, herdctl
}

// cleanEnv is the environment without HERD_* and the config locations,
// with HOME and XDG_CONFIG_HOME set to home and xdg.
func cleanEnv(home, xdg string, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERD_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		out = append(out, kv)
	}
	return append(append(out, "HOME="+home, "XDG_CONFIG_HOME="+xdg), extra...)
}

// startDev starts `herd agent -dev` on free loopback ports with args
// added; it returns the API address and the process.
func startDev(t *testing.T, bin, dir string, env []string, args ...string) (string, *exec.Cmd, chan error) {
	t.Helper()
	api := testutil.FreeAddr(t)
	argv := append([]string{"agent", "-dev", "--api-listen", api,
		"--gossip-bind", testutil.FreeAddr(t),
		"--raft-bind", testutil.FreeAddr(t)}, args...)
	logf, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
			t.Logf("dev agent log:\n%s", b)
		}
	})
	return api, cmd, done
}

// herdctl runs herdctl with env and returns its exit code and output.
func herdctl(bin string, env []string, args ...string) (int, string) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

func stopDev(t *testing.T, cmd *exec.Cmd, done chan error) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("dev agent exit after SIGINT: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("dev agent did not exit after SIGINT")
	}
}

// TestDevAgentTokenReachesHerdctl: `herd agent -dev` makes a token that
// herdctl finds with no flags or environment, while a client without it
// is refused; the token file goes away on a clean exit.
func TestDevAgentTokenReachesHerdctl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agent processes")
	}
	dir := t.TempDir()
	herd, ctl := buildBins(t, dir)
	home, xdg := filepath.Join(dir, "home"), filepath.Join(dir, "xdg")
	env := cleanEnv(home, xdg)
	addr, cmd, done := startDev(t, herd, dir, env)
	// herdctl's only hint is the loopback address (the test cannot use the
	// default 127.0.0.1:7948, which another agent may hold).
	ctlEnv := append(env, "HERD_ADDR=http://"+addr)
	testutil.Eventually(t, 30*time.Second, "herdctl get nodes against the dev agent", func() error {
		if code, out := herdctl(ctl, ctlEnv, "get", "nodes"); code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
	tokPath := filepath.Join(xdg, "herd", "dev.token")
	fi, err := os.Stat(tokPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dev token %s: %v %v, want mode 0600", tokPath, err, fi)
	}
	code, out := herdctl(ctl, append(env, "HERD_ADDR=http://"+addr, "HERD_TOKEN=wrong-token-0123456789"), "get", "nodes")
	if code != 1 || !strings.Contains(out, "invalid bearer token") {
		t.Errorf("herdctl with a wrong token: exit %d %q, want 1 and invalid bearer token", code, out)
	}
	c, _ := client.New([]string{"http://" + addr}, client.Options{Timeout: 5 * time.Second})
	if _, err := c.Status(t.Context()); !api.IsCode(err, "unauthorized") {
		t.Errorf("client without a token: %v, want unauthorized", err)
	}
	stopDev(t, cmd, done)
	if _, err := os.Stat(tokPath); !os.IsNotExist(err) {
		t.Errorf("dev token left after a clean exit: %v", err)
	}
}

// TestDevAgentGivenTokenFile: -dev --api-token-file F serves F's tokens
// and writes no dev token.
func TestDevAgentGivenTokenFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agent processes")
	}
	dir := t.TempDir()
	herd, ctl := buildBins(t, dir)
	home, xdg := filepath.Join(dir, "home"), filepath.Join(dir, "xdg")
	env := cleanEnv(home, xdg)
	tokFile := filepath.Join(dir, "my.token")
	const tok = "given-token-0123456789"
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api, cmd, done := startDev(t, herd, dir, env, "--api-token-file", tokFile)
	ctlEnv := append(env, "HERD_ADDR=http://"+api, "HERD_TOKEN_FILE="+tokFile)
	testutil.Eventually(t, 30*time.Second, "herdctl with the given token file", func() error {
		if code, out := herdctl(ctl, ctlEnv, "get", "nodes"); code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(xdg, "herd", "dev.token")); !os.IsNotExist(err) {
		t.Errorf("dev token written although --api-token-file was given: %v", err)
	}
	if code, _ := herdctl(ctl, append(env, "HERD_ADDR=http://"+api), "get", "nodes"); code != 1 {
		t.Errorf("herdctl without any token: exit %d, want 1", code)
	}
	stopDev(t, cmd, done)
	if _, err := os.Stat(tokFile); err != nil {
		t.Errorf("the given token file was removed: %v", err)
	}
}
