package redlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentlock/lock/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.DefaultParallel(8)
	goleak.VerifyTestMain(m,
		// go-redis's pool re-dials a dead server from a goroutine of its own
		// that notices the closed client only after its one-second sleep.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	)
}
