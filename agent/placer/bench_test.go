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

// fleetHarness is a placer over boards Ready nodes with perBoard pods
// bound to each (Scheduled, not yet placed) and one worker per node, with
// logging off.
func fleetHarness(b *testing.B, boards, perBoard int) (*harness, []*worker) {
	b.Helper()
	h := newHarness(b)
	h.p.log = discardLogger()
	var ws []*worker
	for i := range boards {
		node := fmt.Sprintf("board-%03d", i)
		h.st.putNode(readyNode(node, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)))
		for j := range perBoard {
			h.st.putPod(webPod(fmt.Sprintf("web-%03d-%02d", i, j), node))
		}
		w := h.p.newWorker(node)
		w.log = h.p.log
		ws = append(ws, w)
	}
	return h, ws
}

// round runs one pass over every board, one board after the other, and
// returns how many acted.
func round(b *testing.B, ws []*worker) int {
	b.Helper()
	acted := 0
	for _, w := range ws {
		res := w.pass(b.Context())
		if res.err != nil {
			b.Fatalf("pass over %s: %v", w.node, res.err)
		}
		if res.acted > 0 {
			acted++
		}
	}
	return acted
}

// BenchmarkObserveRoundBoards is one observation round of a converged
// fleet: a pass over each of N boards running 4 pods each (2,000 pods at
// 500 boards) with nothing to do, which the leader repeats every
// ObserveInterval (5 s). The fake boards answer from memory, so this is the
// leader's own CPU per round, SSH excluded.
func BenchmarkObserveRoundBoards(b *testing.B) {
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("boards=%d", n), func(b *testing.B) {
			h, ws := fleetHarness(b, n, 4)
			for range 10 { // place, then observe until status settles
				before := h.st.applyCount()
				if round(b, ws) == 0 && h.st.applyCount() == before {
					break
				}
			}
			before := h.st.applyCount()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if acted := round(b, ws); acted != 0 {
					b.Fatalf("%d boards acted in a converged round", acted)
				}
			}
			b.StopTimer()
			if got := h.st.applyCount(); got != before {
				b.Fatalf("%d status writes in converged rounds", got-before)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/board")
		})
	}
}

// BenchmarkPlaceBoards is the first round over N boards with 4 freshly
// bound pods each: every pass writes the units, starts them and reports
// the pods' status, and every status write is a new state version, so the
// next pass reads (and indexes) a new snapshot of the whole cluster. The
// fake state decodes only the objects that changed, as the agent's
// clusterState.Snapshot does; what still grows with the fleet per pass is
// listing every object and the placer's index of the snapshot.
func BenchmarkPlaceBoards(b *testing.B) {
	for _, n := range []int{100, 250, 500} {
		b.Run(fmt.Sprintf("boards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				_, ws := fleetHarness(b, n, 4)
				b.StartTimer()
				if acted := round(b, ws); acted != n {
					b.Fatalf("%d of %d boards placed", acted, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/board")
		})
	}
}
