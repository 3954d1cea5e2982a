package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// defaultReadyTimeout bounds how long a start waits for the server to answer.
const defaultReadyTimeout = 5 * time.Second

var (
	// errExited means the process exited before it answered.
	errExited = errors.New("redistest: redis-server exited before it was ready")
	// errForeign means another process answered on our port.
	errForeign = errors.New("redistest: another process answers on the port")
)

// endpoint is how to reach a server: address, TLS and password.
type endpoint struct {
	addr     string
	tls      *tls.Config
	password string
}

// waitReady polls ep until the server reporting p's pid answers. It fails
// early when p exits (errExited) or another process answers (errForeign),
// or after timeout. It speaks raw RESP, so it starts no goroutines.
func waitReady(p *proc, ep endpoint, timeout time.Duration) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%w: %v", errExited, p.err)
		}
		pid, err := probe(ep)
		switch {
		case err == nil && pid == p.pid():
			return nil
		case err == nil:
			return fmt.Errorf("%w: %s has pid %d, want %d", errForeign, ep.addr, pid, p.pid())
		default:
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %s not ready after %v: %w", ep.addr, timeout, last)
		}
		<-tick.C
	}
}

// probe connects to ep, authenticates if needed and returns the process_id
// that INFO server reports.
func probe(ep endpoint) (int, error) {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	var conn net.Conn
	var err error
	if ep.tls != nil {
		conn, err = tls.DialWithDialer(&d, "tcp", ep.addr, ep.tls)
	} else {
		conn, err = d.Dial("tcp", ep.addr)
	}
	if err != nil {
		return 0, fmt.Errorf("redistest: dial %s: %w", ep.addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return 0, fmt.Errorf("redistest: set deadline: %w", err)
	}
	r := bufio.NewReader(conn)
	if ep.password != "" {
		if _, err := roundTrip(conn, r, "AUTH", ep.password); err != nil {
			return 0, err
		}
	}
	info, err := roundTrip(conn, r, "INFO", "server")
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "process_id")
	if !ok {
		return 0, fmt.Errorf("redistest: no process_id in INFO from %s", ep.addr)
	}
	pid, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("redistest: process_id %q: %w", v, err)
	}
	return pid, nil
}

// roundTrip sends one command and reads a simple, integer, error or bulk reply.
func roundTrip(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", fmt.Errorf("redistest: write %s: %w", args[0], err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("redistest: read %s reply: %w", args[0], err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redistest: empty %s reply", args[0])
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redistest: %s: %s", args[0], line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: bad %s bulk reply %q", args[0], line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("redistest: read %s reply: %w", args[0], err)
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unexpected %s reply %q", args[0], line)
}

// infoField returns the value of name in an INFO or CLUSTER INFO reply.
func infoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == name {
			return v, true
		}
	}
	return "", false
}
