package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

const (
	serverBin = "redis-server"
	cliBin    = "redis-cli"

	// requireEnv makes a missing redis-server fail tests instead of skipping them.
	requireEnv = "LOCK_REQUIRE_REDIS"
)

// ErrNoTLS is returned by [StartTLSServer] and [TLSAvailable] when
// redis-server was built without TLS support.
var ErrNoTLS = errors.New("redistest: redis-server built without TLS support")

// Available reports whether redis-server is on PATH. The error wraps
// [exec.ErrNotFound] when it is not. It is safe for concurrent use.
func Available() error {
	return lookPath(serverBin)
}

// cliAvailable reports whether redis-cli, needed to create clusters, is on PATH.
func cliAvailable() error {
	return lookPath(cliBin)
}

func lookPath(bin string) error {
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("redistest: %s not found on PATH: %w", bin, err)
	}
	return nil
}

// Require skips t when redis-server is not on PATH, or fails it when the
// environment sets LOCK_REQUIRE_REDIS=1, as CI does.
func Require(t testing.TB) {
	t.Helper()
	require(t, serverBin, Available)
}

// require skips or fails t when check reports bin missing.
func require(t testing.TB, bin string, check func() error) {
	t.Helper()
	if check() == nil {
		return
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s not found on PATH and %s=1: install Debian's redis-server package", bin, requireEnv)
	}
	t.Skipf("%s not found on PATH; skipping real-Redis test (set %s=1 to make this fail)", bin, requireEnv)
}
