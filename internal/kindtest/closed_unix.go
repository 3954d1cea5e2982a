//go:build unix

package kindtest

import (
	"fmt"
	"net"
	"syscall"
)

// reserveClosed binds a TCP socket to a free loopback port without
// listening on it: a dial to the port is refused, and, the socket being
// bound without SO_REUSEADDR, no other socket can bind the port until
// release closes it.
func reserveClosed() (addr string, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), func() { syscall.Close(fd) }, nil
}
