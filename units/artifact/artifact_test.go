package artifact

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock/clocktest"
)

const testUnit = "herd-sensor-1.service"

func sum(b string) string {
	h := sha256.Sum256([]byte(b))
	return hex.EncodeToString(h[:])
}

// server serves files by path and counts requests.
type server struct {
	*httptest.Server
	files map[string]string
	hits  atomic.Int32
}

func newServer(t *testing.T, files map[string]string) *server {
	s := &server{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch {
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			http.Redirect(w, r, r.URL.Path, http.StatusFound) // loops
			return
		}
		b, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func testConfig(t *testing.T) (Config, *clocktest.Clock) {
	dir := t.TempDir()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	c := DefaultConfig()
	c.CacheDir = filepath.Join(dir, "var/lib/herd/artifacts")
	c.StatusDir = filepath.Join(dir, "run/herd/artifacts")
	c.Clock = clk
	c.Timeout, c.DialTimeout, c.HeaderTimeout = 10*time.Second, 2*time.Second, 5*time.Second
	return c, clk
}

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestFetchVerifiesCachesAndInstalls(t *testing.T) {
	const body = "#!/bin/sh\necho sensor\n"
	srv := newServer(t, map[string]string{"/sensor": body})
	c, _ := testConfig(t)
	dst := filepath.Join(t.TempDir(), "opt/sensor/sensor")
	a := api.Artifact{URL: srv.URL + "/sensor", SHA256: sum(body), Path: dst, Mode: "0750"}
	if err := c.Fetch(context.Background(), testUnit, []api.Artifact{a}); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != body {
		t.Fatalf("installed file = %q, %v", b, err)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o750 {
		t.Errorf("installed mode = %v, want 0750", st.Mode())
	}
	ce := filepath.Join(c.CacheDir, sum(body))
	if st, err := os.Stat(ce); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("cache entry %s: %v, %v; want mode 0600", ce, st, err)
	}
	if st, _ := os.Stat(c.CacheDir); st.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode = %v, want 0700", st.Mode())
	}

	// A cache hit needs no server.
	srv.Close()
	os.Remove(dst)
	if err := c.Fetch(context.Background(), testUnit, []api.Artifact{a}); err != nil {
		t.Fatalf("Fetch from the cache: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != body {
		t.Errorf("installed from cache = %q", b)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
}

func TestFetchFailures(t *testing.T) {
	const body = "payload"
	tests := []struct {
		name string
		url  string // path on the test server, or a full URL
		sha  string
		max  int64
		kind Kind
		msg  string
	}{
		{"mismatch", "/f", sum("other"), 0, KindMismatch, "sha256 of the 7 bytes downloaded is " + sum(body)},
		{"not found", "/missing", sum(body), 0, KindUnreachable, "HTTP status 404"},
		{"too large", "/f", sum(body), 3, KindTooLarge, "at most 3"},
		{"redirect loop", "/redirect/x", sum(body), 0, KindUnreachable, "more than 5 redirects"},
		{"connection refused", "http://127.0.0.1:1/f", sum(body), 0, KindUnreachable, "refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, map[string]string{"/f": body})
			c, _ := testConfig(t)
			if tc.max > 0 {
				c.MaxSize = tc.max
			}
			u := tc.url
			if strings.HasPrefix(u, "/") {
				u = srv.URL + u
			}
			dst := filepath.Join(t.TempDir(), "x")
			err := c.Fetch(context.Background(), testUnit, []api.Artifact{{URL: u, SHA256: tc.sha, Path: dst, Mode: "0755"}})
			if kindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Fetch = %v, want %s: ...%s...", err, tc.kind, tc.msg)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after a failed fetch", dst)
			}
			if ents, _ := os.ReadDir(c.CacheDir); len(ents) != 0 {
				t.Errorf("cache holds %d entries after a failed fetch", len(ents))
			}
			b, err := os.ReadFile(filepath.Join(c.StatusDir, testUnit))
			if err != nil {
				t.Fatalf("status file: %v", err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			k, msg, ok := ParseStatus(first)
			if !ok || k != tc.kind || !strings.Contains(msg, tc.msg) {
				t.Errorf("status line %q, want %s: ...%s...", first, tc.kind, tc.msg)
			}
		})
	}
}

func TestFetchRefusesHTTPSToHTTPRedirect(t *testing.T) {
	const body = "payload"
	plain := newServer(t, map[string]string{"/f": body})
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			http.Redirect(w, r, plain.URL+"/f", http.StatusFound)
		case "/f":
			w.Write([]byte(body))
		}
	}))
	t.Cleanup(tlsSrv.Close)
	c, _ := testConfig(t)
	c.RootCAs = x509.NewCertPool()
	c.RootCAs.AddCert(tlsSrv.Certificate())
	dst := filepath.Join(t.TempDir(), "x")
	a := api.Artifact{URL: tlsSrv.URL + "/down", SHA256: sum(body), Path: dst, Mode: "0644"}
	err := c.Fetch(context.Background(), testUnit, []api.Artifact{a})
	if kindOf(err) != KindUnreachable || !strings.Contains(err.Error(), "from https to http") {
		t.Fatalf("Fetch through an https→http redirect = %v, want unreachable: refused redirect", err)
	}
	if plain.hits.Load() != 0 {
		t.Errorf("the http server was asked %d times", plain.hits.Load())
	}
	// The same file over https is fine.
	a.URL = tlsSrv.URL + "/f"
	if err := c.Fetch(context.Background(), testUnit, []api.Artifact{a}); err != nil {
		t.Fatalf("Fetch over https: %v", err)
	}
}

func TestFetchStoppedRecordsNothing(t *testing.T) {
	inFlight := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight <- struct{}{}
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(hang.Close)
	c, _ := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-inFlight
		cancel() // systemctl stop during the download
	}()
	err := c.Fetch(ctx, testUnit, []api.Artifact{{URL: hang.URL + "/f", SHA256: sum("x"), Path: filepath.Join(t.TempDir(), "x"), Mode: "0644"}})
	if err == nil {
		t.Fatal("Fetch succeeded after its context was cancelled")
	}
	if _, err := os.Stat(filepath.Join(c.StatusDir, testUnit)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stopped fetch recorded a failure (%v): the next start would wait for a backoff", err)
	}
}

func TestMainExitStatus(t *testing.T) {
	var stderr strings.Builder
	if got := Main([]string{"fetch", "--unit=" + testUnit}, &stderr); got != ExitUsage {
		t.Errorf("Main with bad arguments = %d, want %d", got, ExitUsage)
	}
	if !strings.Contains(stderr.String(), "usage") {
		t.Errorf("stderr = %q, want a usage line", stderr.String())
	}
	for k, want := range map[Kind]int{KindMismatch: ExitMismatch, KindUnreachable: ExitUnreachable, KindTooLarge: ExitTooLarge, KindRefused: ExitRefused, KindFailed: ExitFailed} {
		if got := ExitStatus(k); got != want {
			t.Errorf("ExitStatus(%s) = %d, want %d", k, got, want)
		}
	}
}

func TestFetchBacksOffWithoutRequests(t *testing.T) {
	srv := newServer(t, map[string]string{"/f": "payload"})
	c, clk := testConfig(t)
	c.MaxWait = time.Second
	a := []api.Artifact{{URL: srv.URL + "/f", SHA256: sum("wrong"), Path: filepath.Join(t.TempDir(), "x"), Mode: "0755"}}
	fetch := func() Kind { return kindOf(c.Fetch(context.Background(), testUnit, a)) }
	// fetchSleeping runs a fetch that sleeps MaxWait of its backoff: the
	// test's clock moves it on.
	fetchSleeping := func() Kind {
		done := make(chan Kind, 1)
		go func() { done <- fetch() }()
		clk.WaitTimer(t, clk.Now().Add(c.MaxWait))
		clk.Advance(c.MaxWait)
		return <-done
	}

	if k := fetch(); k != KindMismatch {
		t.Fatalf("first fetch: %s", k)
	}
	// Within Backoff(1) = 10 s, systemd's restarts every second get the
	// recorded failure and the server sees nothing.
	for range 5 {
		if k := fetchSleeping(); k != KindMismatch {
			t.Fatalf("fetch in backoff: %s, want the recorded mismatch", k)
		}
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("server saw %d requests during the backoff, want 1", got)
	}
	// The sleeps above took the clock 5 s on; once 10 s have passed the
	// next run tries again, and the backoff doubles.
	clk.Advance(5 * time.Second)
	fetch()
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("server saw %d requests after the backoff, want 2", got)
	}
	b, _ := os.ReadFile(filepath.Join(c.StatusDir, testUnit))
	if st, _ := readStatus(filepath.Join(c.StatusDir, testUnit)); st.Count != 2 {
		t.Errorf("status %q: count %d, want 2", b, st.Count)
	}

	// A changed artifact list starts afresh.
	a[0].SHA256 = sum("payload")
	if err := c.Fetch(context.Background(), testUnit, a); err != nil {
		t.Fatalf("fetch of a changed list: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.StatusDir, testUnit)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("status file left after a successful fetch: %v", err)
	}
}

func TestFetchReplacesDamagedCacheEntry(t *testing.T) {
	const body = "payload"
	srv := newServer(t, map[string]string{"/f": body})
	c, _ := testConfig(t)
	if err := os.MkdirAll(c.CacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.CacheDir, sum(body)), []byte("rotten"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	if err := c.Fetch(context.Background(), testUnit, []api.Artifact{{URL: srv.URL + "/f", SHA256: sum(body), Path: dst, Mode: "0644"}}); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != body {
		t.Errorf("installed %q, want %q", b, body)
	}
	if srv.hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1 (the damaged entry fetched again)", srv.hits.Load())
	}
}

func TestFetchRefusesSymlinkInPath(t *testing.T) {
	const body = "payload"
	srv := newServer(t, map[string]string{"/f": body})
	c, _ := testConfig(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "etc")
	os.Mkdir(target, 0o755)
	if err := os.Symlink(target, filepath.Join(dir, "opt")); err != nil {
		t.Fatal(err)
	}
	err := c.Fetch(context.Background(), testUnit, []api.Artifact{{URL: srv.URL + "/f", SHA256: sum(body), Path: filepath.Join(dir, "opt/x"), Mode: "0755"}})
	if kindOf(err) != KindRefused {
		t.Fatalf("Fetch through a link = %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(target, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file was written through the link")
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, Backoff(n))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backoff (-want +got):\n%s", diff)
	}
}

func TestArgvRoundTrip(t *testing.T) {
	arts := []api.Artifact{
		{URL: "http://files.lan/a", SHA256: sum("a"), Path: "/opt/a", Mode: "0755"},
		{URL: "https://files.lan/b?x=%20", SHA256: sum("b"), Path: "/opt/b", Mode: "4755", AllowSetID: true},
	}
	argv := Argv(testUnit, arts)
	if argv[0] != api.HerdBinary || argv[1] != "artifact" {
		t.Fatalf("Argv = %q", argv)
	}
	unit, got, err := parseArgs(argv[2:])
	if err != nil {
		t.Fatalf("parseArgs: %v", err)
	}
	if unit != testUnit {
		t.Errorf("unit = %q", unit)
	}
	if diff := cmp.Diff(arts, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{
		{"fetch"},
		{"fetch", "--unit=" + testUnit, "--"},
		{"fetch", "--unit=" + testUnit, "--", "http://f/a", sum("a"), "/opt/a", "0755"},
		{"fetch", "--unit=" + testUnit, "--", "http://f/a", "xyz", "/opt/a", "0755", "-"},
		{"fetch", "--unit=" + testUnit, "--", "http://f/a", sum("a"), "/opt/a", "9", "-"},
		{"fetch", "--unit=" + testUnit, "--", "http://f/a", sum("a"), "/opt/a", "0755", "yes"},
	} {
		if _, _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) succeeded", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		line string
		kind Kind
		msg  string
		ok   bool
	}{
		{"mismatch http://f/x: sha256 ...", KindMismatch, "http://f/x: sha256 ...", true},
		{"unreachable http://f/x: HTTP status 404\r", KindUnreachable, "http://f/x: HTTP status 404", true},
		{"refused /opt/x: link", KindRefused, "/opt/x: link", true},
		{"bogus whatever", "", "", false},
		{"", "", "", false},
		{"failed " + strings.Repeat("a", 1000), KindFailed, strings.Repeat("a", maxMessage) + "...", true},
	}
	for _, tc := range tests {
		k, msg, ok := ParseStatus(tc.line)
		if k != tc.kind || msg != tc.msg || ok != tc.ok {
			t.Errorf("ParseStatus(%.30q) = %q, %.40q, %v; want %q, %.40q, %v", tc.line, k, msg, ok, tc.kind, tc.msg, tc.ok)
		}
	}
}
