package sshexec

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// onlyRead hides every method of r but Read, as an SSH channel's stderr
// stream has none that io.Copy would use.
func onlyRead(r io.Reader) io.Reader { return struct{ io.Reader }{r} }

func TestLimitedBufferCopy(t *testing.T) {
	in := strings.Repeat("0123456789", 1000) // 10,000 bytes
	b := &limitedBuffer{max: 4096}
	n, err := io.Copy(b, onlyRead(strings.NewReader(in)))
	if err != nil || n != int64(len(in)) {
		t.Fatalf("io.Copy = %d, %v; want %d, nil", n, err, len(in))
	}
	if got := b.String(); got != in[:4096] {
		t.Errorf("kept %d bytes %.20q…, want the first 4096", len(got), got)
	}

	// A read error other than EOF ends the copy with that error.
	boom := errors.New("boom")
	b = &limitedBuffer{max: 4096}
	r := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(boom))
	if n, err := io.Copy(b, onlyRead(r)); n != 7 || !errors.Is(err, boom) {
		t.Errorf("io.Copy with a failing reader = %d, %v; want 7, %v", n, err, boom)
	}
	if got := b.String(); got != "partial" {
		t.Errorf("kept %q, want %q", got, "partial")
	}
}

// The session's stderr copy lives as long as the session (one per board on
// the leader): it must not hold io.Copy's own 32 KB buffer.
func TestLimitedBufferCopyNeedsNoLargeBuffer(t *testing.T) {
	res := testing.Benchmark(func(bb *testing.B) {
		bb.ReportAllocs()
		for range bb.N {
			b := &limitedBuffer{max: 4096}
			io.Copy(b, onlyRead(strings.NewReader("sudo: a password is required\n")))
		}
	})
	if got := res.AllocedBytesPerOp(); got > 4096 {
		t.Errorf("io.Copy into a limitedBuffer allocates %d bytes, want at most 4096 (no 32 KB copy buffer)", got)
	}
}
