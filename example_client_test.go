package lock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentlock/lock"
	"github.com/redis/go-redis/v9"
)

// The go-redis settings recommended for a Client in production, with a
// lock TTL of 10s. Every network wait is bounded well below the renewal
// margin (TTL/10), so a slow or dead server turns into a failed call the
// library can retry or report, rather than a call that outlives the hold.
func ExampleNewClient_production() {
	rdb := redis.NewClient(&redis.Options{
		Addr: redisAddr,
		// A server that cannot be reached fails fast instead of holding an
		// Acquire for go-redis's default 5s.
		DialTimeout: 2 * time.Second,
		// A stalled server fails the call within a fraction of the TTL, so
		// a renewal can be retried before the hold's safety deadline.
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
		// go-redis then cuts a call at its context's deadline: Acquire's
		// wait and each renewal's deadline hold on the socket too.
		ContextTimeoutEnabled: true,
		// The library's acquire, extend and renewal are safe to resend;
		// a few retries ride out a dropped connection, and more would only
		// delay noticing a dead server.
		MaxRetries: 2,
		// Held locks renew and waiters retry on their own schedules:
		// size the pool for the locks held at once plus waiters, and keep
		// a few idle connections so a renewal never waits for a dial.
		PoolSize:     32,
		MinIdleConns: 4,
	})
	defer rdb.Close()

	locks := lock.NewClient(rdb, lock.WithTTL(10*time.Second))
	defer locks.Close()
	err := locks.WithLock(context.Background(), "example:production", func(context.Context) error {
		fmt.Println("held")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// held
	// err: <nil>
}
