package api

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// hostileSize is the size of the hostile manifests below: the 80 KB of the
// issue that took seconds and gigabytes before the limits.
const hostileSize = 80 << 10

// hostileManifests are inputs that are quadratic or recursive for a naive
// reader, each about hostileSize bytes.
func hostileManifests() map[string]string {
	n := hostileSize / 2
	elems := strings.Repeat("1,", hostileSize/2-hostileSize/8)
	return map[string]string{
		"nested arrays":        "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n",
		"nested inline tables": "x = " + strings.Repeat("{a=", hostileSize/4) + "1" + strings.Repeat("}", hostileSize/4) + "\n",
		"dotted key":           strings.Repeat("a.", n) + "a = 1\n",
		"dotted header":        "[" + strings.Repeat("a.", n) + "a]\n",
		// Not deep, so past the gate: these show the reader itself is
		// linear.
		"long string":             "x = \"" + strings.Repeat("a", hostileSize) + "\"\n",
		"long key, many elements": "\"" + strings.Repeat("k", hostileSize/4) + "\" = [" + elems + "]\n",
	}
}

func TestManifestLimitsRefuseHostileInput(t *testing.T) {
	hostile := hostileManifests()
	tests := []struct {
		name      string
		line, col int
		msg       string
	}{
		// Column 4+33 is the 33rd '['.
		{"nested arrays", 1, 5 + MaxManifestDepth, "nested more than 32 levels deep"},
		{"nested inline tables", 1, 5 + 3*MaxManifestDepth, "nested more than 32 levels deep"},
		{"dotted key", 1, 2 * MaxManifestDepth, "nested more than 32 levels deep"},
		{"dotted header", 1, 1 + 2*MaxManifestDepth, "nested more than 32 levels deep"},
		{"long key, many elements", 1, 1, "unknown kind"},
		{"long string", 1, 1, "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeManifest("evil.toml", []byte(hostile[tt.name]))
			var me ManifestErrors
			if !errors.As(err, &me) || len(me) != 1 {
				t.Fatalf("DecodeManifest = %v, want one ManifestError", err)
			}
			e := me[0]
			if e.File != "evil.toml" || e.Line != tt.line || e.Col != tt.col || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("error = %.200s, want evil.toml:%d:%d: ...%s...", e, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func TestManifestLimitsSize(t *testing.T) {
	data := []byte("# " + strings.Repeat("x", MaxManifestSize) + "\n")
	_, err := DecodeManifest("big.toml", data)
	var me ManifestErrors
	if !errors.As(err, &me) || len(me) != 1 || me[0].Line != 1 || me[0].Col != 1 ||
		!strings.Contains(me[0].Message, fmt.Sprintf("the limit is %d", MaxManifestSize)) {
		t.Fatalf("DecodeManifest(%d bytes) = %v, want a size error at big.toml:1:1", len(data), err)
	}
}

func TestManifestLimitsAcceptDepthUpToTheCap(t *testing.T) {
	tests := []struct {
		name string
		src  string
		ok   bool
	}{
		{"arrays at the cap", "x = " + strings.Repeat("[", MaxManifestDepth) + strings.Repeat("]", MaxManifestDepth), true},
		{"arrays over the cap", "x = " + strings.Repeat("[", MaxManifestDepth+1) + strings.Repeat("]", MaxManifestDepth+1), false},
		{"dotted key at the cap", strings.Repeat("a.", MaxManifestDepth-1) + "a = 1", true},
		{"key plus arrays over the cap", strings.Repeat("a.", MaxManifestDepth/2) + "a = " + strings.Repeat("[", MaxManifestDepth/2+1) + strings.Repeat("]", MaxManifestDepth/2+1), false},
		{"brackets in strings and comments", "x = '[[[[' # {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\ny = \"\"\"\n" + strings.Repeat("[", 100) + "\n\"\"\"", true},
		{"inline tables and arrays mixed", "x = [{a = [{b.c = 1}]}, {d = 2}]", true},
		{"header then deep key", "[" + strings.Repeat("a.", 20) + "a]\n" + strings.Repeat("b.", 20) + "b = 1", true},
	}
	for _, tt := range tests {
		err := checkManifestLimits("f.toml", []byte(tt.src))
		if (err == nil) != tt.ok {
			t.Errorf("%s: checkManifestLimits = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// TestManifestReadingIsLinear bounds the memory reading the hostile inputs
// allocates by a generous linear bound: 200 bytes per input byte. Before
// the limits the nested arrays allocated 30000 bytes per byte.
func TestManifestReadingIsLinear(t *testing.T) {
	for name, src := range hostileManifests() {
		data := []byte(src)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = DecodeManifest("evil.toml", data)
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(200*len(data)); got > limit {
			t.Errorf("%s: reading %d bytes allocated %d bytes, over %d", name, len(data), got, limit)
		}
	}
}

// BenchmarkDecodeHostileManifest reads each hostile input; ns/op and B/op
// stay proportional to the input size.
func BenchmarkDecodeHostileManifest(b *testing.B) {
	for name, src := range hostileManifests() {
		data := []byte(src)
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = DecodeManifest("evil.toml", data)
			}
		})
	}
}

// treeDepth is the nesting depth of a decoded TOML value.
func treeDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, treeDepth(e))
		}
		return d + 1
	case []map[string]any:
		for _, e := range v {
			d = max(d, treeDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, treeDepth(e))
		}
		return d + 1
	}
	return 0
}

// FuzzManifestLimits checks that the pre-pass cannot be fooled: whatever it
// lets through and the TOML decoder accepts is at most a header's
// MaxManifestDepth segments plus MaxManifestDepth levels below them deep.
func FuzzManifestLimits(f *testing.F) {
	for _, s := range []string{
		"x = [[1]]", "a.b.c = {d = [1, {e = 2}]}", "[a.b]\nc.d = 1", "[[a]]\n[a.b]\nx='''\n[[['''",
		"x = \"\\\"[[\"\ny = [ # [[[\n1]", "x = {a=[{b=[]}]}",
		"x = " + strings.Repeat("[", 40) + strings.Repeat("]", 40),
		// As deep as the limits allow: a 32-segment header, then 32
		// levels of keys and arrays below it.
		"[" + strings.Repeat("h.", MaxManifestDepth-1) + "h]\n" + strings.Repeat("k.", MaxManifestDepth/2-1) + "k = " +
			strings.Repeat("[", MaxManifestDepth/2) + "1" + strings.Repeat("]", MaxManifestDepth/2),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		if checkManifestLimits("f.toml", data) != nil {
			return
		}
		var tree map[string]any
		if _, err := toml.Decode(string(data), &tree); err != nil {
			return
		}
		if d, limit := treeDepth(tree), 2*MaxManifestDepth+1; d > limit {
			t.Errorf("%q passed the limits but decodes %d deep, over %d", data, d, limit)
		}
	})
}
