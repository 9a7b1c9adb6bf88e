package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
	"github.com/herd-dev/herd/raftstore"
)

// fakeLogs is a Config.Logs that records its calls and runs a script.
type fakeLogs struct {
	mu    sync.Mutex
	calls []logCall
	// run writes the journal; nil writes two lines.
	run func(ctx context.Context, w io.Writer) error
}

type logCall struct {
	Pod, Node string
	Opts      httpapi.LogOptions
}

func (f *fakeLogs) logs(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, logCall{pod.Metadata.Name, pod.Spec.Node, opts})
	run := f.run
	f.mu.Unlock()
	if run == nil {
		_, err := io.WriteString(w, "line 1\nline 2\n")
		return err
	}
	return run(ctx, w)
}

func (f *fakeLogs) Calls() []logCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]logCall(nil), f.calls...)
}

// logsEnv is a server whose store holds a placed pod web-1 (on pi2) and a
// pending pod web-2.
func logsEnv(t *testing.T, f *fakeLogs) *env {
	t.Helper()
	e := newEnv(t, func(c *httpapi.Config) {
		if f != nil {
			c.Logs = f.logs
		}
	})
	put := func(p *api.Pod) {
		raw, err := api.ToRaw(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Txn(ctxT(t), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-1"},
		Spec:   api.PodSpec{Node: "pi2", Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
		Status: api.PodStatus{Phase: api.PodRunning, Unit: "herd-web-1.service"}})
	put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-2"},
		Spec:   api.PodSpec{Template: api.PodTemplate{Exec: []string{"/bin/web"}}},
		Status: api.PodStatus{Phase: api.PodPending}})
	return e
}

func TestLogsErrors(t *testing.T) {
	f := &fakeLogs{}
	e := logsEnv(t, f)
	tests := []struct {
		name   string
		path   string
		status int
		code   string
		msg    string // substring of the message
	}{
		{"no such pod", "/v1/pods/nope/logs", 404, "not_found", "nope"},
		{"pending", "/v1/pods/web-2/logs", 409, "not_placed", "pod web-2 is Pending: not placed on a board yet"},
		{"bad since", "/v1/pods/web-1/logs?since=yesterday", 400, "bad_request", `since "yesterday": want a duration such as 10m`},
		{"negative since", "/v1/pods/web-1/logs?since=-5m", 400, "bad_request", "must not be negative"},
		{"bad tail", "/v1/pods/web-1/logs?tail=ten", 400, "bad_request", `tail="ten": want a number of lines from 0 (all) to 100000`},
		{"tail too large", "/v1/pods/web-1/logs?tail=100001", 400, "bad_request", "tail="},
		{"negative tail", "/v1/pods/web-1/logs?tail=-1", 400, "bad_request", "tail="},
		{"bad follow", "/v1/pods/web-1/logs?follow=maybe", 400, "bad_request", `follow="maybe"`},
		{"logs of a deployment", "/v1/deployments/web/logs", 404, "not_found", "no route"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.raw(t, "GET", tc.path, "")
			ae := decodeErr(t, body)
			if code != tc.status || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("GET %s = %d %q %q, want %d %q containing %q", tc.path, code, ae.Code, ae.Message, tc.status, tc.code, tc.msg)
			}
		})
	}
	if code, _ := e.raw(t, "POST", "/v1/pods/web-1/logs", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST logs: %d, want 405", code)
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("Logs called %d times for bad requests", n)
	}
}

func TestLogsNotImplemented(t *testing.T) {
	e := logsEnv(t, nil)
	err := e.c.Logs(ctxT(t), "web-1", client.LogOptions{}, io.Discard)
	ae := apiErr(t, err, http.StatusNotImplemented, "not_implemented")
	if !strings.Contains(ae.Message, "pod logs are not available") {
		t.Errorf("message %q", ae.Message)
	}
}

func TestLogsOptions(t *testing.T) {
	f := &fakeLogs{}
	e := logsEnv(t, f)
	tests := []struct {
		name string
		opts client.LogOptions
		want httpapi.LogOptions
	}{
		{"defaults", client.LogOptions{}, httpapi.LogOptions{}},
		{"tail", client.LogOptions{Tail: 50}, httpapi.LogOptions{Tail: 50}},
		{"duration", client.LogOptions{Since: "10m"}, httpapi.LogOptions{Since: "-600s"}},
		{"duration rounds up", client.LogOptions{Since: "1500ms"}, httpapi.LogOptions{Since: "-2s"}},
		{"zero duration", client.LogOptions{Since: "0s", Follow: false}, httpapi.LogOptions{Since: "now"}},
		{"RFC 3339", client.LogOptions{Since: "2025-06-01T12:00:00+02:00"}, httpapi.LogOptions{Since: "2025-06-01 10:00:00 UTC"}},
		{"zone-less is UTC", client.LogOptions{Since: "2025-06-01 10:00:00", Tail: 3}, httpapi.LogOptions{Since: "2025-06-01 10:00:00 UTC", Tail: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := e.c.Logs(ctxT(t), "web-1", tc.opts, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != "line 1\nline 2\n" {
				t.Errorf("output %q", out.String())
			}
			calls := f.Calls()
			diff(t, "Logs call", logCall{"web-1", "pi2", tc.want}, calls[len(calls)-1])
		})
	}
}

func TestLogsHeadersAndEmpty(t *testing.T) {
	f := &fakeLogs{run: func(context.Context, io.Writer) error { return nil }}
	e := logsEnv(t, f)
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/pods/web-1/logs?tail=5", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("empty journal: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// TestLogsFollowStreams: each write reaches the client before the next is
// made (flushed per write, chunked), and the stream ends, with Logs' ctx,
// when the client goes away.
func TestLogsFollowStreams(t *testing.T) {
	next := make(chan struct{})
	ended := make(chan error, 1)
	f := &fakeLogs{run: func(ctx context.Context, w io.Writer) error {
		for i := 1; ; i++ {
			if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
				return err
			}
			select {
			case <-next:
			case <-ctx.Done():
				ended <- ctx.Err()
				return ctx.Err()
			}
		}
	}}
	e := logsEnv(t, f)
	ctx, cancel := context.WithCancel(ctxT(t))
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/pods/web-1/logs?follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", te)
	}
	rd := bufio.NewReader(resp.Body)
	for i := 1; i <= 3; i++ {
		line, err := rd.ReadString('\n')
		if err != nil || line != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
		next <- struct{}{}
	}
	if calls := f.Calls(); len(calls) != 1 || !calls[0].Opts.Follow {
		t.Errorf("calls %+v, want one with Follow", calls)
	}
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Logs ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Logs still running after the client went away")
	}
}

func TestLogsFailures(t *testing.T) {
	t.Run("before output", func(t *testing.T) {
		e := logsEnv(t, &fakeLogs{run: func(context.Context, io.Writer) error {
			return errors.New("ssh: connect to pi2: connection refused")
		}})
		err := e.c.Logs(ctxT(t), "web-1", client.LogOptions{}, io.Discard)
		ae := apiErr(t, err, http.StatusBadGateway, "logs_failed")
		if want := "logs of pod web-1 from board pi2: ssh: connect to pi2: connection refused"; ae.Message != want {
			t.Errorf("message %q, want %q", ae.Message, want)
		}
	})
	t.Run("mid-stream", func(t *testing.T) {
		e := logsEnv(t, &fakeLogs{run: func(_ context.Context, w io.Writer) error {
			io.WriteString(w, "started\n")
			return errors.New("journalctl exited with status 1:\nno journal")
		}})
		var out bytes.Buffer
		err := e.c.Logs(ctxT(t), "web-1", client.LogOptions{Follow: true}, &out)
		if out.String() != "started\n" {
			t.Errorf("output %q", out.String())
		}
		ae := apiErr(t, err, http.StatusBadGateway, "logs_failed")
		if want := "logs of pod web-1 from board pi2: journalctl exited with status 1: no journal"; ae.Message != want {
			t.Errorf("message %q, want %q", ae.Message, want)
		}
	})
}

func TestJournalctlArgs(t *testing.T) {
	tests := []struct {
		name string
		opts httpapi.LogOptions
		want []string
	}{
		{"all", httpapi.LogOptions{}, []string{"journalctl", "--unit=herd-web-1.service", "--output=short-iso", "--no-pager", "--quiet", "--lines=all"}},
		{"everything", httpapi.LogOptions{Follow: true, Since: "-600s", Tail: 20},
			[]string{"journalctl", "--unit=herd-web-1.service", "--output=short-iso", "--no-pager", "--quiet", "--since=-600s", "--lines=20", "--follow"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			diff(t, "argv", tc.want, tc.opts.JournalctlArgs("herd-web-1.service"))
		})
	}
}
