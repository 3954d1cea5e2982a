//go:build !unix

package kindtest

import "net"

// reserveClosed returns a loopback port that was free a moment ago; on
// this platform nothing keeps another socket from taking it later.
func reserveClosed() (addr string, release func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	return addr, func() {}, nil
}
