package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/atomicfile"
	"github.com/herd-dev/herd/internal/backoff"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/units/sshexec/boardfs"
)

// Board paths.
const (
	// CacheDir holds downloaded artifacts by SHA-256, root-only, kept
	// across reboots.
	CacheDir = "/var/lib/herd/artifacts"
	// StatusDir holds a unit's last fetch failure, StatusDir/<unit>.
	StatusDir = "/run/herd/artifacts"
)

// Kind is what went wrong with a fetch: the first word of a status line.
type Kind string

// Kinds of failure.
const (
	// KindMismatch: the downloaded bytes do not have the artifact's SHA-256.
	KindMismatch Kind = "mismatch"
	// KindUnreachable: the URL could not be fetched (DNS, connection,
	// timeout, TLS, a status other than 200, a refused redirect).
	KindUnreachable Kind = "unreachable"
	// KindTooLarge: the body is over api.MaxArtifactSize bytes.
	KindTooLarge Kind = "too-large"
	// KindRefused: the board refused to write the path (a symbolic link
	// where a directory is expected, see boardfs).
	KindRefused Kind = "refused"
	// KindFailed: anything else (disk full, bad arguments).
	KindFailed Kind = "failed"
)

// Reason is the pod condition reason for a failure of kind k:
// ArtifactMismatch, ArtifactUnreachable, ArtifactTooLarge, ArtifactRefused
// or ArtifactFailed.
func (k Kind) Reason() string {
	switch k {
	case KindMismatch:
		return "ArtifactMismatch"
	case KindUnreachable:
		return "ArtifactUnreachable"
	case KindTooLarge:
		return "ArtifactTooLarge"
	case KindRefused:
		return "ArtifactRefused"
	}
	return "ArtifactFailed"
}

// Exit statuses of `herd artifact fetch` (besides 0).
const (
	ExitFailed      = 1
	ExitUsage       = 2
	ExitRefused     = boardfs.RefusedExit
	ExitMismatch    = 4
	ExitUnreachable = 5
	ExitTooLarge    = 6
)

// Retry timing.
const (
	// BackoffBase is the wait after a first failure; it doubles with each
	// further failure in a row, up to BackoffMax.
	BackoffBase = 10 * time.Second
	BackoffMax  = 5 * time.Minute
	// MaxWait is the longest one fetch run sleeps waiting for its backoff
	// before it gives up with the recorded failure.
	MaxWait = 30 * time.Second
	// MaxRedirects is how many redirects a download follows.
	MaxRedirects = 5
)

// maxMessage bounds a failure message.
const maxMessage = 400

// Error is a failed fetch.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Msg }

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine makes s one printable line of at most maxMessage bytes.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	s = strings.ToValidUTF8(string(b), "?")
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}

// Backoff is how long to wait after the n-th failure in a row (n ≥ 1).
func Backoff(n int) time.Duration {
	return backoff.Double(n, BackoffBase, BackoffMax)
}

// Config is where a fetch reads and writes and how it reaches the network.
type Config struct {
	CacheDir  string
	StatusDir string
	// MaxSize bounds a download, in bytes.
	MaxSize int64
	// Timeout bounds one whole download; DialTimeout, TLSTimeout and
	// HeaderTimeout its first steps.
	Timeout, DialTimeout, TLSTimeout, HeaderTimeout time.Duration
	// MaxWait bounds how long a run sleeps for its backoff.
	MaxWait time.Duration
	// RootCAs verifies https servers; nil means the board's system CAs.
	RootCAs *x509.CertPool
	// Clock tells the time and times the backoff's sleep.
	Clock clock.Clock
}

// DefaultConfig is the board's configuration.
func DefaultConfig() Config {
	return Config{
		CacheDir:      CacheDir,
		StatusDir:     StatusDir,
		MaxSize:       api.MaxArtifactSize,
		Timeout:       FetchTimeout,
		DialTimeout:   10 * time.Second,
		TLSTimeout:    10 * time.Second,
		HeaderTimeout: 30 * time.Second,
		MaxWait:       MaxWait,
		Clock:         clock.RealClock(),
	}
}

// FetchTimeout bounds one artifact's download.
const FetchTimeout = 5 * time.Minute

// Fetch places every artifact of unit on this board (see the package
// documentation). A failure is an *Error, also recorded in StatusDir.
func (c Config) Fetch(ctx context.Context, unit string, arts []api.Artifact) error {
	if _, ok := api.PodFromUnitName(unit); !ok {
		return errorf(KindFailed, "%q is not a herd unit name", unit)
	}
	key := listKey(arts)
	statusPath := path.Join(c.StatusDir, unit)
	prev, _ := readStatus(statusPath)
	if prev.Key != key {
		prev = status{}
	}
	waited := false
	for _, a := range arts {
		if err := c.install(a); err == nil {
			continue
		} else if !errors.Is(err, errNotCached) {
			return c.fail(statusPath, key, prev, toError(err, a))
		}
		// The network is needed: respect the backoff of earlier failures.
		if prev.Count > 0 && !waited {
			waited = true
			due := prev.At.Add(Backoff(prev.Count))
			if wait := due.Sub(c.Clock.Now()); wait > 0 {
				if !clock.Sleep(ctx, c.Clock, min(wait, c.MaxWait)) {
					return &Error{Kind: prev.Kind, Msg: prev.Msg}
				}
				if c.Clock.Now().Before(due) {
					// Not yet: the same failure, no new request.
					return &Error{Kind: prev.Kind, Msg: prev.Msg}
				}
			}
		}
		if err := c.download(ctx, a); err != nil {
			if ctx.Err() != nil {
				// Stopped (systemctl stop): not the server's failure.
				return toError(err, a)
			}
			return c.fail(statusPath, key, prev, toError(err, a))
		}
		if err := c.install(a); err != nil {
			return c.fail(statusPath, key, prev, toError(err, a))
		}
	}
	if err := os.Remove(statusPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errorf(KindFailed, "remove %s: %v", statusPath, err)
	}
	return nil
}

// toError turns an install or download error into an *Error.
func toError(err error, a api.Artifact) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, boardfs.ErrRefused):
		return errorf(KindRefused, "%s: %v", a.Path, err)
	default:
		return errorf(KindFailed, "%s: %v", a.Path, err)
	}
}

// fail records e in the unit's status file and returns it.
func (c Config) fail(statusPath, key string, prev status, e *Error) error {
	st := status{Kind: e.Kind, Msg: e.Msg, Count: prev.Count + 1, At: c.Clock.Now(), Key: key}
	if err := os.MkdirAll(c.StatusDir, 0o700); err == nil {
		atomicfile.WriteFile(statusPath, st.marshal(), 0o600)
	}
	return e
}

// errNotCached: the cache has no entry for the artifact.
var errNotCached = errors.New("artifact: not cached")

// install copies the cache entry of a to its path, checking its hash as it
// goes; a damaged entry is removed and reported as errNotCached.
func (c Config) install(a api.Artifact) error {
	cp := path.Join(c.CacheDir, a.SHA256)
	fd, err := unix.Open(cp, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return errNotCached
	}
	if err != nil {
		return fmt.Errorf("open cache entry %s: %w", cp, err)
	}
	f := os.NewFile(uintptr(fd), cp)
	defer f.Close()
	mode, err := a.Perm()
	if err != nil {
		return errorf(KindFailed, "%v", err)
	}
	vr := newVerifier(f, a.SHA256)
	err = boardfs.PutFile(a.Path, vr, boardfs.PutOptions{Mode: api.OctalMode(mode), AllowSetID: a.AllowSetID, MaxSize: c.MaxSize})
	if errors.Is(err, errMismatch) {
		os.Remove(cp)
		return errNotCached
	}
	return err
}

// errMismatch is returned by a verifier at the end of bytes of the wrong
// hash, in place of io.EOF, so a copy through boardfs.PutFile fails and
// renames nothing.
var errMismatch = errors.New("artifact: sha256 mismatch")

// verifier hashes what is read through it and, at the end, returns io.EOF
// only if the bytes have the wanted SHA-256.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	want string
	got  string
	n    int64
}

func newVerifier(r io.Reader, want string) *verifier {
	return &verifier{r: r, h: sha256.New(), want: want}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		v.got = hex.EncodeToString(v.h.Sum(nil))
		if v.got != v.want {
			return n, errMismatch
		}
	}
	return n, err
}

// download fetches a's URL into the cache, verified.
func (c Config) download(ctx context.Context, a api.Artifact) error {
	if msg := api.ArtifactURLProblem(a.URL); msg != "" {
		return errorf(KindFailed, "url %s", msg)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return errorf(KindFailed, "%s: %v", a.URL, err)
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return errorf(KindUnreachable, "%s", netMessage(a.URL, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorf(KindUnreachable, "%s: HTTP status %d", a.URL, resp.StatusCode)
	}
	if resp.ContentLength > c.MaxSize {
		return errorf(KindTooLarge, "%s: %d bytes, at most %d", a.URL, resp.ContentLength, c.MaxSize)
	}
	vr := newVerifier(resp.Body, a.SHA256)
	err = boardfs.PutFile(path.Join(c.CacheDir, a.SHA256), vr, boardfs.PutOptions{Mode: 0o600, ParentMode: 0o700, MaxSize: c.MaxSize})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errMismatch):
		return errorf(KindMismatch, "%s: sha256 of the %d bytes downloaded is %s, want %s", a.URL, vr.n, vr.got, a.SHA256)
	case vr.n > c.MaxSize:
		return errorf(KindTooLarge, "%s: over %d bytes", a.URL, c.MaxSize)
	case ctx.Err() != nil || isNetErr(err):
		return errorf(KindUnreachable, "%s", netMessage(a.URL, err))
	default:
		return err
	}
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// netMessage describes a network error without repeating Go's
// "Get "URL": " prefix twice.
func netMessage(u string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return u + ": no answer in time"
	}
	return u + ": " + err.Error()
}

// client is an HTTP client with c's timeouts that follows at most
// MaxRedirects redirects to valid artifact URLs, never from https to http.
// It uses no proxy from the environment and no cookies.
func (c Config) client() *http.Client {
	d := &net.Dialer{Timeout: c.DialTimeout}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   c.TLSTimeout,
		ResponseHeaderTimeout: c.HeaderTimeout,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.RootCAs},
		MaxIdleConns:          1,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("more than %d redirects", MaxRedirects)
			}
			if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refused redirect from https to %s", req.URL.Scheme)
			}
			if msg := api.ArtifactURLProblem(req.URL.String()); msg != "" {
				return fmt.Errorf("refused redirect to a URL that %s", msg)
			}
			return nil
		},
	}
}

// listKey is a digest of the artifact list, so a changed list does not
// inherit an old backoff.
func listKey(arts []api.Artifact) string {
	h := sha256.New()
	for _, a := range arts {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%t\x00", a.URL, a.SHA256, a.Path, a.Mode, a.AllowSetID)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// status is the record of a unit's last failure.
type status struct {
	Kind  Kind
	Msg   string
	Count int
	At    time.Time
	Key   string
}

func (s status) marshal() []byte {
	return fmt.Appendf(nil, "%s %s\n%d %d %s\n", s.Kind, oneLine(s.Msg), s.Count, s.At.Unix(), s.Key)
}

// maxStatus bounds what readStatus reads.
const maxStatus = 4 << 10

func readStatus(p string) (status, error) {
	f, err := os.Open(p)
	if err != nil {
		return status{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatus))
	if err != nil {
		return status{}, err
	}
	first, rest, _ := bytes.Cut(b, []byte("\n"))
	kind, msg, ok := ParseStatus(string(first))
	if !ok {
		return status{}, errors.New("artifact: bad status file")
	}
	f2 := strings.Fields(string(rest))
	if len(f2) != 3 {
		return status{}, errors.New("artifact: bad status file")
	}
	n, err1 := strconv.Atoi(f2[0])
	at, err2 := strconv.ParseInt(f2[1], 10, 64)
	if err1 != nil || err2 != nil || n < 1 {
		return status{}, errors.New("artifact: bad status file")
	}
	return status{Kind: kind, Msg: msg, Count: n, At: time.Unix(at, 0), Key: f2[2]}, nil
}

// ParseStatus reads the first line of a status file, "KIND MESSAGE", as
// the leader's unit listing carries it. ok is false for anything else.
func ParseStatus(line string) (kind Kind, msg string, ok bool) {
	k, msg, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch Kind(k) {
	case KindMismatch, KindUnreachable, KindTooLarge, KindRefused, KindFailed:
		return Kind(k), oneLine(msg), true
	}
	return "", "", false
}
