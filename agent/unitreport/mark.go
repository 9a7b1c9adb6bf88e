package unitreport

// Placeholder until the unitwatch branch lands (same API as its spec).

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Mark orders the reports of one board: Epoch, then Seq.
type Mark struct {
	Epoch int64
	Seq   uint64
}

// After reports whether m is newer than o.
func (m Mark) After(o Mark) bool {
	if m == (Mark{}) {
		return false
	}
	if o == (Mark{}) || m.Epoch != o.Epoch {
		return true
	}
	return m.Seq > o.Seq
}

// ParseSeqFile reads "EPOCH SEQ\n".
func ParseSeqFile(b []byte) (Mark, error) {
	if len(b) > 64 {
		return Mark{}, errors.New("unitreport: seq file too long")
	}
	f := bytes.Fields(b)
	if len(f) != 2 {
		return Mark{}, fmt.Errorf("unitreport: seq file %q is not \"EPOCH SEQ\"", b)
	}
	e, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || e <= 0 {
		return Mark{}, fmt.Errorf("unitreport: seq file epoch %q", f[0])
	}
	s, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil || s == 0 {
		return Mark{}, fmt.Errorf("unitreport: seq file seq %q", f[1])
	}
	return Mark{Epoch: e, Seq: s}, nil
}
