package svcview

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/herd-dev/herd/api"
)

// Store is what FollowStore reads: a server's local copy of the state.
type Store interface {
	List(kind api.Kind) ([]api.RawObject, uint64, error)
	Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error)
}

// rewatchDelay is the pause before listing and watching again after the
// store's watch ended or failed.
const rewatchDelay = 500 * time.Millisecond

// FollowStore keeps feed's view equal to the store's services and nodes
// until ctx ends: it lists them, then rebuilds the view after every
// committed change to either kind. It returns ctx's error.
func FollowStore(ctx context.Context, s Store, feed *Feed, log *slog.Logger) error {
	for {
		err := followStoreOnce(ctx, s, feed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Debug("service view: store watch ended; listing again", "err", err)
		t := time.NewTimer(rewatchDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func followStoreOnce(ctx context.Context, s Store, feed *Feed) error {
	rv, err := setFromStore(s, feed)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(ctx, "", rv)
	if err != nil {
		return err
	}
	for ev := range ch {
		if ev.Object.Kind != api.KindService && ev.Object.Kind != api.KindNode {
			continue
		}
		if _, err := setFromStore(s, feed); err != nil {
			return err
		}
	}
	return errors.New("watch closed")
}

// setFromStore lists both kinds and sets the view; it returns the lower
// of the two lists' resource versions, where a watch resumes.
func setFromStore(s Store, feed *Feed) (uint64, error) {
	svcRaws, rv1, err := s.List(api.KindService)
	if err != nil {
		return 0, err
	}
	nodeRaws, rv2, err := s.List(api.KindNode)
	if err != nil {
		return 0, err
	}
	feed.Set(Build(api.FromRawList[*api.Service](api.KindService, svcRaws), api.FromRawList[*api.Node](api.KindNode, nodeRaws)))
	return min(rv1, rv2), nil
}

// FollowFile keeps feed's view equal to the file at path (written by the
// leader's Publisher) until ctx ends. It creates path's directory (0755)
// if missing and watches it with inotify, reading the file whenever it is
// renamed into place or written; a file that cannot be read or decoded
// is logged and the previous view kept. The folder is made 0700 (its
// parents 0755) when missing. It returns ctx's error, or an
// error when inotify cannot be set up.
func FollowFile(ctx context.Context, path string, feed *Feed, log *slog.Logger) error {
	dir, name := filepath.Split(path)
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return fmt.Errorf("svcview: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("svcview: %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("svcview: inotify: %w", err)
	}
	// A non-blocking descriptor goes to Go's poller: Close ends a Read.
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE); err != nil {
		return fmt.Errorf("svcview: inotify watch %s: %w", dir, err)
	}
	go func() { <-ctx.Done(); f.Close() }()
	readFile(path, feed, log)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("svcview: inotify read: %w", err)
		}
		if touches(buf[:n], name) {
			readFile(path, feed, log)
		}
	}
}

// touches reports whether any inotify event in buf names file name (or
// events were lost). An event is struct inotify_event: wd, mask, cookie,
// len (4 bytes each, native order), then len bytes of NUL-padded name.
func touches(buf []byte, name string) bool {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		nameLen := binary.NativeEndian.Uint32(buf[off+12:])
		end := off + unix.SizeofInotifyEvent + int(nameLen)
		if end > len(buf) {
			return true // truncated: read anyway
		}
		raw := buf[off+unix.SizeofInotifyEvent : end]
		for i, c := range raw {
			if c == 0 {
				raw = raw[:i]
				break
			}
		}
		if string(raw) == name || mask&unix.IN_Q_OVERFLOW != 0 {
			return true
		}
		off = end
	}
	return false
}

func readFile(path string, feed *Feed, log *slog.Logger) {
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("service view: cannot read", "path", path, "err", err)
		}
		return
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		log.Warn("service view: cannot read", "path", path, "err", err)
		return
	}
	v, err := Decode(b)
	if err != nil {
		log.Warn("service view: ignored", "path", path, "err", err)
		return
	}
	feed.Set(v)
}
