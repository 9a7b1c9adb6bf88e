package metrics_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herd-dev/herd/agent/metrics"
	"github.com/herd-dev/herd/agent/svcproxy"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/raftstore"
)

var update = flag.Bool("update", false, "rewrite testdata/herd.golden")

type fakeRaft raftstore.Stats

func (f fakeRaft) Stats() raftstore.Stats { return raftstore.Stats(f) }

type fakeGossip struct {
	members []gossip.Member
	stats   gossip.Stats
}

func (f fakeGossip) Members() []gossip.Member { return f.members }
func (f fakeGossip) Stats() gossip.Stats      { return f.stats }

type fakeProxy []svcproxy.Stat

func (f fakeProxy) Stats() []svcproxy.Stat { return f }

type failingState struct{}

func (failingState) List(api.Kind) ([]api.RawObject, uint64, error) {
	return nil, 0, errors.New("store closed")
}

// fullRegistry is a Registry with every family fed by fixed sources and
// a few observations.
func fullRegistry(t *testing.T) *metrics.Registry {
	t.Helper()
	st := raftstore.NewMemStore(clock.NowFunc(time.Now))
	objs := []api.Object{
		&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-1"}, Spec: api.PodSpec{Node: "b1", Template: api.PodTemplate{Exec: []string{"/bin/web"}}}, Status: api.PodStatus{Phase: api.PodRunning}},
		&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: "web-2"}, Spec: api.PodSpec{Node: "b2", Template: api.PodTemplate{Exec: []string{"/bin/web"}}}, Status: api.PodStatus{Phase: api.PodLost}},
		&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b1"}, Status: api.NodeStatus{Phase: api.NodeReady, Conditions: []api.Condition{{Type: api.ConditionReady, Status: api.ConditionTrue}}}},
		&api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: "b2"}, Spec: api.NodeSpec{Unschedulable: true}, Status: api.NodeStatus{Phase: api.NodeNotReady}},
	}
	for _, o := range objs {
		raw, err := api.ToRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	r := metrics.New("v1.2.3")
	r.AddRaft(fakeRaft{State: "Leader", Term: 3, CommitIndex: 40, AppliedIndex: 39, LastLogIndex: 41, LastSnapshotIndex: 16, Objects: 4})
	r.AddGossip(fakeGossip{
		members: []gossip.Member{{Name: "b1", State: api.MemberAlive}, {Name: "b2", State: api.MemberDead}, {Name: "b3", State: api.MemberAlive}},
		stats:   gossip.Stats{ProbeAcks: 12, ProbeRTT: 36 * time.Millisecond, Joins: 3, Leaves: 1, Failures: 2, HealthScore: 1},
	})
	r.AddState(st)
	r.AddProxy(fakeProxy{
		{Key: svcproxy.Key{Service: "web", Port: "http", Protocol: "tcp"}, Target: "10.0.0.12:8080", Conns: 5, Active: 1, BytesIn: 1200, BytesOut: 56000},
		{Key: svcproxy.Key{Service: "web", Port: "http", Protocol: "tcp"}, Target: "", Failures: 2},
	})
	r.QueueStarted(func() (int, int) { return 2, 1 })
	r.Reconciled("deployment", 3*time.Millisecond, nil, false)
	r.Reconciled("node", 40*time.Millisecond, errors.New("refused"), true)
	r.Placed("web-1", 1500*time.Millisecond)
	r.BoardCall("b1", "show_units", 2*time.Millisecond, nil)
	r.BoardCall("b2", "put_file", 20*time.Second, errors.New("unreachable"))
	r.ObserveTxn(false, 4*time.Millisecond)
	r.ObserveTxn(true, 9*time.Millisecond)
	r.UnitReport("kept")
	r.UnitReport("refused")
	return r
}

// scrape GETs the Handler's text and keeps the herd_* families; the Go
// version and architecture become placeholders.
func scrape(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	w := httptest.NewRecorder()
	r.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	var out []string
	for line := range strings.SplitSeq(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "herd_") || strings.HasPrefix(line, "# HELP herd_") || strings.HasPrefix(line, "# TYPE herd_") {
			out = append(out, line)
		}
	}
	s := strings.Join(out, "\n") + "\n"
	s = strings.ReplaceAll(s, `goversion="`+runtime.Version()+`"`, `goversion="GOVERSION"`)
	return strings.ReplaceAll(s, `arch="`+runtime.GOARCH+`"`, `arch="ARCH"`)
}

// TestExposition: every herd_* family, its HELP, TYPE, label names and
// series, as testdata/herd.golden holds them. The golden file was written
// by the client_golang registry this package used before
// internal/promtext: the port changed no name, label, help or type
// (herd_raft_leader_silences_total came after, with raftstore's watch).
func TestExposition(t *testing.T) {
	r := fullRegistry(t)
	if err := r.Write(io.Discard); err != nil {
		t.Errorf("Write: %v", err)
	}
	got := scrape(t, r)
	path := filepath.Join("testdata", "herd.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("herd_* exposition (-want +got):\n%s", diff)
	}
}

// TestStateReadError: a store that cannot be read gives
// herd_state_read_errors 1 and no herd_pods or herd_nodes.
func TestStateReadError(t *testing.T) {
	r := metrics.New("dev")
	r.AddState(failingState{})
	got := scrape(t, r)
	if !strings.Contains(got, "\nherd_state_read_errors 1\n") || regexp.MustCompile(`(?m)^herd_(pods|nodes)\{`).MatchString(got) {
		t.Errorf("exposition with an unreadable store:\n%s", got)
	}
}

// TestRuntimeFamilies: the go_* and process_* families docs/metrics.md
// lists are served.
func TestRuntimeFamilies(t *testing.T) {
	w := httptest.NewRecorder()
	metrics.New("dev").Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	families := []string{"go_goroutines", "go_threads", "go_info", "go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes"}
	if runtime.GOOS == "linux" {
		families = append(families, "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
			"process_open_fds", "process_max_fds", "process_start_time_seconds")
	}
	for _, f := range families {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^# TYPE %s (gauge|counter)$`, f)).MatchString(w.Body.String()) {
			t.Errorf("no family %s", f)
		}
	}
}
