package placer

import (
	"fmt"
	"testing"
)

// BenchmarkPassSteady measures one pass over a converged board running 50
// pods (listing, plan, status; nothing to do), with the in-memory board.
func BenchmarkPassSteady(b *testing.B) {
	h := newHarness(b)
	h.p.log = discardLogger()
	h.st.putNode(readyNode("n1", "127.0.0.1"))
	for i := range 50 {
		h.st.putPod(webPod(fmt.Sprintf("web-%d", i), "n1"))
	}
	w := h.p.newWorker("n1")
	w.log = h.p.log
	if res := w.pass(b.Context()); res.err != nil {
		b.Fatal(res.err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := w.pass(b.Context()); res.err != nil || res.acted != 0 {
			b.Fatalf("pass = %+v", res)
		}
	}
}
