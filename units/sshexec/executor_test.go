package sshexec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/herd-dev/herd/internal/clock/clocktest"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

func TestRunArgvArrivesLiterally(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	res, err := e.Run(testCtx(t), "b1", append([]string{"printf", `%s\0`}, nastyArgs...))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitStatus != 0 {
		t.Fatalf("status %d, stderr %q", res.ExitStatus, res.Stderr)
	}
	got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\x00"), "\x00")
	if diff := cmp.Diff(nastyArgs, got); diff != "" {
		t.Errorf("argv changed in transit (-sent +received):\n%s", diff)
	}
	if _, err := os.Stat("/tmp/herd-pwned"); err == nil {
		t.Error("/tmp/herd-pwned exists: an argument was run by a shell")
	}
}

func TestRunExitStatusExact(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	for _, want := range []int{0, 1, 3, 4, 123, 126, 127, 200, 255} {
		t.Run(strconv.Itoa(want), func(t *testing.T) {
			res, err := e.Run(ctx, "b1", []string{"sh", "-c", `echo out; echo err >&2; exit "$1"`, "sh", strconv.Itoa(want)})
			if err != nil {
				t.Fatal(err)
			}
			want := Result{Stdout: []byte("out\n"), Stderr: []byte("err\n"), ExitStatus: want}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		res, err := e.Run(ctx, "b1", []string{"herd-no-such-command"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitStatus != 127 || !bytes.Contains(res.Stderr, []byte("not found")) {
			t.Errorf("got status %d stderr %q, want 127 and 'not found'", res.ExitStatus, res.Stderr)
		}
	})
	t.Run("long argv", func(t *testing.T) {
		// Near maxArgvBytes, xargs must still pass it as one command line.
		argv := []string{"true"}
		for i := 0; i < 1000; i++ {
			argv = append(argv, strings.Repeat("a", 90))
		}
		res, err := e.Run(ctx, "b1", argv)
		if err != nil || res.ExitStatus != 0 {
			t.Fatalf("long argv: status %d err %v stderr %q", res.ExitStatus, err, res.Stderr)
		}
	})
	t.Run("stream exit error", func(t *testing.T) {
		var out bytes.Buffer
		err := e.Stream(ctx, "b1", []string{"sh", "-c", "echo partial; echo bad thing >&2; exit 3"}, &out)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Status != 3 || string(ee.Stderr) != "bad thing\n" {
			t.Fatalf("err = %#v, want *ExitError status 3", err)
		}
		if out.String() != "partial\n" {
			t.Errorf("stdout = %q", out.String())
		}
		if !strings.Contains(err.Error(), "bad thing") {
			t.Errorf("error %q does not carry stderr", err)
		}
	})
}

func TestRunOutputCap(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) { c.MaxOutputBytes = 1000 })
	res, err := e.Run(testCtx(t), "b1", []string{"head", "-c", "5000", "/dev/zero"})
	if !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("err = %v, want ErrOutputTooLarge", err)
	}
	if len(res.Stdout) != 1000 || res.ExitStatus != 0 {
		t.Errorf("kept %d bytes, status %d", len(res.Stdout), res.ExitStatus)
	}
}

func TestPutFileExact(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	dir := t.TempDir()

	allBytes := make([]byte, 0, 512)
	for i := range 512 {
		allBytes = append(allBytes, byte(i))
	}
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
	}{
		{"binary", allBytes, 0o644},
		{"crlf and quotes", []byte("[Service]\r\nExecStart=/bin/echo 'a' \"b\" `c` $d\r\n"), 0o600},
		{"empty", nil, 0o640},
		{"executable", []byte("#!/bin/sh\necho hi\n"), 0o755},
		{"read only", []byte("ro"), 0o400},
		{"large", bytes.Repeat([]byte("herd\x00\xff\n"), 100_000), 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := e.PutFile(ctx, "b1", p, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.content) {
				t.Errorf("content differs: got %d bytes, want %d", len(got), len(tt.content))
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tt.mode {
				t.Errorf("mode = %v, want %v", fi.Mode().Perm(), tt.mode)
			}
			back, err := e.ReadFile(ctx, "b1", p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, tt.content) {
				t.Errorf("ReadFile differs: got %d bytes, want %d", len(back), len(tt.content))
			}
		})
	}

	t.Run("replace keeps no temp files", func(t *testing.T) {
		p := filepath.Join(dir, "unit.service")
		for i := range 3 {
			content := fmt.Appendf(nil, "version %d\n", i)
			if err := e.PutFile(ctx, "b1", p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); !bytes.Equal(got, content) {
				t.Errorf("after write %d: %q", i, got)
			}
		}
		tmps, _ := filepath.Glob(filepath.Join(dir, "*.herd-tmp-*"))
		if len(tmps) != 0 {
			t.Errorf("temp files left: %v", tmps)
		}
	})

	t.Run("missing parent", func(t *testing.T) {
		p := filepath.Join(dir, "no", "such", "dir", "f")
		if err := e.PutFile(ctx, "b1", p, []byte("x"), 0o644); err == nil {
			t.Fatal("PutFile into a missing directory succeeded without MkdirAll")
		}
		if err := e.PutFile(ctx, "b1", p, []byte("x"), 0o644, PutFileOptions{MkdirAll: true}); err != nil {
			t.Fatalf("with MkdirAll: %v", err)
		}
		if got, _ := os.ReadFile(p); string(got) != "x" {
			t.Errorf("content %q", got)
		}
	})

	t.Run("remove", func(t *testing.T) {
		p := filepath.Join(dir, "doomed")
		if err := e.PutFile(ctx, "b1", p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := e.Remove(ctx, "b1", p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file still there: %v", err)
		}
		if err := e.Remove(ctx, "b1", p); err != nil {
			t.Errorf("removing a missing file: %v", err)
		}
		if _, err := e.ReadFile(ctx, "b1", p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadFile of a missing file: %v, want os.ErrNotExist", err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, p := range []string{"relative", "/a/../b", "/", "/a/", ""} {
			if err := e.PutFile(ctx, "b1", p, nil, 0o644); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("PutFile(%q) = %v, want ErrInvalidArgument", p, err)
			}
		}
		if err := e.PutFile(ctx, "b1", filepath.Join(dir, "x"), nil, os.ModeSetuid|0o755); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("setuid mode: %v, want ErrInvalidArgument", err)
		}
	})
}

func TestReadFileCap(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) { c.MaxReadFileBytes = 10 })
	p := filepath.Join(t.TempDir(), "big")
	os.WriteFile(p, make([]byte, 11), 0o644)
	if _, err := e.ReadFile(testCtx(t), "b1", p); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("err = %v, want ErrFileTooLarge", err)
	}
}

func otherKey(t testing.TB) ssh.PublicKey { return testutil.SSHSigner(t).PublicKey() }

func TestHostKeyVerification(t *testing.T) {
	srv := sshdtest.Start(t)
	wrongKnownHosts := filepath.Join(t.TempDir(), "wrong_known_hosts")
	os.WriteFile(wrongKnownHosts, []byte(knownhosts.Line([]string{srv.Addr}, otherKey(t))+"\n"), 0o600)
	otherHostKnownHosts := filepath.Join(t.TempDir(), "other_known_hosts")
	os.WriteFile(otherHostKnownHosts, []byte(knownhosts.Line([]string{"10.9.9.9:22"}, srv.HostKey)+"\n"), 0o600)
	wrong := otherKey(t)

	tests := []struct {
		name     string
		pin      ssh.PublicKey
		known    []string
		wantErr  error
		wantText string
	}{
		{name: "pinned ok", pin: srv.HostKey},
		{name: "pinned mismatch", pin: wrong, wantErr: ErrHostKeyMismatch,
			wantText: fmt.Sprintf("sshexec: host key mismatch for node b2 (%s): got %s, pinned %s",
				srv.Addr, ssh.FingerprintSHA256(srv.HostKey), ssh.FingerprintSHA256(wrong))},
		{name: "pin wins over known_hosts", pin: wrong, known: []string{srv.KnownHostsFile}, wantErr: ErrHostKeyMismatch},
		{name: "known_hosts fallback", known: []string{srv.KnownHostsFile}},
		{name: "known_hosts mismatch", known: []string{wrongKnownHosts}, wantErr: ErrHostKeyMismatch},
		{name: "known_hosts unknown host", known: []string{otherHostKnownHosts}, wantErr: ErrUnknownHost},
		{name: "nothing to verify against", wantErr: ErrNoHostKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestExecutor(t, srv, func(c *Config) {
				c.KnownHostsFiles = tt.known
				c.HostKeys = HostKeyLookupFunc(func(node string) (string, ssh.PublicKey, error) {
					return srv.Addr, tt.pin, nil
				})
			})
			res, err := e.Run(testCtx(t), "b2", []string{"echo", "ran"})
			if tt.wantErr == nil {
				if err != nil || string(res.Stdout) != "ran\n" {
					t.Fatalf("Run = %q, %v", res.Stdout, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantText != "" && err.Error() != tt.wantText {
				t.Errorf("error text\n got %s\nwant %s", err, tt.wantText)
			}
			if len(res.Stdout) != 0 {
				t.Errorf("command ran despite refusal: %q", res.Stdout)
			}
			if e.Stats().Dials != 0 {
				t.Errorf("Dials = %d, want 0", e.Stats().Dials)
			}
		})
	}
}

func TestOneConnectionForManyOperations(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	for i := range 100 {
		switch i % 3 {
		case 0:
			res, err := e.Run(ctx, "b1", []string{"echo", strconv.Itoa(i)})
			if err != nil || string(res.Stdout) != strconv.Itoa(i)+"\n" {
				t.Fatalf("op %d: %q %v", i, res.Stdout, err)
			}
		case 1:
			if err := e.PutFile(ctx, "b1", filepath.Join(dir, "f"), []byte(strconv.Itoa(i)), 0o644); err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		case 2:
			if b, err := e.ReadFile(ctx, "b1", filepath.Join(dir, "f")); err != nil || string(b) != strconv.Itoa(i-1) {
				t.Fatalf("op %d: %q %v", i, b, err)
			}
		}
	}
	if st := e.Stats(); st.Dials != 1 || st.DialFailures != 0 {
		t.Errorf("Stats = %+v, want exactly 1 dial", st)
	}
}

func TestConcurrentSessionsBounded(t *testing.T) {
	srv := sshdtest.Start(t)
	const limit = 4
	e := newTestExecutor(t, srv, func(c *Config) { c.MaxSessionsPerNode = limit })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Run(ctx, "b1", []string{"sh", "-c", `sleep 0.1; echo "$1"`, "sh", strconv.Itoa(i)})
			if err != nil || string(res.Stdout) != strconv.Itoa(i)+"\n" {
				failures.Add(1)
				t.Errorf("run %d: %q %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	st := e.Stats()
	t.Logf("stats: %+v", st)
	if st.PeakSessions > limit {
		t.Errorf("PeakSessions = %d, want <= %d", st.PeakSessions, limit)
	}
	if st.OpenSessions != 0 {
		t.Errorf("OpenSessions = %d after all returned", st.OpenSessions)
	}
	if st.Dials != 1 {
		t.Errorf("Dials = %d, want 1", st.Dials)
	}
}

func TestDefaultSessionLimitFitsSSHD(t *testing.T) {
	// 30 concurrent commands plus file transfers with the defaults must not
	// exceed sshd's MaxSessions 10 (which would refuse channels).
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := e.Run(ctx, "b1", []string{"sleep", "0.1"}); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := e.PutFile(ctx, "b1", filepath.Join(dir, strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
				t.Errorf("put %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

func TestReconnectAfterRestart(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	if err := e.PutFile(ctx, "b1", filepath.Join(dir, "a"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	res, err := e.Run(ctx, "b1", []string{"echo", "back"})
	if err != nil || string(res.Stdout) != "back\n" {
		t.Fatalf("Run after restart: %q %v", res.Stdout, err)
	}
	if err := e.PutFile(ctx, "b1", filepath.Join(dir, "a"), []byte("2"), 0o644); err != nil {
		t.Fatalf("PutFile after restart: %v", err)
	}
	if st := e.Stats(); st.Dials != 2 {
		t.Errorf("Dials = %d, want 2", st.Dials)
	}

	// A file operation is the first to notice, too.
	srv.Restart()
	if err := e.PutFile(ctx, "b1", filepath.Join(dir, "a"), []byte("3"), 0o644); err != nil {
		t.Fatalf("PutFile after second restart: %v", err)
	}
	if st := e.Stats(); st.Dials != 3 {
		t.Errorf("Dials = %d, want 3", st.Dials)
	}
}

func TestReconnectBackoff(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.BackoffBase = 200 * time.Millisecond
		c.BackoffMax = 400 * time.Millisecond
	})
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	killUntilDialFails(t, ctx, e, srv)
	// Within the backoff window an operation whose deadline ends first
	// fails fast, without dialling.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	before := e.Stats().DialFailures
	if _, err := e.Run(short, "b1", []string{"true"}); !errors.Is(err, ErrBackoff) {
		t.Fatalf("err = %v, want ErrBackoff", err)
	}
	if got := e.Stats().DialFailures; got != before {
		t.Errorf("DialFailures went from %d to %d: it dialled during backoff", before, got)
	}
	srv.Restart()
	// A patient operation waits out the backoff and succeeds.
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatalf("Run after sshd came back: %v", err)
	}
}

func TestForget(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	e.Forget("b1")
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Dials != 2 {
		t.Errorf("Dials = %d, want 2", st.Dials)
	}
	e.Close()
	if _, err := e.Run(ctx, "b1", []string{"true"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
}

// signalWriter closes ch on the first write containing want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	ch   chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.ch) })
	}
	return len(p), nil
}

func TestStreamCancellation(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	for _, tt := range []struct {
		name string
		argv []string
	}{
		{"silent command", []string{"sh", "-c", "echo started; exec sleep 60"}},
		{"chatty command", []string{"sh", "-c", "echo started; while :; do echo tick; sleep 0.01; done"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testCtx(t))
			w := &signalWriter{want: "started", ch: make(chan struct{})}
			errc := make(chan error, 1)
			go func() { errc <- e.Stream(ctx, "b1", tt.argv, w) }()
			select {
			case <-w.ch: // output streams while the command still runs
			case err := <-errc:
				t.Fatalf("Stream ended early: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("no output within 20s")
			}
			cancel()
			returnsWith(t, errc, context.Canceled, "Stream did not return after cancellation")
			// The connection is still good for the next operation.
			if _, err := e.Run(testCtx(t), "b1", []string{"true"}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if st := e.Stats(); st.Dials != 1 {
		t.Errorf("Dials = %d, want 1", st.Dials)
	}
}

func TestRunCancellation(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, "b1", []string{"sleep", "60"})
		errc <- err
	}()
	testutil.Until(t, 20*time.Second, "the session to open", func() bool { return e.Stats().OpenSessions == 1 })
	cancel()
	returnsWith(t, errc, context.Canceled, "Run did not return after cancellation")
}

// A frozen sshd stops answering keepalives that want replies; the
// connection is closed for it and the next call dials afresh.
// TestKeepaliveAckedDetectsDeadPeer is the same with acknowledgements.
func TestKeepaliveDetectsDeadPeer(t *testing.T) {
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.KeepaliveReplies = true
		c.KeepaliveInterval = 100 * time.Millisecond
		c.KeepaliveMax = 3
	})
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	srv.PauseConnections()
	t.Cleanup(srv.ResumeConnections)
	testutil.Until(t, 20*time.Second, "the keepalive to declare the peer dead", func() bool {
		return e.Stats().KeepaliveTimeouts == 1
	})
	srv.ResumeConnections()
	res, err := e.Run(ctx, "b1", []string{"echo", "fresh"})
	if err != nil || string(res.Stdout) != "fresh\n" {
		t.Fatalf("Run after dead peer: %q %v", res.Stdout, err)
	}
	if st := e.Stats(); st.Dials != 2 {
		t.Errorf("Dials = %d, want 2", st.Dials)
	}
}

func TestKeyLoading(t *testing.T) {
	srv := sshdtest.Start(t)
	t.Run("LoadKey", func(t *testing.T) {
		signer, err := LoadKey(srv.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		e := newTestExecutor(t, srv, func(c *Config) { c.Signers = []ssh.Signer{signer} })
		if _, err := e.Run(testCtx(t), "b1", []string{"true"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("LoadKey errors", func(t *testing.T) {
		if _, err := LoadKey(filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Error("missing file: no error")
		}
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		block, _ := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
		p := filepath.Join(t.TempDir(), "enc")
		os.WriteFile(p, pem.EncodeToMemory(block), 0o600)
		if _, err := LoadKey(p); err == nil || !strings.Contains(err.Error(), "passphrase") {
			t.Errorf("encrypted key: %v", err)
		}
	})
	t.Run("AgentSigners", func(t *testing.T) {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		pub, _ := ssh.NewPublicKey(priv.Public())
		// Authorise the agent's key too.
		f, _ := os.OpenFile(filepath.Join(srv.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
		f.Write(ssh.MarshalAuthorizedKey(pub))
		f.Close()

		t.Setenv("SSH_AUTH_SOCK", testutil.SSHAgent(t, priv))
		signers, closer, err := AgentSigners()
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		e := newTestExecutor(t, srv, func(c *Config) { c.Signers = signers })
		if _, err := e.Run(testCtx(t), "b1", []string{"true"}); err != nil {
			t.Fatal(err)
		}
		t.Setenv("SSH_AUTH_SOCK", "")
		if _, _, err := AgentSigners(); err == nil {
			t.Error("AgentSigners without SSH_AUTH_SOCK: no error")
		}
	})
}

// TestBackoffOnTheClock: the dial backoff is timed by Config.Clock, so a
// patient operation after a failed dial waits on that clock's timer (at
// the failure's time plus the backoff) and dials again only once the clock
// has passed it, however long it really took.
func TestBackoffOnTheClock(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	clk := clocktest.New(t0)
	srv := sshdtest.Start(t)
	e := newTestExecutor(t, srv, func(c *Config) {
		c.BackoffBase = time.Hour
		c.BackoffMax = time.Hour
		c.Jitter = func() float64 { return 0 }
		c.Clock = clk
	})
	ctx := testCtx(t)
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	killUntilDialFails(t, ctx, e, srv)
	srv.Restart()
	dials := e.Stats().Dials
	// No deadline: one shorter than the backoff would fail fast instead.
	patient, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(patient, "b1", []string{"true"})
		done <- err
	}()
	retryAt := t0.Add(30 * time.Minute) // the backoff jittered by 0: base/2
	clk.WaitTimer(t, retryAt)
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the clock reached the end of the backoff", err)
	default:
	}
	if got := e.Stats().Dials; got != dials {
		t.Fatalf("Dials went from %d to %d during the backoff", dials, got)
	}
	clk.Advance(30 * time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("Run after the backoff: %v", err)
	}
	if got := e.Stats().Dials; got != dials+1 {
		t.Errorf("Dials = %d, want %d (one after the backoff)", got, dials+1)
	}
}

// killUntilDialFails stops srv and runs commands on b1 until a dial has
// failed: the pooled connection may outlive sshd for a moment (its session
// process dies a little later).
func killUntilDialFails(t *testing.T, ctx context.Context, e *Executor, srv *sshdtest.Server) {
	t.Helper()
	srv.Kill()
	testutil.Until(t, 10*time.Second, "a dial to the stopped sshd to fail", func() bool {
		if _, err := e.Run(ctx, "b1", []string{"true"}); err == nil {
			t.Fatal("Run succeeded with sshd down")
		}
		return e.Stats().DialFailures > 0
	})
}
