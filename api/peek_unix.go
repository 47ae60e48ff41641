//go:build linux || darwin || freebsd || netbsd || openbsd

package api

import (
	"errors"
	"net"
	"syscall"
)

// peekNow copies into buf what c has received and not yet been read,
// without reading it (MSG_PEEK) and without waiting (MSG_DONTWAIT): 0
// when nothing has arrived yet. ok is false when c is no socket it can
// ask.
func peekNow(c net.Conn, buf []byte) (n int, ok bool) {
	sc, isSock := c.(syscall.Conn)
	if !isSock {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // once: never wait for more
	}); err != nil {
		return 0, false
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
		return 0, true
	case rerr != nil || n < 0:
		return 0, false
	}
	return n, true
}
