// Package atomicfile writes a file so that a reader, or the next start
// after a crash, sees either the old content or the new, never a torn
// one: a temporary file in the same folder, synced, then renamed over
// the path.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with the permission mode (set on the
// temporary file before any byte is written, so the content is never
// readable under a wider mode). The folder must exist. The temporary file
// is removed when anything fails.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // nothing left to remove after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
