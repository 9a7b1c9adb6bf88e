package svcproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// copyBuf is the size of the buffer of one direction of a connection.
const copyBuf = 32 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// pipeState is what both directions of one forwarded connection share:
// the instant of the last byte either way, which moves both directions'
// deadlines.
type pipeState struct {
	last atomic.Int64 // unix nanoseconds
	idle time.Duration
}

func (ps *pipeState) touch() { ps.last.Store(time.Now().UnixNano()) }

// pipe copies client to up and up to client until both directions are
// done: a FIN one way is passed on as a CloseWrite and the other way runs
// on; an error either way, or no byte either way for idle, resets both.
// It returns once both directions have ended; the caller closes the
// connections.
func pipe(client, up net.Conn, idle time.Duration, row *counters, wg *sync.WaitGroup) {
	ps := &pipeState{idle: idle}
	ps.touch()
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- ps.copy(client, up, &row.bytesOut)
	}()
	ps.copy(up, client, &row.bytesIn)
	<-errc
}

// copy copies src to dst until src's EOF (then half-closes dst) or an
// error (then resets both connections, which ends the other direction);
// deadlines are set once and moved only when they pass while the
// other direction is busy, so a busy connection costs no timer work.
func (ps *pipeState) copy(dst, src net.Conn, n *atomic.Uint64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	deadline := time.Now().Add(ps.idle)
	src.SetReadDeadline(deadline)
	dst.SetWriteDeadline(deadline)
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			ps.touch()
			if werr := ps.write(dst, buf[:nr]); werr != nil {
				abort(dst, src)
				return werr
			}
			n.Add(uint64(nr))
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			closeWrite(dst)
			return nil
		case ps.extend(err, src.SetReadDeadline):
		default:
			abort(dst, src)
			return err
		}
	}
}

// write writes all of b to dst, waiting while the connection is not idle.
func (ps *pipeState) write(dst net.Conn, b []byte) error {
	for len(b) > 0 {
		nw, err := dst.Write(b)
		b = b[nw:]
		if nw > 0 {
			ps.touch()
		}
		if err != nil && !ps.extend(err, dst.SetWriteDeadline) {
			return err
		}
	}
	return nil
}

// extend handles a passed deadline: if a byte moved either way within
// idle, it moves the deadline to idle after that byte and reports true.
func (ps *pipeState) extend(err error, set func(time.Time) error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	end := time.Unix(0, ps.last.Load()).Add(ps.idle)
	if !time.Now().Before(end) {
		return false
	}
	set(end)
	return true
}

// closeWrite passes a FIN on.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// abort closes both connections with a reset, so that neither peer takes
// the end of a broken or idle connection for a complete reply.
func abort(a, b net.Conn) {
	for _, c := range []net.Conn{a, b} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}
