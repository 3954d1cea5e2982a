package lock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

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
