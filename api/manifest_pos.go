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

// posNode is one path segment in a posIndex: a key, or an element of an
// array. Paths share their prefixes, so recording every element of a
// document costs memory proportional to the document, not to the sum of
// its path lengths (which is quadratic for deep or long-keyed documents).
type posNode struct {
	pos tomlPos
	has bool
	// children by segment as it is written in a path: quoteKey(key) or
	// "[i]".
	children map[string]*posNode
	// arrays counts the elements of an array of tables seen so far.
	arrays int
}

func (n *posNode) child(seg string) *posNode {
	c := n.children[seg]
	if c == nil {
		if n.children == nil {
			n.children = make(map[string]*posNode)
		}
		c = &posNode{}
		n.children[seg] = c
	}
	return c
}

func (n *posNode) key(k string) *posNode { return n.child(quoteKey(k)) }
func (n *posNode) index(i int) *posNode  { return n.child("[" + strconv.Itoa(i) + "]") }

// posIndex holds the positions scanPositions found.
type posIndex struct{ root posNode }

// lookup returns the position of path (as built by joinKey and indexKey).
func (x *posIndex) lookup(path string) (tomlPos, bool) {
	if x == nil || path == "" {
		return tomlPos{}, false
	}
	n := &x.root
	for _, seg := range splitPath(path) {
		if n = n.children[seg]; n == nil {
			return tomlPos{}, false
		}
	}
	return n.pos, n.has
}

// splitPath splits a path built by joinKey and indexKey into its segments:
// keys as quoteKey writes them and indices as "[i]".
func splitPath(path string) []string {
	var segs []string
	inQuote, start := false, 0
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case '.':
			if !inQuote {
				if i > start {
					segs = append(segs, path[start:i])
				}
				start = i + 1
			}
		case '[':
			if !inQuote {
				if i > start {
					segs = append(segs, path[start:i])
				}
				start = i
			}
		}
	}
	if start < len(path) {
		segs = append(segs, path[start:])
	}
	return segs
}

// scanPositions returns the position of every key, table header and array
// element in data, by path. The first occurrence of a path wins. It runs in
// time and memory linear in len(data).
func scanPositions(data []byte) *posIndex {
	x := &posIndex{}
	s := &posScanner{
		src:  data,
		line: 1,
		root: &x.root,
	}
	s.current = s.root
	if len(data) >= 3 && string(data[:3]) == "\ufeff" {
		s.i, s.lineStart = 3, 3
	}
	s.document()
	return x
}

type posScanner struct {
	src       []byte
	i         int
	line      int
	lineStart int
	root      *posNode
	// current is the table that key/value pairs go to.
	current *posNode
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

func (s *posScanner) record(n *posNode, p tomlPos) {
	if !n.has {
		n.pos, n.has = p, true
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
		} else if !s.keyValue(nil) {
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
	parent := s.root
	for i, seg := range segs[:len(segs)-1] {
		parent = parent.key(seg)
		s.record(parent, poss[i])
		if parent.arrays > 0 {
			parent = parent.index(parent.arrays - 1)
		}
	}
	full := parent.key(segs[len(segs)-1])
	if array {
		n := full.arrays
		full.arrays = n + 1
		s.record(full, at)
		full = full.index(n)
	} else if full.arrays > 0 {
		// Invalid TOML ([x] after [[x]]); never reached after a
		// successful parse.
		full = full.index(full.arrays - 1)
	}
	s.record(full, at)
	s.current = full
	return true
}

// keyValue scans key = value under base (the current table when base is
// nil).
func (s *posScanner) keyValue(base *posNode) bool {
	if base == nil {
		base = s.current
	}
	segs, poss, ok := s.key()
	if !ok {
		return false
	}
	path := base
	for i, seg := range segs {
		path = path.key(seg)
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
func (s *posScanner) value(path *posNode) bool {
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
			elem := path.index(n)
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
