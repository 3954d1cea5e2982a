package redistest

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Files a server keeps in its directory.
const (
	logName      = "redis.log"     // the server's log file
	stdoutName   = "stdout.log"    // stdout and stderr: errors before the log opens
	sentinelConf = "sentinel.conf" // a sentinel's config, rewritten by the sentinel
)

// Config describes one redis-server process for [StartServer] and [Start].
// The zero Config starts a plain server on a free port in a new temporary
// directory. Every server runs with
//
//	--bind 127.0.0.1 --port N --save '' --appendonly no --dir DIR
//	--daemonize no --logfile DIR/redis.log --repl-diskless-sync-delay 0
//
// followed by Args. The last one makes a master send a new replica its data
// at once rather than after 5s.
type Config struct {
	// Args are extra redis-server arguments, such as
	// []string{"--maxmemory", "10mb"}. They come last, so they override the
	// defaults above.
	Args []string
	// Port is the port to listen on (the TLS port of a TLS server). Zero
	// picks a free port and, if another process takes it first, retries a
	// few times on a new one.
	Port int
	// Dir is the server's working directory. Empty means a new temporary
	// directory that Stop removes; a given Dir is kept. Its redis.log is
	// replaced on start.
	Dir string
	// Password, when not empty, is set with --requirepass and used by the
	// clients the Server makes and by the readiness check.
	Password string
	// ReadyTimeout bounds the wait for the server to answer after each
	// start or restart. Zero means 5s.
	ReadyTimeout time.Duration

	// clusterBus, when set, picks a free cluster bus port too (--cluster-port),
	// since port+10000 may lie beyond 65535.
	clusterBus bool
	// sentinel, when not empty, holds "sentinel ..." directives: the process
	// runs as a sentinel from a config file written to its directory.
	sentinel string
	// tlsFiles, when set, are written to the directory and served on the
	// TLS port; tlsClient is what the readiness check and clients use.
	tlsFiles  *tlsFiles
	tlsClient *tls.Config
}

func (cfg *Config) readyTimeout() time.Duration {
	if cfg.ReadyTimeout > 0 {
		return cfg.ReadyTimeout
	}
	return defaultReadyTimeout
}

// makeDir returns cfg.Dir, creating it if needed, or a new temporary
// directory; owned reports whether the caller must remove it.
func (cfg *Config) makeDir() (dir string, owned bool, err error) {
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return "", false, fmt.Errorf("redistest: create dir: %w", err)
		}
		abs, err := filepath.Abs(cfg.Dir)
		if err != nil {
			return "", false, fmt.Errorf("redistest: dir: %w", err)
		}
		return abs, false, nil
	}
	dir, err = os.MkdirTemp("", "redistest-")
	if err != nil {
		return "", false, fmt.Errorf("redistest: create temp dir: %w", err)
	}
	return dir, true, nil
}

// argv returns the redis-server arguments for one start on port (and bus,
// the cluster bus port, when not zero), writing any config file to dir.
func (cfg *Config) argv(dir string, port, bus int) ([]string, error) {
	logFile := filepath.Join(dir, logName)
	if cfg.sentinel != "" {
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir \"%s\"\nlogfile \"%s\"\n%s",
			port, dir, logFile, cfg.sentinel)
		path := filepath.Join(dir, sentinelConf)
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("redistest: write sentinel config: %w", err)
		}
		return append([]string{path, "--sentinel"}, cfg.Args...), nil
	}
	a := []string{"--bind", "127.0.0.1"}
	if cfg.tlsFiles != nil {
		a = append(a, "--port", "0", "--tls-port", strconv.Itoa(port))
		a = append(a, cfg.tlsFiles.args(dir)...)
	} else {
		a = append(a, "--port", strconv.Itoa(port))
	}
	a = append(a, "--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", logFile,
		// Replicas attach at once instead of after the default 5s wait for others.
		"--repl-diskless-sync-delay", "0")
	if cfg.Password != "" {
		a = append(a, "--requirepass", cfg.Password)
	}
	if bus != 0 {
		a = append(a, "--cluster-port", strconv.Itoa(bus))
	}
	return append(a, cfg.Args...), nil
}
