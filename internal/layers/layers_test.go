package layers

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/herd-dev/herd/"

// layers lists herd's packages bottom up, by their path in the module.
var layers = [][]string{
	// Helpers that import nothing of herd's, for api and everything above.
	{"internal/backoff"},
	// Object rules, wire types and leaf helpers.
	{"api", "internal/atomicfile", "internal/clock", "internal/promtext", "internal/testutil",
		"units/sshexec/boardfs", "units/sshexec/sshdtest", "agent/placer/boardapi", "agent/svcproxy", "e2e/truth"},
	// The store, gossip, the Go client, pure engines over api.
	{"internal/secretbox", "internal/clock/clocktest", "raftstore", "gossip", "client",
		"agent/scheduler", "agent/herddns", "units/sshexec/boardsession", "units/artifact", "e2e"},
	// Unit rendering and plans, the reconcilers, the service view, the API server.
	{"units", "agent/controller", "agent/svcview", "agent/httpapi"},
	// The SSH executor, a board's unit report and its on_disconnect.
	{"units/sshexec", "agent/unitreport", "agent/disconnect"},
	// The placer, a board's unit watch, the SSH gate.
	{"units/sshgate", "agent/placer", "agent/placer/fakeboard", "agent/unitwatch"},
	{"bootstrap", "agent/metrics"},
	// The two composition roots: herdctl's commands, the agent.
	{"cli", "agent"},
	// Mains and the lab suite's tools.
	{"cmd/herd", "cmd/herdctl", "e2e/chaostool", "e2e/hostiletool", "e2e/benchfailover", "e2e/scaletool", "internal/layers"},
}

// TestImportsGoDown: every herd package is in the table, and each of its
// imports (test files left out; the lab suite's build tag in) is a herd
// package of a lower layer.
func TestImportsGoDown(t *testing.T) {
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			if _, dup := layer[p]; dup {
				t.Errorf("%s is in the table twice", p)
			}
			layer[p] = i
		}
	}
	ctx := build.Default
	ctx.BuildTags = append(ctx.BuildTags, "e2e")
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n := d.Name(); dir != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || n == "dist") {
			return filepath.SkipDir
		}
		pkg, err := ctx.ImportDir(dir, 0)
		if errors.As(err, new(*build.NoGoError)) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		seen[name] = true
		at, ok := layer[name]
		if !ok {
			t.Errorf("%s has no layer: give it one in layers_test.go", name)
			return nil
		}
		for _, imp := range pkg.Imports {
			dep, herd := strings.CutPrefix(imp, module)
			if !herd {
				continue
			}
			if dl, ok := layer[dep]; ok && dl >= at {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go to a lower layer", name, at, dep, dl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range layer {
		if !seen[p] {
			t.Errorf("%s is in the table but not in the module", p)
		}
	}
}
