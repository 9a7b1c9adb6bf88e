package sshexec

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/herd-dev/herd/units/sshexec/sshdtest"
)

// unitFile is a ~600-byte unit, the size of a typical herd placement.
var unitFile = bytes.Repeat([]byte("# herd unit file line, padded to sixty bytes for the bench\n"), 10)

// benchPlacement measures one placement: write the unit file, then run a
// systemctl-like command. fresh drops the connection before each one, as
// an executor without pooling would.
func benchPlacement(b *testing.B, fresh bool) {
	srv := sshdtest.Start(b)
	e := newTestExecutor(b, srv, func(c *Config) { c.Logger = nil })
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "herd-bench.service")
	if _, err := e.Run(ctx, "b1", []string{"true"}); err != nil { // warm up
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if fresh {
			e.Forget("b1")
		}
		if err := e.PutFile(ctx, "b1", path, unitFile, 0o644); err != nil {
			b.Fatal(err)
		}
		res, err := e.Run(ctx, "b1", []string{"true"})
		if err != nil || res.ExitStatus != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(e.Stats().Dials)/float64(b.N), "dials/op")
}

func BenchmarkPlacementPooled(b *testing.B)         { benchPlacement(b, false) }
func BenchmarkPlacementFreshHandshake(b *testing.B) { benchPlacement(b, true) }
