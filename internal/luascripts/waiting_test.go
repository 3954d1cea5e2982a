package luascripts_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// published reports the first message on sub after whatever op sends: op
// runs, then a marker message follows on the same channel, so a release
// that published nothing shows as the marker, with no timing involved.
func published(t *testing.T, rdb *redis.Client, sub *redis.PubSub, channel string, op func()) string {
	t.Helper()
	ctx := context.Background()
	op()
	if err := rdb.Publish(ctx, channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != "marker" {
		// Drain the marker, so the next call starts clean.
		if m, err := sub.ReceiveMessage(ctx); err != nil || m.Payload != "marker" {
			t.Fatalf("after %q: message %v, %v; want the marker", msg.Payload, m, err)
		}
	}
	return msg.Payload
}

// TestRelease_publishesOnlyWhenWaitedFor: a release publishes "released"
// only when an attempt found the key taken since it was acquired, leaving
// the waiters' mark (waiting.lua); the release takes the mark with the key,
// so the next holder's release, nobody having waited, publishes nothing.
// Holder info and re-entrant holds follow the same rule.
func TestRelease_publishesOnlyWhenWaitedFor(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Config{}).Client(t)
	keys := luascripts.NewKeys("lock:", "k")
	sub := rdb.Subscribe(ctx, keys.Notify())
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	acquire := func(token string, keys []string, args ...any) int64 {
		t.Helper()
		n, err := luascripts.Acquire.Run(ctx, rdb, keys, append([]any{token, 10_000}, args...)...).Int64()
		if err != nil {
			t.Fatalf("acquire(%s) error = %v", token, err)
		}
		return n
	}
	release := func(token string, keys []string, reentrant string) func() {
		return func() {
			t.Helper()
			if n, err := luascripts.Release.Run(ctx, rdb, keys, token, reentrant).Int64(); err != nil || n < 1 {
				t.Fatalf("release(%s) = %d, %v; want >= 1", token, n, err)
			}
		}
	}
	marked := func() bool { return rdb.Exists(ctx, keys.Notify()).Val() == 1 }

	// Nobody waits: no message.
	acquire("a", keys.AcquireKeys(), "0", "1")
	if got := published(t, rdb, sub, keys.Notify(), release("a", keys.ReleaseKeys(), "0")); got != "marker" {
		t.Fatalf("release of a key nobody waited for published %q", got)
	}

	// A failed attempt marks the key; the release publishes and unmarks.
	acquire("a", keys.AcquireKeys(), "0", "1")
	if n := acquire("b", keys.AcquireKeys(), "0", "1"); n >= 0 {
		t.Fatalf("attempt on a taken key = %d, want < 0", n)
	}
	if !marked() {
		t.Fatal("no waiters' mark after an attempt found the key taken")
	}
	if d := rdb.PTTL(ctx, keys.Notify()).Val(); d <= 0 || d > luascripts.WaitMarkTTL {
		t.Fatalf("mark PTTL = %v, want in (0, %v]", d, luascripts.WaitMarkTTL)
	}
	if got := published(t, rdb, sub, keys.Notify(), release("a", keys.ReleaseKeys(), "0")); got != "released" {
		t.Fatalf("release of a waited-for key published %q, want released", got)
	}
	if marked() {
		t.Fatal("the mark outlived the release")
	}
	acquire("b", keys.AcquireKeys(), "0", "1")
	if got := published(t, rdb, sub, keys.Notify(), release("b", keys.ReleaseKeys(), "0")); got != "marker" {
		t.Fatalf("the next release, nobody waiting since, published %q", got)
	}

	// With holder info (KEYS[3]): the same, the hash going with the key.
	info := keys.InfoAcquireKeys()
	acquire("c", info, "0", "1", "", "owner\x1fhost\x1f1\x1f")
	if got := published(t, rdb, sub, keys.Notify(), release("c", keys.InfoReleaseKeys(), "0")); got != "marker" {
		t.Fatalf("holder-info release nobody waited for published %q", got)
	}
	acquire("c", info, "0", "1", "", "owner\x1fhost\x1f1\x1f")
	acquire("d", keys.AcquireKeys(), "0", "1")
	if got := published(t, rdb, sub, keys.Notify(), release("c", keys.InfoReleaseKeys(), "0")); got != "released" {
		t.Fatalf("holder-info release of a waited-for key published %q, want released", got)
	}
	if n := rdb.Exists(ctx, keys.Holders(), keys.Notify()).Val(); n != 0 {
		t.Fatalf("%d of holder info and mark left after the release, want 0", n)
	}

	// A re-entrant hold: an attempt by another owner marks it; dropping
	// the owner's last hold publishes.
	acquire("o#1", keys.AcquireKeys(), "1", "1")
	acquire("p#1", keys.AcquireKeys(), "1", "1")
	if got := published(t, rdb, sub, keys.Notify(), release("o#1", keys.ReleaseKeys(), "1")); got != "released" {
		t.Fatalf("re-entrant release of a waited-for key published %q, want released", got)
	}

	// The fair lock's attempt on a key a plain hold has marks it too, so
	// the plain holder's release wakes the queue's head.
	acquire("e", keys.AcquireKeys(), "0", "1")
	fk := []string{keys.Lock(), keys.Fence(), keys.Companion("queue"), keys.Companion("queue:times"), keys.Companion("queue:gone")}
	if n, err := luascripts.FairAcquire.Run(ctx, rdb, fk, "f", 10_000, "1", 5_000, "id").Int64(); err != nil || n >= 0 {
		t.Fatalf("fair attempt on a taken key = %d, %v; want < 0", n, err)
	}
	if got := published(t, rdb, sub, keys.Notify(), release("e", keys.ReleaseKeys(), "0")); got != "released" {
		t.Fatalf("release of a key a fair waiter found taken published %q, want released", got)
	}
}
