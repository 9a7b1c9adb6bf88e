package layers

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoGenericSortOfValues: the code linked into herd and herdctl sorts
// slices of structs (of anything but pointers and basic types) with
// sort.Slice or sort.SliceStable, not slices.SortFunc or
// slices.SortStableFunc. Go compiles a generic function once per GC shape
// and every struct type is a shape of its own, so each such sort put
// another copy of the sort, about 14 KB, into every agent's memory
// (docs/arm.md). The check reads the source: a comparator's element type
// is resolved through herd's own declarations, and anything it cannot
// resolve to a pointer or a basic type fails, except a comparator generic
// in its element type (controller's compareByName over api.Object, whose
// methods have pointer receivers), which shares the shape of its callers'
// pointers.
func TestNoGenericSortOfValues(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := map[string]*sortPkg{}
	var load func(path string)
	load = func(path string) {
		if pkgs[path] != nil {
			return
		}
		p := parseSortPkg(t, root, path)
		pkgs[path] = p
		for _, imp := range p.imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				load(dep)
			}
		}
	}
	load("cmd/herd")
	load("cmd/herdctl")
	if len(pkgs) < 20 {
		t.Fatalf("found only %d herd packages in the binaries", len(pkgs))
	}
	for _, p := range pkgs {
		for _, f := range p.files {
			slicesName := importName(f, "slices")
			if slicesName == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "SortFunc" && sel.Sel.Name != "SortStableFunc") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != slicesName {
					return true
				}
				elem, generic := p.comparedType(pkgs, f, call.Args[1])
				if !generic && (elem == nil || !p.sharedShape(pkgs, f, elem, 0)) {
					t.Errorf("%s: slices.%s over elements that are not pointers or basic types: use sort.Slice or sort.SliceStable (docs/arm.md)",
						p.fset.Position(call.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// sortPkg is one herd package's non-test source, as the default build
// context selects its files.
type sortPkg struct {
	fset    *token.FileSet
	files   []*ast.File
	imports []string
	types   map[string][]*ast.TypeSpec // by name; function-local types too
	funcs   map[string]*ast.FuncDecl
}

func parseSortPkg(t *testing.T, root, path string) *sortPkg {
	t.Helper()
	bp, err := build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(path)), 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	p := &sortPkg{fset: token.NewFileSet(), imports: bp.Imports,
		types: map[string][]*ast.TypeSpec{}, funcs: map[string]*ast.FuncDecl{}}
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(bp.Dir, name), nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		p.files = append(p.files, f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				p.types[n.Name.Name] = append(p.types[n.Name.Name], n)
			case *ast.FuncDecl:
				if n.Recv == nil {
					p.funcs[n.Name.Name] = n
				}
			}
			return true
		})
	}
	return p
}

// imported is what f imports: each package's path and the name f calls it by.
func imported(f *ast.File) (paths, names []string) {
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		paths, names = append(paths, path), append(names, name)
	}
	return paths, names
}

// importName is the name f refers to the package path by, or "".
func importName(f *ast.File, path string) string {
	paths, names := imported(f)
	if i := slices.Index(paths, path); i >= 0 {
		return names[i]
	}
	return ""
}

// herdPackage is the herd package a selector's qualifier names in f, or nil.
func herdPackage(pkgs map[string]*sortPkg, f *ast.File, qualifier string) *sortPkg {
	paths, names := imported(f)
	for i, path := range paths {
		if dep, ok := strings.CutPrefix(path, module); ok && names[i] == qualifier {
			return pkgs[dep]
		}
	}
	return nil
}

// comparedType is the type of the first parameter of a comparator given
// as a function literal or by the name of a herd function, or nil; generic
// when that type is one of the function's type parameters.
func (p *sortPkg) comparedType(pkgs map[string]*sortPkg, f *ast.File, cmp ast.Expr) (elem ast.Expr, generic bool) {
	var ft *ast.FuncType
	switch c := cmp.(type) {
	case *ast.FuncLit:
		ft = c.Type
	case *ast.Ident:
		if d := p.funcs[c.Name]; d != nil {
			ft = d.Type
		}
	case *ast.SelectorExpr:
		if x, ok := c.X.(*ast.Ident); ok {
			if q := herdPackage(pkgs, f, x.Name); q != nil && q.funcs[c.Sel.Name] != nil {
				ft = q.funcs[c.Sel.Name].Type
			}
		}
	}
	if ft == nil || ft.Params == nil || len(ft.Params.List) == 0 {
		return nil, false
	}
	elem = ft.Params.List[0].Type
	if id, ok := elem.(*ast.Ident); ok && ft.TypeParams != nil {
		for _, tp := range ft.TypeParams.List {
			for _, n := range tp.Names {
				if n.Name == id.Name {
					return elem, true
				}
			}
		}
	}
	return elem, false
}

// basic are the predeclared types a sort may share a shape over.
var basic = map[string]bool{"string": true, "bool": true, "byte": true, "rune": true, "uintptr": true,
	"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "float32": true, "float64": true}

// sharedShape reports whether e, in a file of p, is a pointer, a basic
// type, or a herd type defined as one.
func (p *sortPkg) sharedShape(pkgs map[string]*sortPkg, f *ast.File, e ast.Expr, depth int) bool {
	if depth > 8 {
		return false
	}
	switch e := e.(type) {
	case *ast.StarExpr:
		return true
	case *ast.Ident:
		if specs := p.types[e.Name]; specs != nil {
			return p.allShared(pkgs, specs, depth)
		}
		return basic[e.Name]
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return false
		}
		q := herdPackage(pkgs, f, x.Name)
		return q != nil && q.types[e.Sel.Name] != nil && q.allShared(pkgs, q.types[e.Sel.Name], depth)
	}
	return false
}

// allShared reports whether every type of p declared under one name
// (several when functions declare local types alike) has a shared shape.
func (p *sortPkg) allShared(pkgs map[string]*sortPkg, specs []*ast.TypeSpec, depth int) bool {
	for _, ts := range specs {
		if ts.TypeParams != nil || !p.sharedShape(pkgs, p.fileOf(ts), ts.Type, depth+1) {
			return false
		}
	}
	return true
}

// fileOf is the file of p that holds n.
func (p *sortPkg) fileOf(n ast.Node) *ast.File {
	for _, f := range p.files {
		if f.Pos() <= n.Pos() && n.End() <= f.End() {
			return f
		}
	}
	return nil
}
