package admin

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
)

// Listeners counts the connections subscribed to the notify channel of
// key, P{K}:notify, with SUBSCRIBE or (on a Redis Cluster) SSUBSCRIBE:
// the lock Clients with at least one Acquire waiting for key to be
// released, one per Client however many of its Acquires wait (a Client
// may stay subscribed a while after its last waiter is served). A plain
// mutex's, a read-write lock's and a semaphore's waiters leave no other
// trace in Redis, so [Info].Waiters, which counts a fair lock's queue,
// is 0 for them. It returns an error wrapping lock.ErrInvalid for an
// empty key or a nil Admin, or the Redis error.
func (a *Admin) Listeners(ctx context.Context, key string) (int, error) {
	k, err := a.opKeys("listeners", key)
	if err != nil {
		return 0, err
	}
	ch := k.Notify()
	var n int64
	err = a.call(ctx, func() error {
		m, err := a.rdb.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			return err
		}
		n = m[ch]
		if _, ok := a.rdb.(*redis.ClusterClient); ok {
			s, err := a.rdb.PubSubShardNumSub(ctx, ch).Result()
			if err != nil {
				return err
			}
			n += s[ch]
		}
		return nil
	})
	if err != nil {
		return 0, lease.NewOpError("lock", "listeners", key, err)
	}
	return int(n), nil
}
