package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
)

// The tests here open the windows in which a fair waiter that gives up
// could leave its entry in the queue behind its back (issue 11): a
// release would then hand the key to a token nobody listens for, and the
// key would stay held for a whole TTL with the queue stuck behind it.

// fairQueuedBehind starts a fair holder of key and one waiter queued
// behind it (b, on a Client of its own with opts), whose Acquire's error
// arrives on bErr.
func fairQueuedBehind(t *testing.T, tg *target, key string, opts ...lock.Option) (holder, b *lock.Lock, bErr chan error) {
	t.Helper()
	holder = newClient(t, tg.rdb, lock.WithFair(true)).NewLock(key)
	must(t, "Acquire()", holder.Acquire(context.Background()))
	b = newClient(t, tg.newRDB(t), append([]lock.Option{lock.WithFair(true)}, opts...)...).NewLock(key)
	bErr = make(chan error, 1)
	go func() { bErr <- b.Acquire(context.Background()) }()
	waitWaiters(t, holder, 1)
	return holder, b, bErr
}

// fairPassesOn releases holder, whose queue holds b alone: b gets the key,
// and its release frees it, with nobody left to hand it to.
func fairPassesOn(t *testing.T, tg *target, key string, holder, b *lock.Lock, bErr chan error) {
	t.Helper()
	ctx := context.Background()
	must(t, "Release()", holder.Release(ctx))
	must(t, "queued waiter's Acquire()", <-bErr)
	must(t, "Release()", b.Release(ctx))
	if got, err := tg.rdb.Get(ctx, lockKey(key)).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after the last release = %q, %v: the key was handed to a waiter that left", got, err)
	}
}

// slowWaiter is a fair lock of key whose Client's go-redis client carries
// hook; its backoff is long enough that it makes no second attempt in a
// test, and its queue entry outlives any wait of the test (40s).
func slowWaiter(t *testing.T, tg *target, key string, hook redis.Hook) *lock.Lock {
	t.Helper()
	rdb := tg.newRDB(t)
	rdb.AddHook(hook)
	return newClient(t, rdb, lock.WithFair(true), lock.WithBackoff(time.Second, 10*time.Second)).NewLock(key)
}

// TestFair_cutAttemptLeaves: a waiter whose wait ends while its queue-join
// is out (its reply held back by a hook; the caller's ctx has a deadline,
// so the call runs on its own and the Acquire returns at once) takes that
// join's entry out of the queue once the reply is in. Before the fix the
// late entry stayed: the release handed the key to it, and the key stayed
// held by nobody for its TTL (the FAIR bench's stall).
func TestFair_cutAttemptLeaves(t *testing.T) {
	tg := realTarget(t)
	key := keyFor(t)
	holder, b, bErr := fairQueuedBehind(t, tg, key)

	// The first fair acquire's reply, once it ran in Redis.
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, After: true, Match: isFairAcquire, Nth: 1, Armed: true})
	w := slowWaiter(t, tg, key, g)
	wctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(wctx) }()
	<-g.Held() // the join ran in Redis; its reply is held back
	cancel()
	wantErr(t, "cancelled Acquire()", <-wErr, lock.ErrNotAcquired)
	g.Release()
	waitWaiters(t, holder, 1)
	fairPassesOn(t, tg, key, holder, b, bErr)
}

// TestFair_lateAttemptAfterLeave: a waiter's queue-join reaches Redis only
// after the waiter gave up and its leave ran (a hook keeps the join from
// the wire, reports it lost, and the test sends it once the leave is
// done, as a network may deliver it late). The late join must neither
// queue the departed token nor, sent again with the key free, take the
// key.
func TestFair_lateAttemptAfterLeave(t *testing.T) {
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, b, bErr := fairQueuedBehind(t, tg, key)

	d := newLateWrite(isFairAcquire, func(cmd redis.Cmder) bool {
		_, release, ok := fairScriptKeys(cmd)
		return ok && release
	})
	d.giveUp(t, slowWaiter(t, tg, key, d))

	late := d.attempt
	if err := tg.rdb.Do(ctx, late...).Err(); err != nil {
		t.Fatalf("late join: %v", err)
	}
	if n, err := holder.Waiters(ctx); err != nil || n != 1 {
		t.Fatalf("Waiters() after a late join of a departed waiter = %d, %v; want 1", n, err)
	}
	fairPassesOn(t, tg, key, holder, b, bErr)

	// The same join once more (a resent command), with the key free and
	// nobody queued.
	if err := tg.rdb.Do(ctx, late...).Err(); err != nil {
		t.Fatalf("late join resent: %v", err)
	}
	if got, err := tg.rdb.Get(ctx, lockKey(key)).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after a departed waiter's late join of a free key = %q, %v; want no key", got, err)
	}
	if n, err := holder.Waiters(ctx); err != nil || n != 0 {
		t.Fatalf("Waiters() = %d, %v; want 0", n, err)
	}
}

// TestFair_giveToDepartedWaiter: the queue's head gives up, and its leave
// is held back (before it is sent) until the holder's release has handed
// it the key: the "give:" message finds no waiter in its process, and the
// leave, finding the key holding its token, hands it on to the next in
// line.
func TestFair_giveToDepartedWaiter(t *testing.T) {
	tg, key, holder := heldFairKey(t)
	ctx := context.Background()
	// The first fair release, before it is sent.
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, Match: isFairRelease, Nth: 1, Armed: true})
	w := slowWaiter(t, tg, key, g)
	wctx, cancel := context.WithCancel(ctx)
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(wctx) }()
	waitWaiters(t, holder, 1)
	b := newClient(t, tg.newRDB(t), lock.WithFair(true)).NewLock(key)
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	bErr := make(chan error, 1)
	go func() { bErr <- b.Acquire(bctx) }()
	waitWaiters(t, holder, 2)

	cancel()
	wantErr(t, "cancelled Acquire()", <-wErr, lock.ErrNotAcquired)
	<-g.Held() // the head left its process's waiters; its leave is not sent yet
	must(t, "Release()", holder.Release(ctx))
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got == "" || got == b.Token() {
		t.Fatalf("GET after the release = %q, want the departed head's token", got)
	}
	g.Release()
	must(t, "next waiter's Acquire()", <-bErr)
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != b.Token() {
		t.Fatalf("GET = %q, want the next waiter's token %q", got, b.Token())
	}
	must(t, "Release()", b.Release(ctx))
}

// fairScriptKeys returns the KEYS of cmd when it runs a fair lock's
// script, and whether it does; it tells the acquire from the release by the
// notify channel only the release names.
func fairScriptKeys(cmd redis.Cmder) (keys []string, release, ok bool) {
	keys = scriptKeys(cmd)
	if !hasKeySuffix(keys, ":queue") {
		return nil, false, false
	}
	return keys, hasKeySuffix(keys, ":notify"), true
}

// isFairAcquire reports whether cmd runs fair_acquire.lua.
func isFairAcquire(cmd redis.Cmder) bool {
	_, release, ok := fairScriptKeys(cmd)
	return ok && !release
}

// isFairRelease reports whether cmd runs a fair lock's release.
func isFairRelease(cmd redis.Cmder) bool {
	_, release, ok := fairScriptKeys(cmd)
	return ok && release
}
