package lock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

func TestOptions_invalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []lock.Option
	}{
		{"ttl zero", []lock.Option{lock.WithTTL(0)}},
		{"ttl negative", []lock.Option{lock.WithTTL(-time.Second)}},
		{"ttl under 1ms", []lock.Option{lock.WithTTL(time.Microsecond)}},
		{"ttl under MinTTL", []lock.Option{lock.WithTTL(lock.MinTTL - time.Millisecond)}},
		{"wait negative", []lock.Option{lock.WithWaitTimeout(-1)}},
		{"backoff min > max", []lock.Option{lock.WithBackoff(time.Second, time.Millisecond)}},
		{"backoff min zero", []lock.Option{lock.WithBackoff(0, time.Millisecond)}},
		{"backoff max negative", []lock.Option{lock.WithBackoff(time.Millisecond, -1)}},
		{"unknown release mode", []lock.Option{lock.WithReleaseMode(lock.ReleaseMode(7))}},
		{"prefix with {", []lock.Option{lock.WithPrefix("a{")}},
		{"prefix with }", []lock.Option{lock.WithPrefix("}b")}},
		{"empty owner", []lock.Option{lock.WithOwner("")}},
		{"owner without scripts", []lock.Option{lock.WithOwner("me"), lock.WithReleaseMode(lock.ReleaseWatch)}},
		{"max hold negative", []lock.Option{lock.WithMaxHold(-time.Second)}},
		{"replica acks negative", []lock.Option{lock.WithReplicaAck(-1, time.Second)}},
		{"replica ack timeout zero", []lock.Option{lock.WithReplicaAck(1, 0)}},
	}
	m := miniTarget(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As client defaults: every lock reports the error.
			c := newClient(t, m.rdb, tt.opts...)
			checkInvalid(t, ctx, c.NewLock("k"))
			// As per-lock options on a valid client.
			checkInvalid(t, ctx, newClient(t, m.rdb).NewLock("k", tt.opts...))
		})
	}
	if keys := m.mr.Keys(); len(keys) != 0 {
		t.Fatalf("invalid locks wrote %v", keys)
	}
}

func checkInvalid(t *testing.T, ctx context.Context, l *lock.Lock) {
	t.Helper()
	wantErr(t, "Acquire()", l.Acquire(ctx), lock.ErrInvalid)
	ok, err := l.TryAcquire(ctx)
	if ok {
		t.Fatal("TryAcquire() = true with invalid options")
	}
	wantErr(t, "TryAcquire()", err, lock.ErrInvalid)
	wantErr(t, "Release()", l.Release(ctx), lock.ErrInvalid)
	wantErr(t, "Extend()", l.Extend(ctx, time.Second), lock.ErrInvalid)
	_, err = l.TTL(ctx)
	wantErr(t, "TTL()", err, lock.ErrInvalid)
}

func TestOptions_nilClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, rdb := range map[string]redis.UniversalClient{
		"nil interface":      nil,
		"nil *redis.Client":  (*redis.Client)(nil),
		"nil *ClusterClient": (*redis.ClusterClient)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			c := lock.NewClient(rdb)
			checkInvalid(t, ctx, c.NewLock("k"))
			wantErr(t, "WithLock()", c.WithLock(ctx, "k", func(context.Context) error { return nil }), lock.ErrInvalid)
			must(t, "Close()", c.Close())
		})
	}
}

func TestOptions_emptyKey(t *testing.T) {
	t.Parallel()
	checkInvalid(t, context.Background(), newClient(t, miniTarget(t).rdb).NewLock(""))
}

func TestOptions_nilOptionIgnored(t *testing.T) {
	t.Parallel()
	c := newClient(t, miniTarget(t).rdb, nil)
	l := c.NewLock("k", nil)
	must(t, "Acquire()", l.Acquire(context.Background()))
	must(t, "Release()", l.Release(context.Background()))
}

func TestOptions_prefix(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	c := newClient(t, m.rdb, lock.WithPrefix("app:"))
	l := c.NewLock("k")
	must(t, "Acquire()", l.Acquire(ctx))
	if m.rdb.Get(ctx, "app:{k}").Val() != l.Token() {
		t.Fatalf("keys %v, want app:{k} holding the token", m.mr.Keys())
	}
	// A per-lock prefix overrides the client's.
	l2 := c.NewLock("k", lock.WithPrefix(""))
	must(t, "Acquire() with empty prefix", l2.Acquire(ctx))
	if m.rdb.Get(ctx, "{k}").Val() != l2.Token() {
		t.Fatalf("keys %v, want {k} holding the token", m.mr.Keys())
	}
}

func TestOptions_fencingOff(t *testing.T) {
	t.Parallel()
	m := miniTarget(t)
	ctx := context.Background()
	l := newClient(t, m.rdb, lock.WithFencing(false)).NewLock("k")
	must(t, "Acquire()", l.Acquire(ctx))
	if l.Fence() != 0 || m.mr.Exists("lock:{k}:fence") {
		t.Fatalf("Fence() = %d, keys %v; want 0 and no fence key", l.Fence(), m.mr.Keys())
	}
}

// TestTTL_belowMinTTLIsInvalid: a lease shorter than MinTTL cannot be held
// (renewal cannot confirm it in time), so WithTTL and Extend refuse it with
// ErrInvalid on a real server, and write nothing; MinTTL itself is held.
func TestTTL_belowMinTTLIsInvalid(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		for _, ttl := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, lock.MinTTL - time.Millisecond} {
			checkInvalid(t, ctx, newClient(t, tg.rdb, lock.WithTTL(ttl)).NewLock(keyFor(t)))
			checkInvalid(t, ctx, newClient(t, tg.rdb).NewLock(keyFor(t), lock.WithTTL(ttl)))
		}
		if n := tg.rdb.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("locks with a TTL under MinTTL wrote %d keys", n)
		}
		l := newClient(t, tg.rdb).NewLock(keyFor(t), lock.WithTTL(lock.MinTTL))
		must(t, "Acquire(MinTTL)", l.Acquire(ctx))
		wantErr(t, "Extend(MinTTL-1ms)", l.Extend(ctx, lock.MinTTL-time.Millisecond), lock.ErrInvalid)
		must(t, "Extend(MinTTL)", l.Extend(ctx, lock.MinTTL))
		must(t, "Release()", l.Release(ctx))
	})
}

// TestOptions_hugeDurations: the largest durations overflow nothing: the
// hold, its TTL and Extend work, and a waiter on it ends with its ctx.
func TestOptions_hugeDurations(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		big := time.Duration(math.MaxInt64)
		l := c.NewLock(key, lock.WithTTL(big), lock.WithMaxHold(big), lock.WithWaitTimeout(big), lock.WithBackoff(time.Millisecond, big))
		must(t, "Acquire()", l.Acquire(ctx))
		d, err := l.TTL(ctx)
		must(t, "TTL()", err)
		if d < 24*time.Hour {
			t.Fatalf("TTL() = %v, want huge", d)
		}
		must(t, "Extend()", l.Extend(ctx, big))
		if isClosed(l.Lost()) {
			t.Fatalf("Lost() closed: %v", l.LostErr())
		}
		// A waiter on the huge hold ends with its ctx.
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		w := c.NewLock(key, lock.WithWaitTimeout(big), lock.WithBackoff(time.Millisecond, big))
		wantErr(t, "waiter Acquire()", w.Acquire(wctx), context.DeadlineExceeded)
		must(t, "Release()", l.Release(ctx))
	})
}

// TestOptions_invalidFailsEveryVerb: every verb of a lock with an invalid
// option returns ErrInvalid, also after Close, and so does WithLock with a
// nil fn or an empty key.
func TestOptions_invalidFailsEveryVerb(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	c := lock.NewClient(tg.rdb)
	bad := []lock.Option{
		lock.WithTTL(0), lock.WithBackoff(2, 1), lock.WithBackoff(0, 1), lock.WithWaitTimeout(-1),
		lock.WithPrefix("a{"), lock.WithOwner(""), lock.WithMaxHold(-1), lock.WithReleaseMode(7),
		lock.WithReplicaAck(-1, time.Second), lock.WithReplicaAck(1, 0),
	}
	for round := range 2 {
		for i, o := range bad {
			l := c.NewLock("k", o)
			if l.Key() != "k" || l.Token() != "" || l.Fence() != 0 {
				t.Fatalf("option %d: Key %q Token %q Fence %d", i, l.Key(), l.Token(), l.Fence())
			}
			wantErr(t, "Acquire()", l.Acquire(ctx), lock.ErrInvalid)
			if ok, err := l.TryAcquire(ctx); ok || !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("option %d: TryAcquire() = %v, %v", i, ok, err)
			}
			wantErr(t, "Release()", l.Release(ctx), lock.ErrInvalid)
			wantErr(t, "Extend()", l.Extend(ctx, 0), lock.ErrInvalid)
			_, err := l.TTL(ctx)
			wantErr(t, "TTL()", err, lock.ErrInvalid)
			wantErr(t, "WithLock()", c.WithLock(ctx, "k", func(context.Context) error { return nil }, o), lock.ErrInvalid)
		}
		if round == 0 {
			must(t, "Close()", c.Close())
		}
	}
	wantErr(t, "WithLock(nil fn)", c.WithLock(ctx, "k", nil), lock.ErrInvalid)
	wantErr(t, "WithLock(empty key)", c.WithLock(ctx, "", func(context.Context) error { return nil }), lock.ErrInvalid)
}
