//go:build unix

package upstream

import (
	"net"
	"syscall"
)

// prober tells whether an idle connection is still open: a peek that does
// not wait finds nothing to read on an open one, and end-of-stream (or an
// error) on one the server closed. net/http learns the same from the read
// its per-connection goroutine keeps pending; here it costs one system call
// when the connection is taken. It is made once per connection, so that
// the look itself allocates nothing.
type prober struct {
	rc   syscall.RawConn // nil: cannot look
	peek func(fd uintptr) bool
	open bool
	buf  [1]byte
}

func (p *prober) init(nc net.Conn) {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
		}
	}
	p.peek = p.look
}

func (p *prober) look(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
		p.open = true // nothing to read: open and quiet, as an idle connection is
	case err != nil || n == 0:
		p.open = false // closed or reset by the server
	default:
		p.open = false // bytes nobody asked for: the connection is out of step
	}
	return true
}

func (p *prober) alive() bool {
	if p.rc == nil {
		return true
	}
	p.open = false
	return p.rc.Read(p.peek) == nil && p.open
}
