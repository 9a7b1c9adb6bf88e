package metrics_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/herd-dev/herd/agent/metrics"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/clock"
	"github.com/herd-dev/herd/raftstore"
)

// BenchmarkScrape is one scrape of a registry over a store of 100 pods
// and 10 nodes; it reports the response's bytes.
func BenchmarkScrape(b *testing.B) {
	st := raftstore.NewMemStore(clock.NowFunc(time.Now))
	for i := range 100 {
		raw, _ := api.ToRaw(&api.Pod{Kind: api.KindPod, Metadata: api.ObjectMeta{Name: fmt.Sprintf("web-%d", i)},
			Spec: api.PodSpec{Node: "b1", Template: api.PodTemplate{Exec: []string{"/bin/web"}}}, Status: api.PodStatus{Phase: api.PodRunning}})
		if _, err := st.Txn(context.Background(), []raftstore.Op{{Type: raftstore.OpCreate, Object: raw}}); err != nil {
			b.Fatal(err)
		}
	}
	r := metrics.New("bench")
	r.AddState(st)
	for i := range 10 {
		r.BoardCall(fmt.Sprintf("b%d", i), "show_units", time.Millisecond, nil)
	}
	h := r.Handler()
	var n int
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/scrape")
}
