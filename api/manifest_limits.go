package api

import "fmt"

// Limits on a manifest file, checked in one linear pass before the TOML
// decoder runs, so that a hostile file costs time and memory proportional
// to its size and no recursion deeper than MaxManifestDepth.
const (
	// MaxManifestSize is the largest manifest file accepted, in bytes.
	MaxManifestSize = 1 << 20
	// MaxManifestDepth is the deepest nesting accepted: open arrays and
	// inline tables plus the segments of the dotted keys leading to them
	// (a.b = [{c = 1}] is 4 deep at c), and the segments of a table
	// header. Real manifests stay under 8
	// (deployment.template.ports[0].port is 5).
	MaxManifestDepth = 32
)

// limitFrame is an open array or inline table.
type limitFrame struct {
	table bool // '{' rather than '['
	base  int  // depth of the key that opened it
	segs  int
}

// checkManifestLimits refuses data over MaxManifestSize or nested deeper
// than MaxManifestDepth, naming file:line:col. It knows strings and
// comments, so brackets in them do not count. Anything it does not
// understand (an unterminated string, say) it leaves to the decoder, which
// reports it.
func checkManifestLimits(file string, data []byte) *ManifestError {
	if len(data) > MaxManifestSize {
		return &ManifestError{File: file, Line: 1, Col: 1,
			Message: fmt.Sprintf("manifest is %d bytes; the limit is %d (1 MiB): split it into several files", len(data), MaxManifestSize)}
	}
	var (
		i, line, lineStart = 0, 1, 0
		stack              []limitFrame
		base, segs         int    // depth of the container, dots in the current key
		keyCtx             = true // a key may be being written
		header             = false
	)
	deep := func() *ManifestError {
		return &ManifestError{File: file, Line: line, Col: i - lineStart + 1,
			Message: fmt.Sprintf("nested more than %d levels deep (arrays, inline tables and dotted keys)", MaxManifestDepth)}
	}
	for i < len(data) {
		c := data[i]
		switch c {
		case '\n':
			line, lineStart = line+1, i+1
			if len(stack) == 0 {
				keyCtx, segs, header = true, 0, false
			}
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			continue
		case '"', '\'':
			end, ok := skipString(data, i, &line, &lineStart)
			if !ok {
				return nil // let the decoder report it
			}
			i = end
			continue
		case '.':
			if keyCtx {
				segs++
				if base+segs+1 > MaxManifestDepth {
					return deep()
				}
			}
		case '=':
			keyCtx = false
		case ',':
			if n := len(stack); n > 0 && stack[n-1].table {
				keyCtx, segs = true, 0
			}
		case '[', '{':
			if c == '[' && len(stack) == 0 && keyCtx && !header {
				header = true // [table] or [[array]]: its key follows
				if i+1 < len(data) && data[i+1] == '[' {
					i++
				}
				break
			}
			stack = append(stack, limitFrame{table: c == '{', base: base, segs: segs})
			base += segs + 1
			segs = 0
			keyCtx = c == '{'
			if base > MaxManifestDepth {
				return deep()
			}
		case ']', '}':
			if n := len(stack); n > 0 {
				f := stack[n-1]
				stack = stack[:n-1]
				base, segs = f.base, f.segs
				keyCtx = false
			} else if header {
				keyCtx = false
			}
		}
		i++
	}
	return nil
}

// skipString skips the string starting at data[i] (basic, literal or
// multi-line) and returns the offset after it, counting lines. ok is false
// for an unterminated string.
func skipString(data []byte, i int, line, lineStart *int) (end int, ok bool) {
	q := data[i]
	if i+2 < len(data) && data[i+1] == q && data[i+2] == q {
		for j := i + 3; j < len(data); j++ {
			switch {
			case data[j] == '\n':
				*line, *lineStart = *line+1, j+1
			case data[j] == '\\' && q == '"':
				if j+1 < len(data) && data[j+1] == '\n' {
					*line, *lineStart = *line+1, j+2
				}
				j++
			case data[j] == q && j+2 < len(data) && data[j+1] == q && data[j+2] == q:
				j += 3
				// Up to two more quotes belong to the content.
				for k := 0; k < 2 && j < len(data) && data[j] == q; k++ {
					j++
				}
				return j, true
			}
		}
		return 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\n':
			return 0, false
		case '\\':
			if q == '"' {
				j++
			}
		case q:
			return j + 1, true
		}
	}
	return 0, false
}
