package unitreport

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Mark orders the reports of one board: Epoch, then Seq. The zero Mark
// covers nothing: it is older than every other mark.
type Mark struct {
	Epoch int64
	Seq   uint64
}

// After reports whether m is newer than o. The zero mark is never newer
// than anything; any other mark is newer than the zero mark.
func (m Mark) After(o Mark) bool {
	if m == (Mark{}) {
		return false
	}
	if m.Epoch != o.Epoch {
		return m.Epoch > o.Epoch
	}
	return m.Seq > o.Seq
}

// String is "EPOCH SEQ", the content of the seq file without its newline.
func (m Mark) String() string {
	return strconv.FormatInt(m.Epoch, 10) + " " + strconv.FormatUint(m.Seq, 10)
}

// maxSeqFile bounds what ParseSeqFile reads.
const maxSeqFile = 64

// ErrBadSeqFile: the seq file is not "EPOCH SEQ" with both positive.
var ErrBadSeqFile = errors.New("unitreport: bad seq file")

// FormatSeqFile is the content of the seq file for m: "EPOCH SEQ\n".
func FormatSeqFile(m Mark) []byte { return []byte(m.String() + "\n") }

// ParseSeqFile reads "EPOCH SEQ\n" as written by FormatSeqFile; both
// numbers must be positive.
func ParseSeqFile(b []byte) (Mark, error) {
	if len(b) > maxSeqFile {
		return Mark{}, fmt.Errorf("%w: %d bytes, over %d", ErrBadSeqFile, len(b), maxSeqFile)
	}
	f := bytes.Fields(b)
	if len(f) != 2 {
		return Mark{}, fmt.Errorf("%w: %q is not \"EPOCH SEQ\"", ErrBadSeqFile, b)
	}
	e, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || e <= 0 {
		return Mark{}, fmt.Errorf("%w: epoch %q", ErrBadSeqFile, f[0])
	}
	s, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil || s == 0 {
		return Mark{}, fmt.Errorf("%w: seq %q", ErrBadSeqFile, f[1])
	}
	return Mark{Epoch: e, Seq: s}, nil
}

// NextEpoch is the epoch an agent starting now uses: one above the last
// epoch it used (0 when it knows none), and at least now's Unix seconds,
// so a board that lost its data dir still moves forward as long as its
// clock does, and one whose clock went back still moves forward from its
// data dir.
func NextEpoch(last, nowUnix int64) int64 {
	return max(last+1, nowUnix)
}
