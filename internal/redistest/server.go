package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// startAttempts bounds the starts on new free ports after a bind race.
const startAttempts = 5

// Server is one redis-server process that this package started, on a
// loopback port in its own directory. Its methods are safe for concurrent
// use. Signals go to the pid of the process it started, never to a port or
// a process name.
type Server struct {
	ep           endpoint
	port         int
	dir          string
	ownDir       bool
	argv         []string
	readyTimeout time.Duration

	mu      sync.Mutex
	proc    *proc // the current or last process
	stopped bool  // Stop has run
}

// StartServer starts redis-server as cfg describes and waits until it
// answers. It returns an error wrapping [exec.ErrNotFound] when redis-server
// is not on PATH, and otherwise an error that ends with the tail of the
// server's log. The caller must call [Server.Stop]. It starts one goroutine
// per process, which ends when the process exits.
func StartServer(cfg Config) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir, owned, err := cfg.makeDir()
	if err != nil {
		return nil, err
	}
	s, err := launch(&cfg, dir)
	if err != nil {
		if owned {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	s.ownDir = owned
	return s, nil
}

// launch starts the process in dir, on new free ports after a bind race
// when cfg.Port is zero.
func launch(cfg *Config, dir string) (*Server, error) {
	if cfg.tlsFiles != nil {
		if err := cfg.tlsFiles.write(dir); err != nil {
			return nil, err
		}
	}
	var last error
	for range startAttempts {
		port, bus, err := cfg.ports()
		if err != nil {
			return nil, err
		}
		argv, err := cfg.argv(dir, port, bus)
		if err != nil {
			return nil, err
		}
		for _, name := range []string{logName, stdoutName} {
			_ = os.Remove(filepath.Join(dir, name)) // the tail must show this start only
		}
		p, err := spawn(dir, argv)
		if err != nil {
			return nil, err
		}
		ep := endpoint{addr: hostPort(port), tls: cfg.tlsClient, password: cfg.Password}
		err = waitReady(p, ep, cfg.readyTimeout())
		if err == nil {
			return &Server{ep: ep, port: port, dir: dir, argv: argv,
				readyTimeout: cfg.readyTimeout(), proc: p}, nil
		}
		p.kill()
		tail := logTail(dir, 20)
		last = fmt.Errorf("redistest: start redis-server on %s: %w\n%s", ep.addr, err, tail)
		if cfg.Port != 0 || !(errors.Is(err, errForeign) || strings.Contains(tail, "Address already in use")) {
			return nil, last
		}
	}
	return nil, last
}

// ports returns the port to listen on and, for cluster nodes, a bus port.
func (cfg *Config) ports() (port, bus int, err error) {
	port = cfg.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return 0, 0, err
		}
	}
	for cfg.clusterBus && (bus == 0 || bus == port) {
		if bus, err = FreePort(); err != nil {
			return 0, 0, err
		}
	}
	return port, bus, nil
}

func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.ep.addr }

// Port returns the port the server listens on: the TLS port of a TLS server.
// It stays the same across [Server.Restart].
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory, which holds redis.log.
func (s *Server) Dir() string { return s.dir }

// Pid returns the process id of the current process, or of the last one
// if it has exited.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.pid()
}

// Running reports whether the process is alive (paused counts as alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.stopped && !s.proc.exited()
}

// LogTail returns the last n lines of the server's log, prefixed by
// anything the process wrote to stdout or stderr. It returns "" once Stop
// has removed a temporary directory.
func (s *Server) LogTail(n int) string { return logTail(s.dir, n) }

// Options returns new client options for the server: its address,
// password and TLS config. Callers may change them before redis.NewClient.
func (s *Server) Options() *redis.Options {
	o := &redis.Options{Addr: s.ep.addr, Password: s.ep.password}
	if s.ep.tls != nil {
		o.TLSConfig = s.ep.tls.Clone()
	}
	return o
}

// NewClient returns a new client for the server. The caller closes it.
func (s *Server) NewClient() *redis.Client { return redis.NewClient(s.Options()) }

// adminOptions returns options with short timeouts and no retries, for
// the polling this package does.
func (s *Server) adminOptions() *redis.Options {
	o := s.Options()
	o.DialTimeout = time.Second
	o.ReadTimeout = 2 * time.Second
	o.WriteTimeout = time.Second
	o.MaxRetries = -1
	o.PoolSize = 2
	return o
}

// adminClient returns a client made with adminOptions. The caller closes it.
func (s *Server) adminClient() *redis.Client { return redis.NewClient(s.adminOptions()) }

// logTail returns stdout.log's content and the last n lines of redis.log in dir.
func logTail(dir string, n int) string {
	var b strings.Builder
	if out, err := os.ReadFile(filepath.Join(dir, stdoutName)); err == nil && len(out) > 0 {
		b.WriteString("--- stdout/stderr ---\n")
		b.Write(out)
	}
	log, err := os.ReadFile(filepath.Join(dir, logName))
	if err != nil {
		return b.String()
	}
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintf(&b, "--- tail of %s ---\n%s\n", filepath.Join(dir, logName), strings.Join(lines, "\n"))
	return b.String()
}
