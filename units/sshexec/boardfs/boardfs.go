package boardfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRefused is matched (errors.Is) by every error for a path or mode this
// package will not write or remove: a symbolic link (or anything that is
// not a directory) where a directory is expected, a final path that is a
// directory, a path that is not absolute and clean, or a setuid/setgid
// mode without AllowSetID. Nothing was written or removed.
var ErrRefused = errors.New("boardfs: refused")

// RefusedExit is the exit status of `herd board put-file` and `rm-file`
// for an ErrRefused error; other failures exit 1, usage errors 2.
const RefusedExit = 3

// MaxContent bounds what PutFile copies from its source (the API bounds a
// template well below this).
const MaxContent = 8 << 20

// PutOptions tunes PutFile.
type PutOptions struct {
	// Mode is the file's mode: permission bits, plus setuid (04000),
	// setgid (02000) and sticky (01000) as octal bits.
	Mode uint32
	// AllowSetID permits the 04000 and 02000 bits; without it they are
	// refused.
	AllowSetID bool
	// ParentMode, when not 0, is the mode of the file's own directory: it is
	// created with it, and an existing one is chown'ed to root and
	// chmod'ed to it (for root-only directories such as herd's env
	// directory). Other missing ancestors are created 0755.
	ParentMode uint32
	// MaxSize, when not 0, bounds what PutFile copies from its source
	// instead of MaxContent (artifacts, which are streamed from a file).
	MaxSize int64
}

func refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// checkPath accepts absolute, clean paths other than "/" without NUL.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" || strings.IndexByte(p, 0) >= 0 {
		return refusedf("path %q must be absolute and clean, and not /", p)
	}
	return nil
}

// openParent walks the directories of p from "/" one component at a time,
// each opened relative to the previous one with O_NOFOLLOW|O_DIRECTORY, so
// no symbolic link is followed in any component and a component swapped
// for a link while we walk is refused, never followed. Missing directories
// are created (0755, or parentMode for the last one) when create is set;
// otherwise a missing one gives os.ErrNotExist. It returns the open
// directory that holds p's last component, and that component.
func openParent(p string, create bool, parentMode uint32) (dirfd int, name string, err error) {
	if err := checkPath(p); err != nil {
		return -1, "", err
	}
	parts := strings.Split(p[1:], "/")
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open /: %w", err)
	}
	walked := ""
	for i, c := range parts[:len(parts)-1] {
		walked += "/" + c
		last := i == len(parts)-2
		mode := uint32(0o755)
		if last && parentMode != 0 {
			mode = parentMode
		}
		next, err := openDir(fd, c)
		if errors.Is(err, unix.ENOENT) && create {
			if err := unix.Mkdirat(fd, c, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, "", fmt.Errorf("mkdir %s: %w", walked, err)
			}
			next, err = openDir(fd, c)
		}
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ENOENT):
			return -1, "", fmt.Errorf("%s: %w", walked, os.ErrNotExist)
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return -1, "", refusedf("%s is a symbolic link or not a directory", walked)
		case err != nil:
			return -1, "", fmt.Errorf("open %s: %w", walked, err)
		}
		fd = next
		if last && parentMode != 0 {
			if err := unix.Fchown(fd, 0, 0); err != nil {
				unix.Close(fd)
				return -1, "", fmt.Errorf("chown %s: %w", walked, err)
			}
			if err := unix.Fchmod(fd, parentMode); err != nil {
				unix.Close(fd)
				return -1, "", fmt.Errorf("chmod %s: %w", walked, err)
			}
		}
	}
	return fd, parts[len(parts)-1], nil
}

func openDir(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// PutFile writes the bytes of src (at most MaxContent, or opt.MaxSize) to
// p atomically, copying them as they come:
// into a new temporary file in p's directory (created exclusively with
// O_NOFOLLOW, chmod'ed before any byte is written, fsync'ed), renamed over
// p's last component relative to the directory descriptor. No symbolic
// link is followed in any component of p: a link where a directory is
// expected is refused (ErrRefused) and nothing is written; a link at p
// itself is replaced, not followed. Missing directories are created.
func PutFile(p string, src io.Reader, opt PutOptions) error {
	if opt.Mode&^0o7777 != 0 {
		return refusedf("mode %o for %s is not a permission mode", opt.Mode, p)
	}
	if opt.Mode&0o6000 != 0 && !opt.AllowSetID {
		return refusedf("mode %04o for %s has setuid/setgid bits and the template does not allow them (allow_setid)", opt.Mode, p)
	}
	limit := int64(MaxContent)
	if opt.MaxSize > 0 {
		limit = opt.MaxSize
	}
	dirfd, name, err := openParent(p, true, opt.ParentMode)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return refusedf("%s is a directory", p)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := "." + name + ".herd-tmp-" + hex.EncodeToString(rnd[:])
	if len(tmp) > 255 {
		tmp = ".herd-tmp-" + hex.EncodeToString(rnd[:])
	}
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), path.Join(path.Dir(p), tmp))
	fail := func(err error) error {
		f.Close()
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", p, err)
	}
	// Fchmod applies the setuid/setgid/sticky bits that open's mode and the
	// umask would drop.
	if err := unix.Fchmod(fd, opt.Mode); err != nil {
		return fail(err)
	}
	n, err := io.Copy(f, io.LimitReader(src, limit+1))
	if err != nil {
		return fail(err)
	}
	if n > limit {
		return fail(fmt.Errorf("content is over %d bytes", limit))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("rename into %s: %w", p, err)
	}
	unix.Fsync(dirfd)
	return nil
}

// RemoveFile removes p without following symbolic links in any component:
// a link at p itself is removed (not its target); a link where a directory
// is expected is refused (ErrRefused) and nothing is removed. A missing p,
// or a missing directory on the way, is not an error; a directory at p is
// refused.
func RemoveFile(p string) error {
	dirfd, name, err := openParent(p, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	err = unix.Unlinkat(dirfd, name, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR):
		return refusedf("%s is a directory", p)
	}
	return fmt.Errorf("remove %s: %w", p, err)
}
