package boardfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func put(t *testing.T, p, content string, opt PutOptions) error {
	t.Helper()
	return PutFile(p, strings.NewReader(content), opt)
}

func TestPutFileWritesAtomicallyWithMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "f.conf")
	if err := put(t, p, "one", PutOptions{Mode: 0o640}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if err := put(t, p, "two", PutOptions{Mode: 0o600}); err != nil {
		t.Fatalf("PutFile again: %v", err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("content = %q, %v; want two", b, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode())
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only f.conf (no temporary left)", len(ents))
	}
}

func TestPutFileRefusesSymlinkInAnyComponent(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(victim, "passwd"), []byte("root"), 0o644)
	pod := filepath.Join(dir, "pod")
	os.MkdirAll(pod, 0o777)
	// The pod user replaced a directory on the path with a link to /etc-like dir.
	if err := os.Symlink(victim, filepath.Join(pod, "conf")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(pod, "conf", "passwd"), filepath.Join(pod, "conf", "new", "x")} {
		err := put(t, p, "owned", PutOptions{Mode: 0o644})
		if !errors.Is(err, ErrRefused) {
			t.Errorf("PutFile(%s) = %v, want ErrRefused", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "passwd")); string(b) != "root" {
		t.Errorf("victim file = %q, want it untouched", b)
	}
	if _, err := os.Stat(filepath.Join(victim, "new")); !os.IsNotExist(err) {
		t.Errorf("a directory was created through the link: %v", err)
	}
	// A link at the last component is replaced, not written through.
	last := filepath.Join(pod, "last")
	os.Symlink(filepath.Join(victim, "passwd"), last)
	if err := put(t, last, "mine", PutOptions{Mode: 0o644}); err != nil {
		t.Fatalf("PutFile over a final link: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "passwd")); string(b) != "root" {
		t.Errorf("write went through the final link: victim = %q", b)
	}
	if st, err := os.Lstat(last); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is %v, %v; want a regular file", last, st.Mode(), err)
	}
}

func TestPutFileSetIDNeedsOptIn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tool")
	for _, m := range []uint32{0o4755, 0o2755} {
		if err := put(t, p, "x", PutOptions{Mode: m}); !errors.Is(err, ErrRefused) {
			t.Errorf("mode %o without AllowSetID = %v, want ErrRefused", m, err)
		}
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("refused file exists: %v", err)
	}
	if err := put(t, p, "x", PutOptions{Mode: 0o4755, AllowSetID: true}); err != nil {
		t.Fatalf("with AllowSetID: %v", err)
	}
	st, _ := os.Stat(p)
	if st.Mode()&os.ModeSetuid == 0 || st.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want setuid 0755", st.Mode())
	}
	if err := put(t, p, "x", PutOptions{Mode: 0o1755}); err != nil {
		t.Errorf("sticky bit alone: %v", err)
	}
}

func TestPutFileParentMode(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	os.Mkdir(env, 0o777)
	os.Chmod(env, 0o777)
	if err := put(t, filepath.Join(env, "herd-a.env"), "A=1\n", PutOptions{Mode: 0o600, ParentMode: 0o700}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(env)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("env dir mode = %v, want 0700", st.Mode())
	}
	fresh := filepath.Join(dir, "fresh", "herd-b.env")
	if err := put(t, fresh, "", PutOptions{Mode: 0o600, ParentMode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(fresh)); st.Mode().Perm() != 0o700 {
		t.Errorf("created dir mode = %v, want 0700", st.Mode())
	}
}

func TestRemoveFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.Mkdir(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "keep"), []byte("k"), 0o644)
	pod := filepath.Join(dir, "pod")
	os.Mkdir(pod, 0o777)
	os.Symlink(victim, filepath.Join(pod, "d"))
	if err := RemoveFile(filepath.Join(pod, "d", "keep")); !errors.Is(err, ErrRefused) {
		t.Errorf("RemoveFile through a link = %v, want ErrRefused", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("victim removed: %v", err)
	}
	// A final link is removed itself.
	if err := RemoveFile(filepath.Join(pod, "d")); err != nil {
		t.Fatalf("RemoveFile of a link: %v", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("link target gone: %v", err)
	}
	for _, p := range []string{filepath.Join(pod, "missing"), filepath.Join(pod, "no", "such", "f")} {
		if err := RemoveFile(p); err != nil {
			t.Errorf("RemoveFile(%s) = %v, want nil for a missing path", p, err)
		}
	}
	if err := RemoveFile(victim); !errors.Is(err, ErrRefused) {
		t.Errorf("RemoveFile(dir) = %v, want ErrRefused", err)
	}
}

func TestBadPaths(t *testing.T) {
	for _, p := range []string{"", "rel/x", "/a/../b", "/", "/a//b", "/a/"} {
		if err := put(t, p, "", PutOptions{Mode: 0o644}); !errors.Is(err, ErrRefused) {
			t.Errorf("PutFile(%q) = %v, want ErrRefused", p, err)
		}
		if err := RemoveFile(p); !errors.Is(err, ErrRefused) {
			t.Errorf("RemoveFile(%q) = %v, want ErrRefused", p, err)
		}
	}
}

func TestMainCommand(t *testing.T) {
	dir := t.TempDir()
	staged := filepath.Join(dir, "staged")
	os.WriteFile(staged, []byte("hello"), 0o600)
	target := filepath.Join(dir, "out", "f")
	var stderr bytes.Buffer
	if rc := Main([]string{"put-file", "-mode", "0640", "-from", staged, target}, &stderr); rc != 0 {
		t.Fatalf("put-file exit %d: %s", rc, stderr.String())
	}
	if b, _ := os.ReadFile(target); string(b) != "hello" {
		t.Errorf("target = %q", b)
	}
	if _, err := os.Lstat(staged); !os.IsNotExist(err) {
		t.Errorf("staged file left behind: %v", err)
	}
	os.Symlink(dir, filepath.Join(dir, "ln"))
	os.WriteFile(staged, []byte("x"), 0o600)
	stderr.Reset()
	if rc := Main([]string{"put-file", "-from", staged, filepath.Join(dir, "ln", "f")}, &stderr); rc != RefusedExit {
		t.Errorf("put-file through a link: exit %d (%s), want %d", rc, stderr.String(), RefusedExit)
	}
	if rc := Main([]string{"rm-file", target}, &stderr); rc != 0 {
		t.Errorf("rm-file exit %d: %s", rc, stderr.String())
	}
	if rc := Main([]string{"frobnicate"}, &stderr); rc != 2 {
		t.Errorf("unknown subcommand exit %d, want 2", rc)
	}
}

func TestPutFileMaxSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := put(t, p, "old", PutOptions{Mode: 0o644}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if err := put(t, p, "12345", PutOptions{Mode: 0o644, MaxSize: 4}); err == nil {
		t.Fatal("PutFile of 5 bytes with MaxSize 4 succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("content after a refused write = %q, want old", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only f (no temporary left)", len(ents))
	}
	if err := put(t, p, "1234", PutOptions{Mode: 0o644, MaxSize: 4}); err != nil {
		t.Fatalf("PutFile of 4 bytes with MaxSize 4: %v", err)
	}
}
