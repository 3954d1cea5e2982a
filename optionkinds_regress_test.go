package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// wantRefused fails unless err wraps ErrInvalid and its text names the
// option and the kind.
func wantRefused(t *testing.T, call string, err error, option, kind string) {
	t.Helper()
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), option) || !strings.Contains(err.Error(), kind) {
		t.Fatalf("%s error = %v, want ErrInvalid naming %s and %s", call, err, option, kind)
	}
}

// TestOptions_fair_refusedPerLock: WithFair(true) on a semaphore, a
// read-write lock, a multi-lock or Once is refused, naming both.
func TestOptions_fair_refusedPerLock(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	fair := lock.WithFair(true)

	sem := c.NewSemaphore(key+":sem", 2, fair)
	p1, p2 := sem.Permit(), sem.Permit()
	wantRefused(t, "Permit().Acquire()", p1.Acquire(ctx), "WithFair", "semaphore permit")
	_, err := p2.TryAcquire(ctx)
	wantRefused(t, "Permit().TryAcquire()", err, "WithFair", "semaphore permit")
	_, err = sem.Available(ctx)
	wantRefused(t, "Available()", err, "WithFair", "semaphore permit")

	rw := c.NewRWLock(key+":rw", fair)
	wantRefused(t, "ReadLock().Acquire()", rw.ReadLock().Acquire(ctx), "WithFair", "read-write lock")
	wantRefused(t, "WriteLock().Acquire()", rw.WriteLock().Acquire(ctx), "WithFair", "read-write lock")

	m := c.NewMultiLock([]string{key + ":a", key + ":b"}, fair)
	wantRefused(t, "MultiLock.Acquire()", m.Acquire(ctx), "WithFair", "multi-lock")

	_, _, err = c.Once(ctx, key+":once", func(context.Context) ([]byte, error) { return nil, nil }, fair)
	wantRefused(t, "Once()", err, "WithFair", "Once")

	if keys := tg.rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("refused locks wrote %v", keys)
	}
}

// TestOptions_fair_clientDefault: WithFair set on the Client applies to
// its mutexes and is ignored by the kinds it does not apply to: two
// permits of a semaphore are both held, and neither is lost; a multi-lock,
// a read-write lock and Once work as they do without it.
func TestOptions_fair_clientDefault(t *testing.T) {
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := newClient(t, tg.rdb, lock.WithFair(true))
	key := keyFor(t)

	sem := c.NewSemaphore(key+":sem", 2)
	p1, p2 := sem.Permit(), sem.Permit()
	must(t, "p1.Acquire()", p1.Acquire(ctx))
	must(t, "p2.Acquire()", p2.Acquire(ctx))
	if n, err := sem.Available(ctx); err != nil || n != 0 {
		t.Fatalf("Available() = %d, %v; want 0, nil", n, err)
	}
	if ok, err := sem.Permit().TryAcquire(ctx); ok || err != nil {
		t.Fatalf("third permit TryAcquire() = %v, %v; want false, nil", ok, err)
	}
	if isClosed(p1.Lost()) || isClosed(p2.Lost()) {
		t.Fatalf("a permit was lost: %v, %v", p1.LostErr(), p2.LostErr())
	}
	must(t, "p1.Release()", p1.Release(ctx))
	must(t, "p2.Release()", p2.Release(ctx))
	must(t, "WithPermit()", sem.WithPermit(ctx, func(context.Context) error { return nil }))

	keys := []string{key + ":a", key + ":b"}
	m := c.NewMultiLock(keys)
	must(t, "MultiLock.Acquire()", m.Acquire(ctx))
	must(t, "MultiLock.Release()", m.Release(ctx))
	must(t, "WithMultiLock()", c.WithMultiLock(ctx, keys, func(context.Context) error { return nil }))

	rw := c.NewRWLock(key + ":rw")
	r1, r2 := rw.ReadLock(), rw.ReadLock()
	must(t, "r1.Acquire()", r1.Acquire(ctx))
	must(t, "r2.Acquire()", r2.Acquire(ctx))
	must(t, "r1.Release()", r1.Release(ctx))
	must(t, "r2.Release()", r2.Release(ctx))
	must(t, "WithWriteLock()", rw.WithWriteLock(ctx, func(context.Context) error { return nil }))

	v, _, err := c.Once(ctx, key+":once", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	if err != nil || string(v) != "v" {
		t.Fatalf("Once() = %q, %v; want \"v\", nil", v, err)
	}
}

// TestOptions_offValues: a value of an option that asks a kind for
// nothing (WithFair(false), ReleaseScript, no replica acks, no holder
// info, no metadata, no listening) is accepted by every kind.
func TestOptions_offValues(t *testing.T) {
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, tg.rdb)
	off := []lock.Option{lock.WithFair(false), lock.WithReleaseMode(lock.ReleaseScript), lock.WithReplicaAck(0, 0),
		lock.WithHolderInfo(false), lock.WithMetadata(""), lock.WithNotify(false)}
	for _, k := range matrixKinds {
		t.Run(k.name, func(t *testing.T) {
			e := &matrixEnv{ctx: ctx, c: c, rdb: tg.rdb, key: keyFor(t), kind: k}
			e.smoke(t, off...)
		})
	}
}

// TestOptions_fairAndOwner: a lock given both WithFair(true) and WithOwner
// is refused with an error naming both; with one of them on the Client,
// the lock's own decides.
func TestOptions_fairAndOwner(t *testing.T) {
	tg := realTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := keyFor(t)
	err := newClient(t, tg.rdb).NewLock(key, lock.WithFair(true), lock.WithOwner("o")).Acquire(ctx)
	wantRefused(t, "Acquire()", err, "WithFair", "re-entrant mutex")
	wantRefused(t, "Acquire()", err, "WithOwner", "fair mutex")

	// A fair Client's lock given an owner is re-entrant.
	fair := newClient(t, tg.rdb, lock.WithFair(true))
	a, b := fair.NewLock(key, lock.WithOwner("o")), fair.NewLock(key, lock.WithOwner("o"))
	must(t, "a.Acquire()", a.Acquire(ctx))
	if ok, err := b.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("same owner's TryAcquire() = %v, %v; want true, nil", ok, err)
	}
	must(t, "b.Release()", b.Release(ctx))
	must(t, "a.Release()", a.Release(ctx))

	// A re-entrant Client's lock made fair queues.
	owned := newClient(t, tg.rdb, lock.WithOwner("o"))
	l := owned.NewLock(key, lock.WithFair(true))
	must(t, "fair Acquire()", l.Acquire(ctx))
	if ok, err := owned.NewLock(key).TryAcquire(ctx); ok || err != nil {
		t.Fatalf("owner's TryAcquire() on a fair hold = %v, %v; want false, nil", ok, err)
	}
	must(t, "fair Release()", l.Release(ctx))
}
