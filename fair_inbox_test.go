package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/redistest"
)

// The tests below open the windows in which a fair lock's give, sent on
// the head Client's inbox (P{K}:notify:<id>), could be lost or taken by the
// wrong waiter. Every waiter but the holders has a one-minute
// backoff and its holder a one-minute TTL, so only a message (a give, a
// 'released', a subscription's confirmation) wakes it within the tests'
// 10s.

// gatedClient returns a Client of its own over tg, with opts, whose
// go-redis client carries a Gate that, once armed, holds every new
// connection's dial: a Client whose pool is warm keeps sending its calls,
// while its pub/sub connection (dialled on its first SUBSCRIBE, or
// redialled after it was cut) waits. Its pool is warm with one connection.
// The gate is let go before the Client closes at cleanup.
func gatedClient(t *testing.T, tg *target, opts ...lock.Option) (*lock.Client, *hooktest.Gate) {
	t.Helper()
	rdb := tg.newRDB(t)
	g := hooktest.New(t, hooktest.Config{On: hooktest.Dials})
	rdb.AddHook(g)
	must(t, "PING", rdb.Ping(context.Background()).Err())
	c := newClient(t, rdb, opts...)
	t.Cleanup(g.Release) // runs before the Client's Close
	return c, g
}

// gatedHead returns a fair holder of key, and a fair lock of key (head)
// on a gatedClient (c, g) of its own with the slow backoff, not waiting yet.
func gatedHead(t *testing.T, tg *target, key string) (holder *lock.Lock, c *lock.Client, g *hooktest.Gate, head *lock.Lock) {
	t.Helper()
	holder = fairHolder(t, tg.rdb, key)
	c, g = gatedClient(t, tg, lock.WithFair(true), slow)
	return holder, c, g, c.NewLock(key)
}

// cutPubSub cuts every pub/sub connection of tg (CLIENT KILL) and returns
// once g holds the redial of its Client's.
func cutPubSub(t *testing.T, tg *target, g *hooktest.Gate) {
	t.Helper()
	g.Arm()
	must(t, "CLIENT KILL TYPE pubsub", tg.rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err())
	<-g.Held()
}

// fairHolder returns a fair lock of key holding it for a minute, on a
// Client of its own.
func fairHolder(t *testing.T, rdb redis.UniversalClient, key string) *lock.Lock {
	t.Helper()
	h := newClient(t, rdb, lock.WithFair(true), lock.WithTTL(time.Minute)).NewLock(key)
	must(t, "holder Acquire()", h.Acquire(context.Background()))
	return h
}

// inboxes returns how many inboxes of key are subscribed now on the
// server (the holder's Client's among them: a fair Acquire listens before
// its first attempt).
func inboxes(t *testing.T, rdb redis.Cmdable, key string) int {
	t.Helper()
	chans, err := rdb.PubSubChannels(context.Background(), lockKey(key)+":notify:*").Result()
	must(t, "PUBSUB CHANNELS", err)
	return len(chans)
}

// waitInboxes waits until n inboxes of key are subscribed.
func waitInboxes(t *testing.T, rdb redis.Cmdable, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for inboxes(t, rdb, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d inboxes of %s subscribed after 10s, want %d", inboxes(t, rdb, key), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// headToken returns the token of the head of key's fair queue.
func headToken(t *testing.T, rdb redis.Cmdable, key string) string {
	t.Helper()
	e, err := rdb.LIndex(context.Background(), lockKey(key)+":queue", 0).Result()
	must(t, "LINDEX queue 0", err)
	token, _, _ := strings.Cut(e, "|")
	return token
}

// releaseToAbsent releases holder, the head of whose queue has token, and
// checks that Redis holds the key with that token.
func releaseToAbsent(t *testing.T, rdb redis.Cmdable, key string, holder *lock.Lock, token string) {
	t.Helper()
	ctx := context.Background()
	must(t, "holder Release()", holder.Release(ctx))
	if got := rdb.Get(ctx, lockKey(key)).Val(); got != token {
		t.Fatalf("GET = %q after the release, want the head's token %q", got, token)
	}
}

// acquireBg starts l.Acquire(ctx) and returns where its error arrives.
func acquireBg(ctx context.Context, l *lock.Lock) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Acquire(ctx) }()
	return done
}

// wantPending fails the test if done delivered already.
func wantPending(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while another waiter was first", what, err)
	default:
	}
}

// TestFair_giveBeforeInboxConfirmed: the head's Client cannot subscribe
// (its pub/sub connection's dial is held) when the release hands it the
// key, so the give is lost: the key holds the head's token meanwhile, and
// once the subscription is confirmed that confirmation wakes the head,
// whose attempt finds the key its own and holds it, with a fence above the
// last holder's.
func TestFair_giveBeforeInboxConfirmed(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, _, g, head := gatedHead(t, tg, key)
	waitInboxes(t, tg.rdb, key, 1) // the holder's Client's, from its Acquire
	g.Arm()
	done := acquireBg(ctx, head)
	waitWaiters(t, holder, 1)
	<-g.Held()
	if n := inboxes(t, tg.rdb, key); n != 1 {
		t.Fatalf("%d inboxes subscribed while the dial is held, want 1 (the holder's Client's)", n)
	}
	giveLostThenHeld(t, tg, holder, head, g, done)
}

// giveLostThenHeld releases holder while head's Client (gated by g) cannot
// hear the give, and wants the key left with head's token; then lets g go
// and wants head, whose Acquire reports on done, woken and holding the
// key, with a fence above the holder's.
func giveLostThenHeld(t *testing.T, tg *target, holder, head *lock.Lock, g *hooktest.Gate, done <-chan error) {
	t.Helper()
	key := head.Key()
	releaseToAbsent(t, tg.rdb, key, holder, headToken(t, tg.rdb, key))
	wantPending(t, done, "head's Acquire() while its Client cannot listen")
	g.Release()
	must(t, "head's Acquire()", recv(t, done, "head woken once its Client listens"))
	if head.Fence() <= holder.Fence() {
		t.Fatalf("head's fence %d, not above the holder's %d", head.Fence(), holder.Fence())
	}
	must(t, "head's Release()", head.Release(context.Background()))
}

// TestFair_inboxResubscribedAfterRedial: the head's pub/sub connection is
// cut (CLIENT KILL) and its redial held while the release hands it the
// key; once the redial goes through, go-redis subscribes the inbox again
// and its confirmation wakes the head, which holds the key.
func TestFair_inboxResubscribedAfterRedial(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	holder, c, g, head := gatedHead(t, tg, keyFor(t))
	done := startAcquire(t, c, head, 1)
	cutPubSub(t, tg, g)
	giveLostThenHeld(t, tg, holder, head, g, done)
}

// TestFair_closeWithGiveInFlight: the head's Client is cut off (its
// pub/sub redial held) when the release hands it the key, and then
// closes: its Acquire ends with ErrClosed and passes the key on to the
// next in line, another Client's waiter, which its give wakes; the key is
// not left with the closed Client's token for its TTL.
func TestFair_closeWithGiveInFlight(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, c, g, head := gatedHead(t, tg, key)
	headDone := startAcquire(t, c, head, 1)
	nc := newClient(t, tg.newRDB(t), lock.WithFair(true), slow)
	next := nc.NewLock(key)
	nextDone := startAcquire(t, nc, next, 1)
	waitWaiters(t, holder, 2)
	cutPubSub(t, tg, g)
	releaseToAbsent(t, tg.rdb, key, holder, headToken(t, tg.rdb, key))
	closeWithin(t, c)
	wantErr(t, "closed head's Acquire()", recv(t, headDone, "closed head's Acquire"), lock.ErrClosed)
	must(t, "next waiter's Acquire()", recv(t, nextDone, "next waiter handed the key"))
	wantHeldBy(t, tg.rdb, next, "after the head's Client closed")
	must(t, "next waiter's Release()", next.Release(ctx))
}

// TestFair_sameClientTwoWaiters: two fair locks of one Client wait on the
// same key, on the same inbox: the give for the first wakes it alone, and
// the second gets the key, by its own give, once the first releases it.
func TestFair_sameClientTwoWaiters(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		key := keyFor(t)
		holder := fairHolder(t, d.newRDB(t), key)
		c := newClient(t, d.newRDB(t), lock.WithFair(true), slow)
		first, second := c.NewLock(key), c.NewLock(key)
		firstDone := acquireBg(ctx, first)
		waitWaiters(t, holder, 1)
		secondDone := acquireBg(ctx, second)
		waitWaiters(t, holder, 2)
		waitIdle(t, c, key, 2)

		must(t, "holder Release()", holder.Release(ctx))
		must(t, "first Acquire()", recv(t, firstDone, "first waiter handed the key"))
		wantHeldBy(t, d.admin, first, "after the holder's release")
		waitIdle(t, c, key, 1)
		wantPending(t, secondDone, "second Acquire()")
		must(t, "first Release()", first.Release(ctx))
		must(t, "second Acquire()", recv(t, secondDone, "second waiter handed the key"))
		wantHeldBy(t, d.admin, second, "after the first's release")
		if second.Fence() <= first.Fence() {
			t.Fatalf("second fence %d, not above the first's %d", second.Fence(), first.Fence())
		}
		must(t, "second Release()", second.Release(ctx))
	})
}

// TestFair_plainWaiterBesideFair: a plain lock and a fair lock of one
// Client wait on the same key: the fair one is handed the key on its
// inbox, the plain one keeps waiting, and the fair one's release, with
// nobody queued, frees the key and its 'released' on the key's channel
// wakes the plain one.
func TestFair_plainWaiterBesideFair(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		key := keyFor(t)
		holder := fairHolder(t, d.newRDB(t), key)
		c := newClient(t, d.newRDB(t), slow)
		fair := c.NewLock(key, lock.WithFair(true))
		fairDone := acquireBg(ctx, fair)
		waitWaiters(t, holder, 1)
		plain := c.NewLock(key)
		plainDone := acquireBg(ctx, plain)
		waitIdle(t, c, key, 2)

		must(t, "holder Release()", holder.Release(ctx))
		must(t, "fair Acquire()", recv(t, fairDone, "fair waiter handed the key"))
		wantPending(t, plainDone, "plain Acquire()")
		waitIdle(t, c, key, 1)
		must(t, "fair Release()", fair.Release(ctx))
		must(t, "plain Acquire()", recv(t, plainDone, "plain waiter woken by 'released'"))
		must(t, "plain Release()", plain.Release(ctx))
	})
}

// TestFair_forceReleaseWakesQueued: a force-release of a fair lock's key
// reaches the holder (it reports the hold lost) and, on the key's channel,
// the queued head's Client, whose head then takes the key. (On a sharded
// cluster the force message is classic, so waiters wake by their backoff:
// see luascripts.publishing.)
func TestFair_forceReleaseWakesQueued(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder := fairHolder(t, tg.newRDB(t), key)
	c := newClient(t, tg.newRDB(t), lock.WithFair(true), slow)
	head := c.NewLock(key)
	done := startAcquire(t, c, head, 1)
	waitWaiters(t, holder, 1)
	ops := newClient(t, tg.newRDB(t))
	must(t, "ForceRelease()", ops.ForceRelease(ctx, key))
	must(t, "head's Acquire()", recv(t, done, "head woken by the force-release"))
	waitClosed(t, holder.Lost(), 10*time.Second, "holder's Lost()")
	wantHeldBy(t, tg.rdb, head, "after the force-release")
	must(t, "head's Release()", head.Release(ctx))
}

// TestFair_oddKeyNames: keys holding the entry's and messages' separators
// ('|', ':') and a hash tag of their own still hand the key over by the
// head's inbox, in the key's slot.
func TestFair_oddKeyNames(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		for _, key := range []string{"a|1|1|x", "b:give:1:2", "c{tag}d", "to:e|"} {
			holder := fairHolder(t, d.newRDB(t), key)
			c := newClient(t, d.newRDB(t), lock.WithFair(true), slow)
			head := c.NewLock(key)
			done := startAcquire(t, c, head, 1)
			waitWaiters(t, holder, 1)
			must(t, key+": holder Release()", holder.Release(ctx))
			must(t, key+": head's Acquire()", recv(t, done, key+": head handed the key"))
			wantHeldBy(t, d.admin, head, key)
			must(t, key+": head's Release()", head.Release(ctx))
		}
	})
}

// channelSubs returns how many subscribers channel has on rdb's server.
func channelSubs(t *testing.T, rdb redis.Cmdable, channel string) int64 {
	t.Helper()
	n, err := rdb.PubSubNumSub(context.Background(), channel).Result()
	must(t, "PUBSUB NUMSUB", err)
	return n[channel]
}

// waitUnsubscribed waits until nobody listens on key's channel or on any
// inbox of it: every Client's idle sweep has unsubscribed them.
func waitUnsubscribed(t *testing.T, rdb redis.Cmdable, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for channelSubs(t, rdb, lockKey(key)+":notify") != 0 || inboxes(t, rdb, key) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: channels still subscribed 10s after they went idle", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFair_inboxKeptBySweepWhileWaiting: with a short idle time, the
// Client's sweeps unsubscribe a channel nobody waits on (seen on another
// key) but keep the inbox of a key whose fair waiter still waits, so the
// release's give reaches it; once the waiter is gone both its channels are
// swept, and the next waiter of that key subscribes both afresh and is
// handed the key on its inbox.
func TestFair_inboxKeptBySweepWhileWaiting(t *testing.T) {
	lock.SetNotifyIdle(t, 30*time.Millisecond) // before any Client starts
	tg := realTarget(t)
	ctx := context.Background()
	key, other := keyFor(t), keyFor(t)+":other"
	holder := fairHolder(t, tg.rdb, key)
	c := newClient(t, tg.newRDB(t), lock.WithFair(true), slow)
	head := c.NewLock(key)
	done := startAcquire(t, c, head, 1)

	// A wait on another key that ends: its channels are swept once idle,
	// as is the holder's Client's inbox of key (it never waited).
	otherHolder := fairHolder(t, tg.rdb, other)
	wctx, cancel := context.WithCancel(ctx)
	otherDone := acquireBg(wctx, c.NewLock(other))
	waitWaiters(t, otherHolder, 1)
	cancel()
	wantErr(t, "other waiter's Acquire()", recv(t, otherDone, "other waiter"), lock.ErrNotAcquired)
	must(t, "other holder Release()", otherHolder.Release(ctx))
	waitUnsubscribed(t, tg.rdb, other)

	waitInboxes(t, tg.rdb, key, 1) // the waiter's Client's
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "head's Acquire()", recv(t, done, "head handed the key after the sweeps"))
	must(t, "head's Release()", head.Release(ctx))
	waitUnsubscribed(t, tg.rdb, key)

	holder = fairHolder(t, tg.rdb, key)
	head = c.NewLock(key)
	done = startAcquire(t, c, head, 1)
	waitWaiters(t, holder, 1)
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "head's Acquire()", recv(t, done, "head handed the key after its channels were swept"))
	must(t, "head's Release()", head.Release(ctx))
}

// TestFair_inboxAfterSlotMigration: on a 3-master cluster the slot of a
// fair lock's key moves to another master (queue and all) while a waiter
// of another Client is queued; the waiter's Client subscribes its inbox
// afresh on the new master, where the release's give reaches it.
func TestFair_inboxAfterSlotMigration(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	key := keyFor(t)
	from, to, slot := slotMove(t, cl, key)
	rdb := cl.Client(t)

	holder := fairHolder(t, cl.Client(t), key)
	c := newClient(t, cl.Client(t), lock.WithFair(true), slow)
	head := c.NewLock(key)
	done := startAcquire(t, c, head, 1)
	waitWaiters(t, holder, 1)
	waitShardSubscribed(t, from, lockKey(key)+":notify")

	migrateSlot(t, slot, from, to, cl.Nodes())
	waitShardSubscribed(t, to, lockKey(key)+":notify")
	toRDB := redis.NewClient(&redis.Options{Addr: to.Addr()})
	defer toRDB.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		chans, err := toRDB.PubSubShardChannels(ctx, lockKey(key)+":notify:*").Result()
		if err == nil && len(chans) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no inbox subscribed on the new master: %v, %v", chans, err)
		}
		time.Sleep(time.Millisecond)
	}
	waitIdle(t, c, key, 1)
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "head's Acquire()", recv(t, done, "head handed the key on the new master"))
	wantHeldBy(t, rdb, head, "after the migration")
	must(t, "head's Release()", head.Release(ctx))
}

// TestFair_ringGiveOnKeyShard: on a *redis.Ring of two real servers, for a
// key on each shard, the head's Client listens on its inbox on the shard
// of the key's hash tag, where the release's give is published.
func TestFair_ringGiveOnKeyShard(t *testing.T) {
	t.Parallel()
	s1, s2 := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
	ring := newRing(t, s1, s2)
	ctx := context.Background()
	byShard := keysOnEachShard(t, ring)
	c := newClient(t, newRing(t, s1, s2), lock.WithFair(true), slow)
	for _, key := range byShard {
		holder := fairHolder(t, ring, key)
		head := c.NewLock(key)
		done := startAcquire(t, c, head, 1)
		waitWaiters(t, holder, 1)
		must(t, "holder Release()", holder.Release(ctx))
		must(t, "head's Acquire()", recv(t, done, key+": head handed the key on its shard"))
		must(t, "head's Release()", head.Release(ctx))
	}
}

// TestFair_closeThenRedisCloseLeavesQueue: a Client whose fair waiter is
// queued closes, and its go-redis client is closed right after (the usual
// deferred shutdown order). Close waits for the waiter's way out, whose
// undo takes its entry out of the queue: none is left behind for the next
// release to hand the key to. Before, Close returned before the Acquire
// even woke, and its undo failed on the closed redis client in about one
// run of three, leaving the key to a closed Client for its TTL.
func TestFair_closeThenRedisCloseLeavesQueue(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	for i := range 20 {
		key := fmt.Sprintf("%s:%d", keyFor(t), i)
		holder := fairHolder(t, tg.rdb, key)
		rdb := tg.newRDB(t)
		c := lock.NewClient(rdb, lock.WithFair(true), slow)
		done := acquireBg(ctx, c.NewLock(key))
		waitWaiters(t, holder, 1)
		must(t, "Close()", c.Close())
		must(t, "redis Close()", rdb.Close())
		wantErr(t, "closed waiter's Acquire()", recv(t, done, "closed waiter"), lock.ErrClosed)
		if n, err := holder.Waiters(ctx); err != nil || n != 0 {
			t.Fatalf("run %d: Waiters() = %d, %v after the waiter's Client closed; want 0", i, n, err)
		}
		must(t, "holder Release()", holder.Release(ctx))
		if got, err := tg.rdb.Get(ctx, lockKey(key)).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("run %d: GET after the release = %q, %v; want no key (nobody waits)", i, got, err)
		}
	}
}

// listen subscribes a go-redis client of d to channel (sharded on a
// cluster, as the library listens there) and returns the subscription once
// the server confirmed it.
func listen(t *testing.T, d deployment, channel string) *redis.PubSub {
	t.Helper()
	ctx := context.Background()
	var ps *redis.PubSub
	if cc, ok := d.admin.(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx, channel)
	} else {
		ps = d.admin.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe %s: %v", channel, err)
	}
	return ps
}

// nextMessage returns the payload of ps's next message, failing the test
// after 10s without one.
func nextMessage(t *testing.T, ps *redis.PubSub) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return m.Payload
}

// releaseTo releases holder and checks that next, whose Acquire's error
// arrives on nextErr, gets key: its Acquire succeeds and Redis holds its
// token.
func releaseTo(t *testing.T, rdb redis.Cmdable, key string, holder, next *lock.Lock, nextErr chan error) {
	t.Helper()
	ctx := context.Background()
	must(t, "Release()", holder.Release(ctx))
	must(t, "next waiter's Acquire()", <-nextErr)
	if got := rdb.Get(ctx, lockKey(key)).Val(); got != next.Token() {
		t.Fatalf("GET = %q, want the next waiter's token %q", got, next.Token())
	}
}

// TestFair_giveReachesHeadOnly: the release that hands the key to the
// queue's head tells the head's Client alone, on its inbox: a listener on
// the key's channel, as every other Client waiting on the key is, hears
// no "give:" (only the "released" of the last release, which comes after
// it), and a second Client's fair waiter queued behind the head stays
// asleep while the head holds the key.
func TestFair_giveReachesHeadOnly(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		key := keyFor(t)
		opts := []lock.Option{lock.WithFair(true), lock.WithTTL(5 * time.Second)}
		holder := newClient(t, d.newRDB(t), opts...).NewLock(key)
		must(t, "Acquire()", holder.Acquire(ctx))
		keyChannel := listen(t, d, "lock:{"+key+"}:notify")

		head := newClient(t, d.newRDB(t), opts...).NewLock(key)
		headErr := make(chan error, 1)
		go func() { headErr <- head.Acquire(ctx) }()
		waitWaiters(t, holder, 1)

		releaseTo(t, d.admin, key, holder, head, headErr)
		must(t, "Release()", head.Release(ctx))
		// Messages on one channel arrive in order, and the give was
		// published before this release's "released".
		if got := nextMessage(t, keyChannel); got != "released" {
			t.Fatalf("first message on the key's channel = %q, want %q (no give)", got, "released")
		}
	})
}

// TestFair_giveToInboxOnly: with a plain redis-server, a pattern listener
// on every inbox of the key hears the give once, naming the head, and
// the key's channel none.
func TestFair_giveToInboxOnly(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, head, headErr := fairQueuedBehind(t, tg, key)
	inboxes := tg.rdb.PSubscribe(ctx, "lock:{"+key+"}:notify:*")
	defer inboxes.Close()
	if _, err := inboxes.Receive(ctx); err != nil {
		t.Fatalf("psubscribe: %v", err)
	}
	releaseTo(t, tg.rdb, key, holder, head, headErr)
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := inboxes.ReceiveMessage(mctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if want := "give:" + head.Token() + ":"; !strings.HasPrefix(m.Payload, want) || m.Channel == "lock:{"+key+"}:notify" {
		t.Fatalf("message %q on %s, want %q... on an inbox", m.Payload, m.Channel, want)
	}
	must(t, "Release()", head.Release(ctx))
}

// TestFair_lostGiveTakenByNextAttempt: the head's give goes where its
// Client does not listen (its queue entry is made to name another
// Client's inbox, as a give lost on the way would be): the key is set to
// the head's token all the same, and the head's next attempt finds it so
// and holds the lock.
func TestFair_lostGiveTakenByNextAttempt(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	key := keyFor(t)
	holder, head, headErr := fairQueuedBehind(t, tg, key, lock.WithBackoff(5*time.Millisecond, 20*time.Millisecond))

	// The head's entry, token|ttl|fencing|id, names a Client nobody is.
	const misdirect = `
local e = redis.call('LINDEX', KEYS[1], 0)
local other = string.gsub(e, '|%w*$', '|nobody')
local at = redis.call('ZSCORE', KEYS[2], e)
redis.call('LSET', KEYS[1], 0, other)
redis.call('ZREM', KEYS[2], e)
redis.call('ZADD', KEYS[2], at, other)
return other`
	entry, err := tg.rdb.Eval(ctx, misdirect, []string{"lock:{" + key + "}:queue", "lock:{" + key + "}:qtimes"}).Text()
	if err != nil || !strings.HasSuffix(entry, "|nobody") {
		t.Fatalf("misdirecting the head's entry: %q, %v", entry, err)
	}
	releaseTo(t, tg.rdb, key, holder, head, headErr)
	if !strings.HasPrefix(entry, head.Token()+"|") {
		t.Fatalf("the misdirected entry %q is not the head's (token %q)", entry, head.Token())
	}
	if head.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", head.Fence(), holder.Fence())
	}
	must(t, "Release()", head.Release(ctx))
	waitWaiters(t, holder, 0)
}
