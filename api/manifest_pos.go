package api

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file finds where things are written in a TOML document.
//
// BurntSushi/toml reports positions for syntax errors, but MetaData keeps the
// position of each key only privately, and only for the last occurrence of a
// key (so not per element of an array of tables). To point at
// "web.toml:12:3" for an unknown key, a wrong type or an invalid value, we
// scan the document once more and record the position of every key, table
// header and array element under a path such as
// `deployment[1].template.ports[0].port`.
//
// The scanner runs only on documents that BurntSushi/toml has already parsed
// without error, so it can be forgiving: on anything unexpected it stops, and
// callers fall back to the position of an enclosing table.

// tomlPos is a position in a TOML document: 1-based line and column (in
// bytes), and 0-based byte offset.
type tomlPos struct {
	line, col, offset int
}

// quoteKey writes one key segment as TOML would: bare when it can be,
// otherwise as a quoted string.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(isAlnum(c) || c == '_' || c == '-') {
			return quoteString(k)
		}
	}
	return k
}

// joinKey appends a key segment to a path.
func joinKey(base, seg string) string {
	if base == "" {
		return quoteKey(seg)
	}
	return base + "." + quoteKey(seg)
}

// indexKey appends an array index to a path.
func indexKey(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

// scanPositions returns the position of every key, table header and array
// element in data, by path. The first occurrence of a path wins.
func scanPositions(data []byte) map[string]tomlPos {
	s := &posScanner{
		src:    data,
		line:   1,
		pos:    make(map[string]tomlPos),
		arrays: make(map[string]int),
	}
	if len(data) >= 3 && string(data[:3]) == "\ufeff" {
		s.i, s.lineStart = 3, 3
	}
	s.document()
	return s.pos
}

type posScanner struct {
	src       []byte
	i         int
	line      int
	lineStart int
	pos       map[string]tomlPos
	// current is the path of the table that key/value pairs go to.
	current string
	// arrays counts the elements of each array of tables seen so far, by
	// resolved path.
	arrays map[string]int
}

func (s *posScanner) eof() bool { return s.i >= len(s.src) }

func (s *posScanner) peek(k int) byte {
	if s.i+k < len(s.src) {
		return s.src[s.i+k]
	}
	return 0
}

func (s *posScanner) here() tomlPos {
	return tomlPos{line: s.line, col: s.i - s.lineStart + 1, offset: s.i}
}

func (s *posScanner) advance() {
	if s.eof() {
		return
	}
	if s.src[s.i] == '\n' {
		s.line++
		s.lineStart = s.i + 1
	}
	s.i++
}

func (s *posScanner) record(path string, p tomlPos) {
	if _, ok := s.pos[path]; !ok {
		s.pos[path] = p
	}
}

// skipBlank skips spaces and tabs.
func (s *posScanner) skipBlank() {
	for !s.eof() && (s.src[s.i] == ' ' || s.src[s.i] == '\t') {
		s.advance()
	}
}

// skipBlankLines skips blanks, newlines and comments.
func (s *posScanner) skipBlankLines() {
	for !s.eof() {
		switch s.src[s.i] {
		case ' ', '\t', '\r', '\n':
			s.advance()
		case '#':
			for !s.eof() && s.src[s.i] != '\n' {
				s.advance()
			}
		default:
			return
		}
	}
}

func (s *posScanner) document() {
	for {
		s.skipBlankLines()
		if s.eof() {
			return
		}
		start := s.i
		if s.src[s.i] == '[' {
			if !s.header() {
				return
			}
		} else if !s.keyValue("") {
			return
		}
		if s.i == start {
			return // no progress: give up
		}
	}
}

// header scans [table] or [[array.of.tables]] and makes it current.
func (s *posScanner) header() bool {
	at := s.here()
	s.advance()
	array := s.peek(0) == '['
	if array {
		s.advance()
	}
	s.skipBlank()
	segs, poss, ok := s.key()
	if !ok {
		return false
	}
	s.skipBlank()
	if s.peek(0) != ']' || (array && s.peek(1) != ']') {
		return false
	}
	s.advance()
	if array {
		s.advance()
	}
	parent := ""
	for i, seg := range segs[:len(segs)-1] {
		parent = joinKey(parent, seg)
		s.record(parent, poss[i])
		if n, ok := s.arrays[parent]; ok {
			parent = indexKey(parent, n-1)
		}
	}
	full := joinKey(parent, segs[len(segs)-1])
	if array {
		n := s.arrays[full]
		s.arrays[full] = n + 1
		s.record(full, at)
		full = indexKey(full, n)
	} else if n, ok := s.arrays[full]; ok {
		// Invalid TOML ([x] after [[x]]); never reached after a
		// successful parse.
		full = indexKey(full, n-1)
	}
	s.record(full, at)
	s.current = full
	return true
}

// keyValue scans key = value under base (the current table when base is
// "").
func (s *posScanner) keyValue(base string) bool {
	if base == "" {
		base = s.current
	}
	segs, poss, ok := s.key()
	if !ok {
		return false
	}
	path := base
	for i, seg := range segs {
		path = joinKey(path, seg)
		s.record(path, poss[i])
	}
	s.skipBlank()
	if s.peek(0) != '=' {
		return false
	}
	s.advance()
	s.skipBlank()
	return s.value(path)
}

// key scans a possibly dotted key and returns its segments and where each
// starts.
func (s *posScanner) key() ([]string, []tomlPos, bool) {
	var segs []string
	var poss []tomlPos
	for {
		s.skipBlank()
		at := s.here()
		var seg string
		switch c := s.peek(0); {
		case c == '"':
			v, ok := s.basicString()
			if !ok {
				return nil, nil, false
			}
			seg = v
		case c == '\'':
			v, ok := s.literalString()
			if !ok {
				return nil, nil, false
			}
			seg = v
		default:
			start := s.i
			for !s.eof() {
				c := s.src[s.i]
				if !(isAlnum(c) || c == '_' || c == '-') {
					break
				}
				s.advance()
			}
			if s.i == start {
				return nil, nil, false
			}
			seg = string(s.src[start:s.i])
		}
		segs = append(segs, seg)
		poss = append(poss, at)
		s.skipBlank()
		if s.peek(0) != '.' {
			return segs, poss, true
		}
		s.advance()
	}
}

// value scans one value and records the positions inside it.
func (s *posScanner) value(path string) bool {
	switch c := s.peek(0); c {
	case '"':
		if s.peek(1) == '"' && s.peek(2) == '"' {
			return s.multiline('"')
		}
		_, ok := s.basicString()
		return ok
	case '\'':
		if s.peek(1) == '\'' && s.peek(2) == '\'' {
			return s.multiline('\'')
		}
		_, ok := s.literalString()
		return ok
	case '[':
		s.advance()
		for n := 0; ; n++ {
			s.skipBlankLines()
			if s.eof() {
				return false
			}
			if s.peek(0) == ']' {
				s.advance()
				return true
			}
			elem := indexKey(path, n)
			s.record(elem, s.here())
			start := s.i
			if !s.value(elem) || s.i == start {
				return false
			}
			s.skipBlankLines()
			if s.peek(0) == ',' {
				s.advance()
			}
		}
	case '{':
		s.advance()
		for {
			s.skipBlankLines()
			if s.eof() {
				return false
			}
			if s.peek(0) == '}' {
				s.advance()
				return true
			}
			start := s.i
			if !s.keyValue(path) || s.i == start {
				return false
			}
			s.skipBlankLines()
			if s.peek(0) == ',' {
				s.advance()
			}
		}
	default:
		// Number, boolean or date: runs to a delimiter. Dates may contain
		// one blank ("1979-05-27 07:32:00"), which is harmless here.
		start := s.i
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.src[s.i])) {
			s.advance()
		}
		return s.i > start
	}
}

// basicString scans "..." and returns its value with escapes decoded.
func (s *posScanner) basicString() (string, bool) {
	s.advance() // opening quote
	var b strings.Builder
	for !s.eof() {
		c := s.src[s.i]
		switch c {
		case '"':
			s.advance()
			return b.String(), true
		case '\n':
			return "", false
		case '\\':
			s.advance()
			if s.eof() {
				return "", false
			}
			e := s.src[s.i]
			s.advance()
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case 'e':
				b.WriteByte(0x1b)
			case '"', '\\':
				b.WriteByte(e)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if s.i+n > len(s.src) {
					return "", false
				}
				r, err := strconv.ParseUint(string(s.src[s.i:s.i+n]), 16, 32)
				if err != nil {
					return "", false
				}
				for k := 0; k < n; k++ {
					s.advance()
				}
				b.WriteRune(rune(r))
			default:
				return "", false
			}
		default:
			b.WriteByte(c)
			s.advance()
		}
	}
	return "", false
}

// literalString scans '...'.
func (s *posScanner) literalString() (string, bool) {
	s.advance()
	start := s.i
	for !s.eof() {
		switch s.src[s.i] {
		case '\'':
			v := string(s.src[start:s.i])
			s.advance()
			return v, utf8.ValidString(v)
		case '\n':
			return "", false
		}
		s.advance()
	}
	return "", false
}

// multiline scans """...""" or ”'...”' (value not needed).
func (s *posScanner) multiline(q byte) bool {
	s.advance()
	s.advance()
	s.advance()
	for !s.eof() {
		c := s.src[s.i]
		if c == '\\' && q == '"' {
			s.advance()
			s.advance()
			continue
		}
		if c == q && s.peek(1) == q && s.peek(2) == q {
			s.advance()
			s.advance()
			s.advance()
			// Up to two more quotes belong to the content.
			for k := 0; k < 2 && s.peek(0) == q; k++ {
				s.advance()
			}
			return true
		}
		s.advance()
	}
	return false
}
