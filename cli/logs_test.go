package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

// twoLines is a journal reader standing in for the board's.
func twoLines(_ context.Context, pod *api.Pod, _ httpapi.LogOptions, w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s: one\n%s: two\n", pod.Metadata.Name, pod.Metadata.Name)
	return err
}

// putPlacedPod stores pod name, running on pi1.
func putPlacedPod(h *harness, name string) {
	h.put(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: name},
		Spec:   api.PodSpec{Owner: api.OwnerRef{Kind: api.KindDeployment, Name: "web"}, Node: "pi1"},
		Status: api.PodStatus{Phase: api.PodRunning, Unit: "herd-" + name + ".service"}})
}

func TestLogsCommand(t *testing.T) {
	local := time.Date(2025, 6, 1, 10, 0, 0, 0, time.Local).Format(time.RFC3339)
	tests := []struct {
		name string
		args []string
		call string // what the client was asked
	}{
		{"plain", []string{"logs", "web-1"}, `logs web-1 follow=false since="" tail=0`},
		{"pod/NAME", []string{"logs", "pod/web-1"}, `logs web-1 follow=false since="" tail=0`},
		{"since and tail", []string{"logs", "po/web-1", "--since", "10m", "--tail", "20"}, `logs web-1 follow=false since="10m" tail=20`},
		{"since RFC 3339", []string{"logs", "web-1", "--since=2025-06-01T12:00:00+02:00"}, `logs web-1 follow=false since="2025-06-01T12:00:00+02:00" tail=0`},
		{"since local time", []string{"logs", "web-1", "--since", "2025-06-01 10:00:00"}, fmt.Sprintf(`logs web-1 follow=false since=%q tail=0`, local)},
		{"tail 0 is no past lines", []string{"logs", "web-1", "--tail", "0"}, `logs web-1 follow=false since="0s" tail=0`},
		{"tail -1 is all", []string{"logs", "web-1", "--tail=-1"}, `logs web-1 follow=false since="" tail=0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withLogs(twoLines))
			putPlacedPod(h, "web-1")
			out, errOut := h.mustRun(0, tt.args...)
			if out != "web-1: one\nweb-1: two\n" || errOut != "" {
				t.Errorf("stdout %q stderr %q", out, errOut)
			}
			if calls := h.Calls(); len(calls) != 1 || calls[0] != tt.call {
				t.Errorf("calls %q, want [%q]", calls, tt.call)
			}
		})
	}
}

func TestLogsCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no pod", []string{"logs"}, 2, "herdctl logs: missing arguments: want POD"},
		{"two pods", []string{"logs", "a", "b"}, 2, "too many arguments"},
		{"not a pod", []string{"logs", "deploy/web"}, 2, `logs: "deploy/web": only pods and jobs have logs`},
		{"bad since", []string{"logs", "web-1", "--since", "yesterday"}, 2, `error: --since "yesterday": want a duration such as 10m or 1h30m`},
		{"negative since", []string{"logs", "web-1", "--since", "-1h"}, 2, "must not be negative"},
		{"tail too large", []string{"logs", "web-1", "--tail", "100001"}, 2, "--tail 100001: at most 100000 lines"},
		{"agent without logs", []string{"logs", "web-1"}, 1, "error: pod logs are not available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t) // without a log reader
			putPlacedPod(h, "web-1")
			_, errOut := h.mustRun(tt.code, tt.args...)
			if !strings.Contains(errOut, tt.err) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.err)
			}
		})
	}
}

// followUntilCancelled writes one line, then waits for ctx like a
// journalctl -f that has nothing new.
func followUntilCancelled(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
	if !opts.Follow {
		return errors.New("not following")
	}
	fmt.Fprintf(w, "%s: started\n", pod.Metadata.Name)
	<-ctx.Done()
	return ctx.Err()
}

func TestLogsFollowInterrupt(t *testing.T) {
	h := newHarness(t, withLogs(followUntilCancelled))
	putPlacedPod(h, "web-1")
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- h.runTo(&stdout, &stderr, "logs", "web-1", "-f") }()
	testutil.Until(t, 10*time.Second, "the first line", func() bool { return stdout.String() != "" })
	h.cancel() // Ctrl-C
	if code := <-done; code != 0 || stdout.String() != "web-1: started\n" || stderr.String() != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and the line only", code, stdout.String(), stderr.String())
	}

	// --timeout ends a follow normally too. It must leave the line time
	// to arrive: one API round trip took 50 ms under qemu (make test-arm).
	h2 := newHarness(t, withLogs(followUntilCancelled))
	putPlacedPod(h2, "web-1")
	out, _ := h2.mustRun(0, "logs", "web-1", "--follow", "--timeout", "1s")
	if out != "web-1: started\n" {
		t.Errorf("stdout %q", out)
	}
}

// TestLogsEndToEnd runs herdctl logs through the real client against the
// agent's real API with a journal reader standing in for the board's; the
// API finds the pod's unit and board and normalizes the options.
func TestLogsEndToEnd(t *testing.T) {
	h := newHarness(t, withLogs(func(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
		fmt.Fprintf(w, "%s on %s since %q tail %d\n", pod.Status.Unit, pod.Spec.Node, opts.Since, opts.Tail)
		if !opts.Follow {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	h.loadFixtures()
	out, _ := h.mustRun(0, "logs", "web-7x2kq", "--since", "90s", "--tail", "5")
	if out != "herd-web-7x2kq.service on pi1 since \"-90s\" tail 5\n" {
		t.Errorf("stdout %q", out)
	}

	_, errOut := h.mustRun(1, "logs", "web-zz81p")
	if want := "error: pod web-zz81p is Pending: not placed on a board yet (no node fits: 2 nodes lack 64Mi free memory)\n"; errOut != want {
		t.Errorf("pending pod: stderr %q, want %q", errOut, want)
	}
	_, errOut = h.mustRun(1, "logs", "nope")
	if !strings.Contains(errOut, "nope") || !strings.Contains(errOut, "not found") {
		t.Errorf("missing pod: stderr %q", errOut)
	}

	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- h.runTo(&stdout, &stderr, "logs", "pod/web-b9d4m", "-f") }()
	testutil.Until(t, 10*time.Second, "the streamed line", func() bool { return stdout.String() != "" })
	h.cancel() // Ctrl-C
	if code := <-done; code != 0 || stdout.String() != "herd-web-b9d4m.service on pi2 since \"\" tail 0\n" || stderr.String() != "" {
		t.Errorf("follow: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestLogsJob: logs job/NAME reads the job's current pod, or the pod of
// its newest run once the job is done.
func TestLogsJob(t *testing.T) {
	h := newHarness(t, withLogs(twoLines))
	putPlacedPod(h, "web-1")
	h.put(&api.Job{Kind: api.KindJob, Metadata: api.ObjectMeta{Name: "backup"},
		Spec:   api.JobSpec{Template: api.PodTemplate{Exec: []string{"/bin/true"}}},
		Status: api.JobStatus{Phase: api.JobSucceeded, Runs: []api.JobRun{{Pod: "web-1", Node: "pi1", Result: "success"}}}})
	h.put(&api.Job{Kind: api.KindJob, Metadata: api.ObjectMeta{Name: "new"},
		Spec: api.JobSpec{Template: api.PodTemplate{Exec: []string{"/bin/true"}}}})
	out, _ := h.mustRun(0, "logs", "job/backup")
	if out != "web-1: one\nweb-1: two\n" {
		t.Errorf("stdout %q", out)
	}
	if _, errOut := h.mustRun(1, "logs", "job/new"); !strings.Contains(errOut, "job new has no pod and no run yet") {
		t.Errorf("stderr %q", errOut)
	}
}
