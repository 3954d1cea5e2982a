package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/kindtest"
)

// TestErrors_prefixSaidOnce: the error of every verb names the package,
// the verb and the key once ("lock: release \"k\": not held"), whatever it
// wraps: no "lock: " twice.
func TestErrors_prefixSaidOnce(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb, lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
	key := keyFor(t)
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	lost := c.NewLock(key + ":lost")
	must(t, "Acquire()", lost.Acquire(ctx))
	tg.expire(t, key+":lost")
	_, ttlErr := lost.TTL(ctx) // finds the key gone: lost
	closed := lock.NewClient(tg.rdb)
	closed.Close()
	refusing := redis.NewClient(&redis.Options{Addr: kindtest.ClosedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { refusing.Close() })
	refused := newClient(t, refusing)
	timeout, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()

	kindtest.PrefixOnce(t, map[string]error{
		"empty key":              c.NewLock("").Acquire(ctx),
		"invalid option":         c.NewLock(key, lock.WithTTL(0)).Acquire(ctx),
		"zero Lock":              new(lock.Lock).Acquire(ctx),
		"zero Client":            new(lock.Client).NewLock(key).Acquire(ctx),
		"Release never acquired": c.NewLock(key).Release(ctx),
		"Extend never acquired":  c.NewLock(key).Extend(ctx, time.Second),
		"Extend ttl 0":           holder.Extend(ctx, 0),
		"Acquire held handle":    holder.Acquire(ctx),
		"Acquire after Close":    closed.NewLock(key).Acquire(ctx),
		"Acquire wait timeout":   c.NewLock(key, lock.WithWaitTimeout(20*time.Millisecond)).Acquire(ctx),
		"Acquire ctx deadline":   c.NewLock(key).Acquire(timeout),
		"Acquire refused":        refused.NewLock(key, lock.WithWaitTimeout(20*time.Millisecond)).Acquire(ctx),
		"TryAcquire refused":     func() error { _, err := refused.NewLock(key).TryAcquire(ctx); return err }(),
		"TTL of a lost hold":     ttlErr,
		"Extend of a lost hold":  lost.Extend(ctx, time.Second),
		"Release of a lost hold": lost.Release(ctx),
		"LostErr":                lost.LostErr(),
		"WithLock nil func":      c.WithLock(ctx, key, nil),
		"WithLock hold lost": c.WithLock(ctx, key+":fn", func(context.Context) error {
			tg.expire(t, key+":fn")
			return nil
		}),
	})
}
