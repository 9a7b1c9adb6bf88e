package sshexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// PutFileOptions tunes PutFile.
type PutFileOptions struct {
	// MkdirAll creates missing parent directories (mode 0755 less the
	// server's umask). Without it the parent must exist.
	MkdirAll bool
}

// PutFile writes content to path on node atomically over SFTP: it writes
// path.herd-tmp-<random> (created exclusively, chmod'ed to mode before any
// byte is written, fsync'ed when the server supports fsync@openssh.com) and
// renames it over path with posix-rename@openssh.com. Readers see the old
// file or the new one, never a mix. path must be absolute and clean; mode
// holds permission bits only. At most one opts is used.
func (e *Executor) PutFile(ctx context.Context, node, p string, content []byte, mode os.FileMode, opts ...PutFileOptions) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if mode&^os.ModePerm != 0 {
		return fmt.Errorf("%w: mode %v for %s: only permission bits are allowed", ErrInvalidArgument, mode, p)
	}
	var opt PutFileOptions
	if len(opts) > 0 {
		opt = opts[0]
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("sshexec: temp name: %w", err)
	}
	tmp := p + ".herd-tmp-" + hex.EncodeToString(rnd[:])
	return e.withSFTP(ctx, node, func(sc *sftp.Client) error {
		if _, ok := sc.HasExtension("posix-rename@openssh.com"); !ok {
			return fmt.Errorf("%w: node %s: posix-rename@openssh.com (needed to replace %s atomically)", ErrUnsupported, node, p)
		}
		if opt.MkdirAll {
			if err := sc.MkdirAll(path.Dir(p)); err != nil {
				return fmt.Errorf("sshexec: node %s: mkdir -p %s: %w", node, path.Dir(p), err)
			}
		}
		if err := writeTemp(sc, tmp, content, mode); err != nil {
			sc.Remove(tmp)
			return fmt.Errorf("sshexec: node %s: write %s: %w", node, p, err)
		}
		if err := sc.PosixRename(tmp, p); err != nil {
			sc.Remove(tmp)
			return fmt.Errorf("sshexec: node %s: rename %s over %s: %w", node, tmp, p, err)
		}
		return nil
	})
}

func writeTemp(sc *sftp.Client, tmp string, content []byte, mode os.FileMode) error {
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("chmod %v: %w", mode, err)
	}
	if n, err := f.Write(content); err != nil || n != len(content) {
		f.Close()
		if err == nil {
			err = io.ErrShortWrite
		}
		return err
	}
	if v, ok := sc.HasExtension("fsync@openssh.com"); ok && v == "1" {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync: %w", err)
		}
	}
	return f.Close()
}

// Remove deletes path on node. A path that does not exist is not an error.
func (e *Executor) Remove(ctx context.Context, node, p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	return e.withSFTP(ctx, node, func(sc *sftp.Client) error {
		if err := sc.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sshexec: node %s: remove %s: %w", node, p, err)
		}
		return nil
	})
}

// ReadFile returns the content of path on node. A missing file is an
// error matching os.ErrNotExist; one over Config.MaxReadFileBytes is
// ErrFileTooLarge.
func (e *Executor) ReadFile(ctx context.Context, node, p string) ([]byte, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	var out []byte
	err := e.withSFTP(ctx, node, func(sc *sftp.Client) error {
		f, err := sc.Open(p)
		if err != nil {
			return fmt.Errorf("sshexec: node %s: read %s: %w", node, p, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, e.cfg.MaxReadFileBytes+1))
		if err != nil {
			return fmt.Errorf("sshexec: node %s: read %s: %w", node, p, err)
		}
		if int64(len(b)) > e.cfg.MaxReadFileBytes {
			return fmt.Errorf("%w: node %s: %s is larger than %d bytes", ErrFileTooLarge, node, p, e.cfg.MaxReadFileBytes)
		}
		out = b
		return nil
	})
	return out, err
}

// checkPath accepts absolute, clean paths other than "/".
func checkPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: path %q is not absolute", ErrInvalidArgument, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: path %q is not clean (want %q)", ErrInvalidArgument, p, path.Clean(p))
	case p == "/":
		return fmt.Errorf("%w: path is /", ErrInvalidArgument)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: path %q contains a NUL byte", ErrInvalidArgument, p)
	}
	return nil
}

// withSFTP runs fn with node's SFTP client. The client is created on first
// use and shared by every file operation on the connection; a connection
// found broken when creating it is replaced once. If ctx ends while fn runs,
// the SFTP client is closed (failing fn and any concurrent file operation on
// it, which is what makes fn stop), and a new one is made next time.
func (e *Executor) withSFTP(ctx context.Context, name string, fn func(*sftp.Client) error) error {
	n, err := e.node(name)
	if err != nil {
		return err
	}
	var sc *sftp.Client
	var c *conn
	for attempt := 0; ; attempt++ {
		c, err = e.connect(ctx, n)
		if err != nil {
			return err
		}
		ch := make(chan error, 1)
		go func() {
			var err error
			sc, err = c.sftpClient()
			ch <- err
		}()
		select {
		case err = <-ch:
		case <-ctx.Done():
			return ctx.Err() // creation goes on harmlessly; its result is cached on c
		}
		if err == nil {
			break
		}
		if attempt == 0 && brokenConn(c, err) {
			c.close()
			continue
		}
		return fmt.Errorf("sshexec: node %s: start sftp: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- fn(sc) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		c.dropSFTP(sc)
		<-done
		return ctx.Err()
	}
}

// sftpClient returns c's SFTP client, starting the subsystem on first use.
func (c *conn) sftpClient() (*sftp.Client, error) {
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	if !c.alive() {
		return nil, fmt.Errorf("connection to %s closed: %w", c.node, net.ErrClosed)
	}
	if c.sftp != nil {
		return c.sftp, nil
	}
	if c.sftpCommand != "" {
		return c.sftpOverExec()
	}
	sc, err := sftp.NewClient(c.client)
	if err != nil {
		return nil, err
	}
	c.sftp = sc
	go func() {
		sc.Wait() // the subsystem ended (server side or Close): start afresh next time
		c.dropSFTP(sc)
	}()
	return sc, nil
}

// sftpOverExec starts c.sftpCommand in an exec session and speaks SFTP on
// its stdin and stdout (Config.SFTPCommand). c.sftpMu is held.
func (c *conn) sftpOverExec() (*sftp.Client, error) {
	s, stdin, stdout, stderr, err := startPiped(c.client, c.sftpCommand)
	if err != nil {
		return nil, err
	}
	sc, err := sftp.NewClientPipe(stdout, stdin)
	if err != nil {
		s.Close()
		s.Wait()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("sftp over %q: %v: %s", c.sftpCommand, err, msg)
		}
		return nil, fmt.Errorf("sftp over %q: %w", c.sftpCommand, err)
	}
	c.sftp = sc
	go func() {
		sc.Wait() // the server ended (its side or Close): start afresh next time
		c.dropSFTP(sc)
		s.Close()
	}()
	return sc, nil
}

// startPiped starts command in a new exec session on client and returns
// the session with its stdin and stdout, and the first 4 KiB of its
// stderr (safe to read while the session runs).
func startPiped(client *ssh.Client, command string) (*ssh.Session, io.WriteCloser, io.Reader, *limitedBuffer, error) {
	s, err := client.NewSession()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	stderr := &limitedBuffer{max: 4096}
	s.Stderr = stderr
	if err := s.Start(command); err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	return s, stdin, stdout, stderr, nil
}

// limitedBuffer keeps the first max bytes written to it and drops the
// rest (a misbehaving remote cannot grow it).
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.max - len(b.buf); n > 0 {
		b.buf = append(b.buf, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// ReadFrom reads r to its end as Write would take it. The session's
// stderr copy (io.Copy in x/crypto/ssh) then reads through this small
// buffer instead of allocating its own 32 KB one, which it would hold for
// as long as the session lives: one per board on the leader, for a stream
// that is almost always empty.
func (b *limitedBuffer) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, 512)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		b.Write(buf[:m])
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// dropSFTP closes sc and forgets it if it is still c's client.
func (c *conn) dropSFTP(sc *sftp.Client) {
	c.sftpMu.Lock()
	if c.sftp == sc {
		c.sftp = nil
	}
	c.sftpMu.Unlock()
	sc.Close()
}
