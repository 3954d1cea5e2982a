package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/kindtest"
	"github.com/agentlock/lock/redlock"
)

// TestErrors_prefixSaidOnce: the error of every verb names the package,
// the verb and the key once ("redlock: release \"k\": not held"), whatever
// it wraps — node errors in a QuorumError included: no "lock: " twice
// ("redlock: " ends with it).
func TestErrors_prefixSaidOnce(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, nodes, redlock.WithBackoff(time.Millisecond, 5*time.Millisecond), loadTolerant)
	key := keyFor(t)
	holder := c.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	lost := c.NewLock(key+":lost", redlock.WithTTL(time.Minute))
	must(t, "Acquire()", lost.Acquire(ctx))
	waitHolders(t, nodes, key+":lost", lost.Token(), 3)
	for _, rdb := range nodes {
		delKey(t, rdb, key+":lost")
	}
	lostExtend := lost.Extend(ctx, time.Minute) // finds the keys gone: lost
	closed := redlock.New(nodes)
	closed.Close()
	// A majority of the nodes refuse connections: no quorum.
	down := []redis.UniversalClient{nodes[0], refusing(t), refusing(t)}
	noQuorum := newClient(t, down, redlock.WithNodeTimeout(50*time.Millisecond))
	tryErr := func(l *redlock.Lock) error { _, err := l.TryAcquire(ctx); return err }

	kindtest.PrefixOnce(t, map[string]error{
		"empty key":              c.NewLock("").Acquire(ctx),
		"invalid option":         c.NewLock(key, redlock.WithTTL(0)).Acquire(ctx),
		"zero Lock":              new(redlock.Lock).Acquire(ctx),
		"zero Client":            new(redlock.Client).NewLock(key).Acquire(ctx),
		"Release never acquired": c.NewLock(key).Release(ctx),
		"Extend never acquired":  c.NewLock(key).Extend(ctx, time.Second),
		"Extend ttl 0":           holder.Extend(ctx, 0),
		"Acquire held handle":    holder.Acquire(ctx),
		"Acquire after Close":    closed.NewLock(key).Acquire(ctx),
		"Acquire wait timeout":   c.NewLock(key, redlock.WithWaitTimeout(20*time.Millisecond)).Acquire(ctx),
		"TryAcquire no quorum":   tryErr(noQuorum.NewLock(key)),
		"Acquire no quorum":      noQuorum.NewLock(key, redlock.WithWaitTimeout(100*time.Millisecond)).Acquire(ctx),
		"Extend of a lost hold":  lostExtend,
		"Release of a lost hold": lost.Release(ctx),
		"LostErr":                lost.LostErr(),
		"WithLock nil func":      c.WithLock(ctx, key, nil),
	})
}

// refusing returns a client of a loopback port nothing listens on.
func refusing(t *testing.T) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: kindtest.ClosedAddr(t), MaxRetries: -1, DialerRetries: 1, PoolSize: 100000})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestClient_WithObserver_eventsCarryCallerCtx: the events of a call
// carry the caller's context; background events (a loss found by renewal)
// carry none.
func TestClient_WithObserver_eventsCarryCallerCtx(t *testing.T) {
	t.Parallel()
	_, nodes := realNodes(t, 3)
	rec := &kindtest.Recorder{}
	c := newClient(t, nodes, redlock.WithObserver(rec), loadTolerant)
	key := keyFor(t)
	ctx := kindtest.CallerCtx()
	l := c.NewLock(key, redlock.WithTTL(900*time.Millisecond))
	kindtest.EveryCall(t, ctx, l)
	waitHolders(t, nodes, key, l.Token(), 3)
	for _, rdb := range nodes {
		delKey(t, rdb, key)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatalf("Lost() not closed after every node dropped the key")
	}
	// Those of every call, then the loss.
	kindtest.CallerCtxOnly(t, rec, 7)
}
