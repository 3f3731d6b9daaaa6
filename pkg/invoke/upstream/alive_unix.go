//go:build unix

package upstream

import (
	"net"
	"syscall"
)

// alive tells whether an idle connection is still open: a peek that does
// not wait finds nothing to read on an open one, and end-of-stream (or an
// error) on one the server closed. net/http learns the same from the read
// its per-connection goroutine keeps pending; here it costs one system call
// when the connection is taken.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := true
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK || rerr == syscall.EINTR:
			// Nothing to read: open and quiet, as an idle connection is.
		case rerr != nil || n == 0:
			open = false // closed or reset by the server
		default:
			// Bytes nobody asked for: the connection is out of step.
			open = false
		}
		return true
	})
	return err == nil && open
}
