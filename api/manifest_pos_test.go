package api

import (
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

func TestScanPositions(t *testing.T) {
	src := "\ufeff# comment [[not.a.table]]\n" + // 1
		"top = 'lit#eral' # x = 1\n" + // 2
		"[[ deployment ]]\n" + // 3
		"name = \"a\\\"b\" \n" + // 4
		"multi = \"\"\"\n" + // 5
		"x = 1\n" + // 6
		"[fake]\"\"\"\n" + // 7
		"lit = '''\n" + // 8
		"y = ''''\n" + // 9
		"[ deployment . \"tem plate\" ]\n" + // 10
		"exec = [\n" + // 11
		"  \"a\", # c\n" + // 12
		"  [1, 2], { k = 1 },\n" + // 13
		"]\n" + // 14
		"dotted.key = 1979-05-27 07:32:00\n" + // 15
		"[[deployment]]\n" + // 16
		"[[deployment.ports]]\n" + // 17
		"\"quoted.key\" = { inner = { deep = true } }\n" + // 18
		"[[deployment.ports]]\r\n" + // 19
		"p = 1\r\n" // 20
	var tree map[string]any
	if _, err := toml.Decode(src, &tree); err != nil {
		t.Fatalf("test input is not valid TOML: %v", err)
	}
	got := scanPositions([]byte(src)).all()
	want := map[string]tomlPos{
		"top":                                            {2, 1, 0},
		"deployment":                                     {3, 1, 0},
		"deployment[0]":                                  {3, 1, 0},
		"deployment[0].name":                             {4, 1, 0},
		"deployment[0].multi":                            {5, 1, 0},
		"deployment[0].lit":                              {8, 1, 0},
		`deployment[0]."tem plate"`:                      {10, 1, 0},
		`deployment[0]."tem plate".exec`:                 {11, 1, 0},
		`deployment[0]."tem plate".exec[0]`:              {12, 3, 0},
		`deployment[0]."tem plate".exec[1]`:              {13, 3, 0},
		`deployment[0]."tem plate".exec[1][0]`:           {13, 4, 0},
		`deployment[0]."tem plate".exec[1][1]`:           {13, 7, 0},
		`deployment[0]."tem plate".exec[2]`:              {13, 11, 0},
		`deployment[0]."tem plate".exec[2].k`:            {13, 13, 0},
		`deployment[0]."tem plate".dotted`:               {15, 1, 0},
		`deployment[0]."tem plate".dotted.key`:           {15, 8, 0},
		"deployment[1]":                                  {16, 1, 0},
		"deployment[1].ports":                            {17, 1, 0},
		"deployment[1].ports[0]":                         {17, 1, 0},
		`deployment[1].ports[0]."quoted.key"`:            {18, 1, 0},
		`deployment[1].ports[0]."quoted.key".inner`:      {18, 18, 0},
		`deployment[1].ports[0]."quoted.key".inner.deep`: {18, 28, 0},
		"deployment[1].ports[1]":                         {19, 1, 0},
		"deployment[1].ports[1].p":                       {20, 1, 0},
	}
	// Offsets are checked by the decoder's ordering tests; compare
	// line:col here.
	for k, p := range got {
		p.offset = 0
		got[k] = p
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(tomlPos{})); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
}

func TestPathHelpers(t *testing.T) {
	tests := []struct{ path, parent, stripped string }{
		{"deployment[0].template.ports[1]", "deployment[0].template.ports", "deployment.template.ports"},
		{"deployment[0].template", "deployment[0]", "deployment.template"},
		{"deployment[0]", "deployment", "deployment"},
		{"deployment", "", "deployment"},
		{`a."b.[c]\"".d`, `a."b.[c]\""`, `a."b.[c]\"".d`},
		{`a."b.c"`, "a", `a."b.c"`},
	}
	for _, tt := range tests {
		if got := parentPath(tt.path); got != tt.parent {
			t.Errorf("parentPath(%s) = %s, want %s", tt.path, got, tt.parent)
		}
		if got := stripIndices(tt.path); got != tt.stripped {
			t.Errorf("stripIndices(%s) = %s, want %s", tt.path, got, tt.stripped)
		}
	}
}

// all returns every recorded position by path, for tests.
func (x *posIndex) all() map[string]tomlPos {
	out := map[string]tomlPos{}
	var walk func(n *posNode, path string)
	walk = func(n *posNode, path string) {
		if n.has {
			out[path] = n.pos
		}
		for seg, c := range n.children {
			p := seg
			if path != "" && seg[0] != '[' {
				p = path + "." + seg
			} else if path != "" {
				p = path + seg
			}
			walk(c, p)
		}
	}
	walk(&x.root, "")
	return out
}
