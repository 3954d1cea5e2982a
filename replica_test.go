package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// TestWithReplicaAck_ringInvalid: WithReplicaAck needs a *redis.Client or
// *redis.ClusterClient; over a Ring every verb of the lock, also before its
// first acquire, returns ErrInvalid ("configuration errors win").
func TestWithReplicaAck_ringInvalid(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": m.Addr()}})
	t.Cleanup(func() { ring.Close() })
	c := newClient(t, ring, lock.WithReplicaAck(1, 10*time.Millisecond))
	l := c.NewLock(keyFor(t))
	ctx := context.Background()
	wantErr(t, "Release()", l.Release(ctx), lock.ErrInvalid)
	wantErr(t, "Extend()", l.Extend(ctx, time.Second), lock.ErrInvalid)
	_, err := l.TTL(ctx)
	wantErr(t, "TTL()", err, lock.ErrInvalid)
	_, err = l.TryAcquire(ctx)
	wantErr(t, "TryAcquire()", err, lock.ErrInvalid)
}

// TestWithReplicaAck_noReplicas: a WAIT that cannot be satisfied (miniredis
// lacks WAIT; a lone redis-server has no replica) fails the acquisition with
// an error, not a panic, and leaves no key, token or fence behind.
func TestWithReplicaAck_noReplicas(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb, lock.WithReplicaAck(1, 10*time.Millisecond))
		key := keyFor(t)
		l := c.NewLock(key)
		ok, err := l.TryAcquire(ctx)
		if ok || err == nil {
			t.Fatalf("TryAcquire() with no replica = %v, %v, want false and an error", ok, err)
		}
		if tg.mr == nil {
			wantErr(t, "TryAcquire()", err, lock.ErrNotAcquired)
		}
		if n := tg.rdb.Exists(ctx, lockKey(key)).Val(); n != 0 {
			t.Fatal("a refused acquisition left its key behind")
		}
		if l.Token() != "" || l.Fence() != 0 {
			t.Fatalf("Token() %q Fence() %d after a refused acquisition, want none", l.Token(), l.Fence())
		}
	})
}
