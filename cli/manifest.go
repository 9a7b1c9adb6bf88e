package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/herd-dev/herd/api"
)

// stdinName is the file name manifests read from stdin get in errors.
const stdinName = "<stdin>"

// manifestObject is one object decoded from a manifest.
type manifestObject struct {
	Object api.Object
}

// manifestFiles expands -f arguments: a file stays as it is, a folder
// becomes its *.toml files (not recursive) in name order, "-" is stdin.
func manifestFiles(paths []string) ([]string, error) {
	var out []string
	stdin := false
	for _, p := range paths {
		if p == "-" {
			if stdin {
				return nil, usagef("-f -: stdin can be read only once")
			}
			stdin = true
			out = append(out, p)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range entries { // ReadDir sorts by name
			if !strings.HasSuffix(e.Name(), ".toml") || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			full := filepath.Join(p, e.Name())
			if fi, err := os.Stat(full); err != nil || fi.IsDir() {
				continue
			}
			out = append(out, full)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: folder has no *.toml files", p)
		}
	}
	return out, nil
}

// loadManifests reads every manifest named by paths (see manifestFiles) and
// decodes them together, so that an object declared in two files is an
// error. It reports every problem of every file, one per line (multiError).
func loadManifests(paths []string, stdin io.Reader, decode func([]api.ManifestFile) ([]api.Object, error)) ([]manifestObject, error) {
	if len(paths) == 0 {
		return nil, usagef("no manifests: give -f FILE, -f FOLDER or -f -")
	}
	names, err := manifestFiles(paths)
	if err != nil {
		return nil, err
	}
	var (
		files []api.ManifestFile
		errs  multiError
	)
	for _, f := range names {
		var data []byte
		name := f
		if f == "-" {
			name = stdinName
			data, err = readManifest(name, stdin)
		} else {
			data, err = readManifestFile(f)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, api.ManifestFile{Name: name, Data: data})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	objs, err := decode(files)
	if err != nil {
		var me api.ManifestErrors
		if errors.As(err, &me) {
			for _, e := range me {
				errs = append(errs, e)
			}
			return nil, errs
		}
		return nil, err
	}
	var out []manifestObject
	seen := map[string]bool{}
	for _, o := range objs {
		key := ref(o.GetKind(), o.GetMeta().Name)
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s is declared twice", key))
			continue
		}
		seen[key] = true
		out = append(out, manifestObject{Object: o})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no objects in %s", strings.Join(paths, ", "))
	}
	return out, nil
}

// readManifestFile reads the manifest at path, refusing one over
// api.MaxManifestSize without reading it all.
func readManifestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readManifest(path, f)
}

// readManifest reads at most api.MaxManifestSize bytes from r; a longer
// manifest is an error at name:1:1, before anything decodes it.
func readManifest(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, api.MaxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > api.MaxManifestSize {
		return nil, &api.ManifestError{File: name, Line: 1, Col: 1,
			Message: fmt.Sprintf("manifest is over the %d-byte (1 MiB) limit: split it into several files", api.MaxManifestSize)}
	}
	return data, nil
}

// validateManifests runs local validation over objs and returns every
// problem, each naming its object.
func validateManifests(objs []manifestObject, validate func(api.Object) []api.FieldError) error {
	var all fieldErrors
	for _, m := range objs {
		for _, fe := range validate(m.Object) {
			if fe.Object == "" {
				fe.Object = objectName(m.Object)
			}
			all = append(all, fe)
		}
	}
	if len(all) > 0 {
		return all
	}
	return nil
}

// objectsOf returns the objects of ms.
func objectsOf(ms []manifestObject) []api.Object {
	out := make([]api.Object, len(ms))
	for i, m := range ms {
		out[i] = m.Object
	}
	return out
}
