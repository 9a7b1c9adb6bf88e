package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
)

func testEvent(rv uint64, at time.Duration, kind api.Kind, name, reason, node, msg string) *api.Event {
	s := api.EventSpec{Time: testNow.Add(at), Object: api.OwnerRef{Kind: kind, Name: name}, Reason: reason, Type: api.EventNormal, Node: node, Message: msg}
	if reason == api.ReasonLost || reason == api.ReasonNodeDead {
		s.Type = api.EventWarning
	}
	return &api.Event{Kind: api.KindEvent, Metadata: api.ObjectMeta{Name: api.EventName(rv, 0), Labels: api.EventLabels(s)}, Spec: s}
}

func clockAt(d time.Duration) string { return testNow.Add(d).Local().Format("15:04:05.000") }

// TestEventsTimeline: herdctl events prints the timeline oldest first,
// --for and --node pick events, -w prints events as they are recorded.
func TestEventsTimeline(t *testing.T) {
	h := newHarness(t)
	h.put(testEvent(12, 2*time.Second, api.KindPod, "web-x", api.ReasonLost, "b2", "lost with b2"))
	h.put(testEvent(10, 0, api.KindNode, "b2", api.ReasonNodeDead, "b2", "b2 is NotReady: gossip declared the board dead"))
	h.put(testEvent(14, 2500*time.Millisecond, api.KindPod, "web-y", api.ReasonBound, "b4", "bound to b4"))

	out, _ := h.mustRun(0, "events")
	want := "TIME           TYPE      REASON   OBJECT     NODE   MESSAGE\n" +
		clockAt(0) + "   Warning   Dead     node/b2    b2     b2 is NotReady: gossip declared the board dead\n" +
		clockAt(2*time.Second) + "   Warning   Lost     pod/web-x  b2     lost with b2\n" +
		clockAt(2500*time.Millisecond) + "   Normal    Bound    pod/web-y  b4     bound to b4\n"
	if out != tableSpaced(want) {
		t.Errorf("events:\n%s\nwant:\n%s", out, tableSpaced(want))
	}
	if out, _ := h.mustRun(0, "events", "--for", "po/web-y"); !strings.Contains(out, "bound to b4") || strings.Contains(out, "web-x") {
		t.Errorf("events --for po/web-y:\n%s", out)
	}
	if out, _ := h.mustRun(0, "events", "--node", "b2", "--limit", "1"); !strings.Contains(out, "lost with b2") || strings.Contains(out, "NotReady") {
		t.Errorf("events --node b2 --limit 1:\n%s", out)
	}
	for _, bad := range [][]string{{"--for", "web-x"}, {"--for", "pod/Web"}, {"--for", "cat/x"}, {"--node", "B 2"}, {"-o", "yaml"}, {"--limit", "-1"}} {
		if code, _, stderr := h.run(append([]string{"events"}, bad...)...); code != exitUsage || stderr == "" {
			t.Errorf("events %v: exit %d, stderr %q; want a usage error", bad, code, stderr)
		}
	}

	h.setOnWatch(func(int) {
		h.put(testEvent(16, 3*time.Second, api.KindPod, "web-y", api.ReasonReady, "b4", "ready on b4"))
	})
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- h.runTo(&stdout, &stderr, "events", "-w", "--for", "pod/web-y") }()
	testutil.Until(t, 10*time.Second, "the recorded event", func() bool { return strings.Contains(stdout.String(), "ready on b4") })
	h.cancel()
	if code := <-done; code != 0 {
		t.Fatalf("events -w: exit %d: %s", code, stderr.String())
	}
	if got := strings.Count(stdout.String(), "\n"); got != 3 {
		t.Errorf("events -w printed %d lines, want header + 2:\n%s", got, stdout.String())
	}
}

// tableSpaced re-renders want's columns as the table writer pads them.
func tableSpaced(want string) string {
	lines := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	t := &table{}
	for i, l := range lines {
		f := strings.Fields(l)
		row := append(f[:5:5], strings.Join(f[5:], " "))
		if i == 0 {
			t.Header = row
		} else {
			t.Rows = append(t.Rows, row)
		}
	}
	return t.String()
}
