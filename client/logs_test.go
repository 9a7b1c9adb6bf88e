package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/raftstore"
)

func TestParseSince(t *testing.T) {
	berlin := time.FixedZone("CEST", 2*3600)
	tests := []struct {
		in     string
		ago    time.Duration
		at     time.Time
		isTime bool
		err    string
	}{
		{in: "10m", ago: 10 * time.Minute},
		{in: "1h30m", ago: 90 * time.Minute},
		{in: "0s", ago: 0},
		{in: " 5s ", ago: 5 * time.Second},
		{in: "2025-06-01T10:00:00Z", at: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC), isTime: true},
		{in: "2025-06-01T12:00:00+02:00", at: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC), isTime: true},
		{in: "2025-06-01 12:00:00", at: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC), isTime: true},
		{in: "", err: "since is empty"},
		{in: "-5m", err: "must not be negative"},
		{in: "yesterday", err: `since "yesterday": want a duration such as 10m`},
		{in: "2025-06-01", err: "want a duration"},
		{in: "10", err: "want a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			ago, at, isTime, err := api.ParseSince(tc.in, berlin)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || ago != tc.ago || isTime != tc.isTime || !at.Equal(tc.at) {
				t.Errorf("= %v, %v, %v, %v; want %v, %v, %v", ago, at, isTime, err, tc.ago, tc.at, tc.isTime)
			}
		})
	}
}

// logsAgent serves a raftstore.MemStore holding the placed pod web-1, with a Logs
// that writes two lines, or runs run when set.
func logsAgent(t *testing.T, run func(ctx context.Context, opts httpapi.LogOptions, w io.Writer) error) *httptest.Server {
	t.Helper()
	st := raftstore.NewMemStore(nil)
	raw, _ := api.ToRaw(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-1"}, Spec: api.PodSpec{Node: "pi1"}})
	if _, err := st.Txn(ctxT(t), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.DefaultConfig()
	cfg.Store = st
	cfg.Token = testToken
	cfg.Logs = func(ctx context.Context, _ *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
		if run != nil {
			return run(ctx, opts, w)
		}
		_, err := io.WriteString(w, "a\nb\n")
		return err
	}
	s, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func TestLogs(t *testing.T) {
	var got httpapi.LogOptions
	srv := logsAgent(t, func(_ context.Context, opts httpapi.LogOptions, w io.Writer) error {
		got = opts
		_, err := io.WriteString(w, "a\nb\n")
		return err
	})
	c, _ := client.New([]string{"http://" + testutil.FreeAddr(t), srv.URL}, client.Options{Token: testToken})
	var out bytes.Buffer
	if err := c.Logs(ctxT(t), "web-1", client.LogOptions{Since: "2m", Tail: 7}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "a\nb\n" {
		t.Errorf("output %q", out.String())
	}
	if d := cmp.Diff(httpapi.LogOptions{Since: "-120s", Tail: 7}, got); d != "" {
		t.Errorf("options (-want +got):\n%s", d)
	}
	if err := c.Logs(ctxT(t), "nope", client.LogOptions{}, &out); !api.IsCode(err, "not_found") {
		t.Errorf("missing pod: %v", err)
	}
	for _, bad := range []client.LogOptions{{Tail: -1}, {Tail: api.MaxLogTail + 1}} {
		if err := c.Logs(ctxT(t), "web-1", bad, &out); err == nil || !strings.Contains(err.Error(), "tail") {
			t.Errorf("Logs(%+v) = %v, want a tail error", bad, err)
		}
	}
}

// TestLogsFollowNoTimeout: the request timeout bounds a plain logs request
// but not a follow, which runs until ctx ends.
func TestLogsFollowNoTimeout(t *testing.T) {
	srv := logsAgent(t, func(ctx context.Context, opts httpapi.LogOptions, w io.Writer) error {
		io.WriteString(w, "first\n")
		if !opts.Follow {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c, _ := client.New([]string{srv.URL}, client.Options{Token: testToken, Timeout: time.Nanosecond})
	if err := c.Logs(ctxT(t), "web-1", client.LogOptions{}, io.Discard); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("plain logs with a 1ns timeout = %v, want a deadline error", err)
	}
	var out bytes.Buffer
	if err := c.Logs(ctxT(t), "web-1", client.LogOptions{Follow: true}, &out); err != nil || out.String() != "first\n" {
		t.Errorf("follow with a 1ns request timeout = %v, %q; want no timeout", err, out.String())
	}

	// A follow ends with ctx's error when ctx ends.
	blocked := logsAgent(t, func(ctx context.Context, _ httpapi.LogOptions, w io.Writer) error {
		io.WriteString(w, "first\n")
		<-ctx.Done()
		return ctx.Err()
	})
	c, _ = client.New([]string{blocked.URL}, client.Options{Token: testToken})
	ctx, cancel := context.WithCancel(ctxT(t))
	w := &cancelOnWrite{cancel: cancel}
	if err := c.Logs(ctx, "web-1", client.LogOptions{Follow: true}, w); !errors.Is(err, context.Canceled) {
		t.Errorf("follow ended by ctx = %v, want context.Canceled", err)
	}
	if w.buf.String() != "first\n" {
		t.Errorf("output %q", w.buf.String())
	}
}

// cancelOnWrite cancels a context once it has been written to.
type cancelOnWrite struct {
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.buf.Write(p)
}

func TestLogsNotImplementedByServer(t *testing.T) {
	srv := agent(t, "pi1")
	c, _ := client.New([]string{srv.URL}, client.Options{Token: testToken})
	err := c.Logs(ctxT(t), "web-1", client.LogOptions{}, io.Discard)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotImplemented || ae.Code != api.CodeNotImplemented {
		t.Errorf("Logs without Config.Logs = %v, want 501 not_implemented", err)
	}
}
