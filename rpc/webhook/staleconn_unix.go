//go:build unix

package webhook

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed peeks at conn's socket without blocking and without consuming
// anything: true when the peer closed it (EOF, a reset) or left unread
// bytes on an idle connection; false when the socket is quiet or cannot be
// inspected.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing pending, the connection is fine. Anything else
		// is a close: no error means EOF (0 bytes) or bytes nobody asked
		// for; an error is a reset or the like.
		closed = !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EWOULDBLOCK) && !errors.Is(rerr, syscall.EINTR)
		return true // never wait for readiness: this is a peek
	})
	return closed || err != nil
}
