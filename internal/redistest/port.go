package redistest

import (
	"fmt"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago: it
// binds port 0, reads the port the kernel chose and closes the listener.
// Another process may take the port before the caller binds it, so callers
// that start servers retry on a bind failure, as [StartServer] does.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
