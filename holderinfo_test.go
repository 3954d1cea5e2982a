package lock_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// infoSlack covers the rounding between the server's TIME (hold expiries)
// and its key expiries (PTTL), and the moments between the calls that
// read them. The failures these checks look for are minutes wide.
const infoSlack = 50 * time.Millisecond

// pttl returns key's PTTL as Redis replies it: ms, -1 without an expiry,
// -2 for no key.
func pttl(t *testing.T, rdb redis.UniversalClient, key string) time.Duration {
	t.Helper()
	n, err := rdb.Do(context.Background(), "PTTL", key).Int64()
	must(t, "PTTL "+key, err)
	if n < 0 {
		return time.Duration(n)
	}
	return time.Duration(n) * time.Millisecond
}

// wantInfoTTL checks key's holder-info hash against Inspect: while a live
// hold has holder info the hash has a TTL, at least the longest such
// hold's; it never outlives every live hold; with no live hold that wrote
// info, it is gone. It returns what Inspect showed.
func wantInfoTTL(t *testing.T, rdb redis.UniversalClient, c *lock.Client, key string) lock.Info {
	t.Helper()
	holders := lockKey(key) + ":holders"
	before := pttl(t, rdb, holders)
	info, err := c.Inspect(context.Background(), key)
	must(t, "Inspect()", err)
	after := pttl(t, rdb, holders)
	var longest, longestInfo time.Duration
	for _, h := range info.Holders {
		longest = max(longest, h.TTL)
		if !h.Since.IsZero() {
			longestInfo = max(longestInfo, h.TTL)
		}
	}
	switch {
	case longestInfo == 0 && after != -2:
		t.Fatalf("holder info PTTL %v with no live hold that wrote info (%+v), want no hash", after, info)
	case longestInfo > 0 && (before <= 0 || before+infoSlack < longestInfo):
		t.Fatalf("holder info PTTL %v, want a TTL of at least the longest hold's %v", before, longestInfo)
	case after > longest+infoSlack:
		t.Fatalf("holder info PTTL %v outlives every hold (longest %v)", after, longest)
	}
	return info
}

// wantHolderInfo fails unless info shows l's hold with this process's
// holder info and metadata md.
func wantHolderInfo(t *testing.T, info lock.Info, l *lock.Lock, md string) {
	t.Helper()
	host, _ := os.Hostname()
	for _, h := range info.Holders {
		if h.Token != l.Token() {
			continue
		}
		if h.Fence != l.Fence() || h.Host != host || h.PID != os.Getpid() || h.Metadata != md || h.Owner != "" ||
			time.Since(h.Since).Abs() > time.Minute {
			t.Fatalf("holder %+v, want fence %d, host %q, pid %d, metadata %q, since about now",
				h, l.Fence(), host, os.Getpid(), md)
		}
		return
	}
	t.Fatalf("Inspect() = %+v: no holder %q", info, l.Token())
}

// releaseShown checks Inspect shows l's holder info with metadata md and
// the hash's TTL in step, releases l, and checks the hash again.
func releaseShown(t *testing.T, rdb redis.UniversalClient, c *lock.Client, l *lock.Lock, md string) {
	t.Helper()
	wantHolderInfo(t, wantInfoTTL(t, rdb, c, l.Key()), l, md)
	must(t, "Release()", l.Release(context.Background()))
	wantInfoTTL(t, rdb, c, l.Key())
}

// wantInfoFields fails unless key's holder-info hash has n fields.
func wantInfoFields(t *testing.T, rdb redis.UniversalClient, key string, n int64) {
	t.Helper()
	got, err := rdb.HLen(context.Background(), lockKey(key)+":holders").Result()
	must(t, "HLEN holders", err)
	if got != n {
		t.Fatalf("holder info has %d fields, want %d", got, n)
	}
}

// holdKinds are the kinds with many holds on one key: each gives a new
// hold of key (a reader, or a permit of 3) from c with opts.
var holdKinds = []struct {
	name string
	hold func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock
}{
	{"rwlock", func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock {
		return c.NewRWLock(key, opts...).ReadLock()
	}},
	{"semaphore", func(c *lock.Client, key string, opts ...lock.Option) *lock.Lock {
		return c.NewSemaphore(key, 3, opts...).Permit()
	}},
}

// TestHolderInfo_kinds: a reader's and a permit's holder info (fence,
// host, pid, since, metadata, byte for byte) is written by its acquire and
// shown by Inspect, on one server and on a 3-master cluster; the hash
// lives as long as the longest hold and no longer — after a release of the
// longest, an Extend that lengthens or shortens one, a ForceReleaseToken —
// and goes with the last release and with ForceRelease.
func TestHolderInfo_kinds(t *testing.T) {
	t.Parallel()
	eachRealTarget(t, func(t *testing.T, newRDB func(t *testing.T) redis.UniversalClient) {
		ctx := context.Background()
		rdb := newRDB(t)
		short := newClient(t, rdb, lock.WithTTL(time.Minute))
		long := newClient(t, newRDB(t), lock.WithTTL(time.Hour))
		const md = "req 7 trace=ab ✓\x1fafter a separator"
		for _, kind := range holdKinds {
			key := keyFor(t) + ":" + kind.name
			a := kind.hold(short, key, lock.WithMetadata(md))
			b := kind.hold(long, key, lock.WithHolderInfo(true))
			must(t, "a.Acquire()", a.Acquire(ctx))
			must(t, "b.Acquire()", b.Acquire(ctx))
			info := wantInfoTTL(t, rdb, short, key)
			wantHolderInfo(t, info, a, md)
			wantHolderInfo(t, info, b, "")

			// The one-hour hold goes: the hash now lives a minute.
			must(t, "b.Release()", b.Release(ctx))
			wantInfoFields(t, rdb, key, 1)
			wantInfoTTL(t, rdb, short, key)
			must(t, "a.Extend(2m)", a.Extend(ctx, 2*time.Minute))
			wantInfoTTL(t, rdb, short, key)
			must(t, "a.Extend(10s)", a.Extend(ctx, 10*time.Second))
			wantInfoTTL(t, rdb, short, key)
			must(t, "a.Release()", a.Release(ctx))
			wantInfoTTL(t, rdb, short, key)

			// Force-released: one token, then the rest.
			a, b = kind.hold(short, key, lock.WithMetadata(md)), kind.hold(long, key, lock.WithMetadata("b"))
			must(t, "a.Acquire()", a.Acquire(ctx))
			must(t, "b.Acquire()", b.Acquire(ctx))
			must(t, "ForceReleaseToken(b)", lock.ForceReleaseToken(short, ctx, key, b.Token()))
			wantInfoFields(t, rdb, key, 1)
			wantHolderInfo(t, wantInfoTTL(t, rdb, short, key), a, md)
			b = kind.hold(long, key, lock.WithMetadata("b"))
			must(t, "b.Acquire() again", b.Acquire(ctx))
			must(t, "ForceRelease()", short.ForceRelease(ctx, key))
			wantInfoTTL(t, rdb, short, key)
			wantInfoFields(t, rdb, key, 0)
		}
	})
}

// TestHolderInfo_writer: a writer's holder info is written and shown, and
// goes with its release.
func TestHolderInfo_writer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	key := keyFor(t)
	w := c.NewRWLock(key, lock.WithMetadata("migration 12")).WriteLock()
	must(t, "w.Acquire()", w.Acquire(ctx))
	info, err := c.Inspect(ctx, key)
	must(t, "Inspect()", err)
	if info.Kind != "rwlock" || len(info.Holders) != 1 || w.Fence() == 0 {
		t.Fatalf("Inspect() = %+v, want an rwlock with one holder, fence %d", info, w.Fence())
	}
	releaseShown(t, tg.rdb, c, w, "migration 12")
}

// TestHolderInfo_off: by default a reader, a writer and a permit write no
// holder info; Inspect still shows their tokens, fences and TTLs.
func TestHolderInfo_off(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	rw := c.NewRWLock(key + ":rw")
	for _, l := range []*lock.Lock{rw.ReadLock(), rw.WriteLock(), c.NewSemaphore(key+":sem", 2).Permit()} {
		must(t, "Acquire()", l.Acquire(ctx))
		if n := tg.rdb.Exists(ctx, lockKey(l.Key())+":holders").Val(); n != 0 {
			t.Fatalf("%s: holder info written by default", l.Key())
		}
		info, err := c.Inspect(ctx, l.Key())
		must(t, "Inspect()", err)
		if len(info.Holders) != 1 || info.Holders[0].Token != l.Token() || info.Holders[0].Fence != 0 ||
			info.Holders[0].Host != "" || info.Holders[0].TTL <= 0 {
			t.Fatalf("Inspect() = %+v, want the token and TTL only", info)
		}
		must(t, "Release()", l.Release(ctx))
	}
}

// TestHolderInfo_crashed: a hold that is never released (its watchdog
// off, as if its process died) leaves no holder info Inspect shows once
// it expires; its field goes when a script that walks the holds finds it
// expired, and a hash whose only hold expired goes with it.
func TestHolderInfo_crashed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	crashed := newClient(t, tg.rdb, lock.WithTTL(lock.MinTTL), lock.WithWatchdog(false), lock.WithHolderInfo(true))
	live := newClient(t, tg.rdb, lock.WithTTL(time.Minute), lock.WithHolderInfo(true))
	for _, kind := range holdKinds {
		key := keyFor(t) + ":" + kind.name
		gone := kind.hold(crashed, key)
		must(t, "crashed Acquire()", gone.Acquire(ctx))
		if d := pttl(t, tg.rdb, lockKey(key)+":holders"); d <= 0 || d > lock.MinTTL {
			t.Fatalf("%s: holder info PTTL %v beside a %v hold", kind.name, d, lock.MinTTL)
		}
		// Alone, its info goes with its TTL.
		waitUntil(t, kind.name+": the hash to expire", func() bool {
			return tg.rdb.Exists(ctx, lockKey(key)+":holders").Val() == 0
		})

		// Beside a live hold, Inspect stops showing it at its expiry; a
		// release (which walks the holds) drops its field.
		gone = kind.hold(crashed, key)
		a := kind.hold(live, key)
		must(t, "crashed Acquire()", gone.Acquire(ctx))
		must(t, "a.Acquire()", a.Acquire(ctx))
		waitUntil(t, kind.name+": the crashed hold to expire", func() bool {
			info, err := live.Inspect(ctx, key)
			return err == nil && len(info.Holders) == 1
		})
		wantHolderInfo(t, wantInfoTTL(t, tg.rdb, live, key), a, "")
		b := kind.hold(live, key)
		must(t, "b.Acquire()", b.Acquire(ctx))
		must(t, "a.Release()", a.Release(ctx))
		wantInfoFields(t, tg.rdb, key, 1)
		releaseShown(t, tg.rdb, live, b, "")
	}
}

// TestHolderInfo_renewed: renewal keeps a reader's and a permit's holder
// info alive past the TTL it was written with.
func TestHolderInfo_renewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	ttl := time.Second
	c := newClient(t, tg.rdb, lock.WithTTL(ttl), lock.WithMetadata("renewed"))
	for _, kind := range holdKinds {
		key := keyFor(t) + ":" + kind.name
		l := kind.hold(c, key)
		must(t, "Acquire()", l.Acquire(ctx))
		first := wantInfoTTL(t, tg.rdb, c, key)
		// Once a renewal has moved the hold's end a quarter TTL past its
		// first, a hash left at its first TTL would be that much short.
		end := time.Now().Add(first.Holders[0].TTL)
		waitUntil(t, kind.name+": a renewal", func() bool {
			d, err := l.TTL(ctx)
			return err == nil && time.Now().Add(d).After(end.Add(ttl/4))
		})
		releaseShown(t, tg.rdb, c, l, "renewed")
	}
}

// TestHolderInfo_permitHandoff: a permit handed to a waiter of the same
// Semaphore carries the waiter's holder info, not the releaser's.
func TestHolderInfo_permitHandoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	key := keyFor(t)
	s := c.NewSemaphore(key, 1, lock.WithMetadata("quota"), lock.WithBackoff(time.Minute, time.Minute))
	a, b := s.Permit(), s.Permit()
	must(t, "a.Acquire()", a.Acquire(ctx))
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx) }()
	waitUntil(t, "the waiter to wait", func() bool { return lock.IdleWaiters(c, key) == 1 })
	must(t, "a.Release()", a.Release(ctx))
	must(t, "b.Acquire()", <-done)
	wantInfoFields(t, tg.rdb, key, 1)
	releaseShown(t, tg.rdb, c, b, "quota")
}

// TestHolderInfo_mutexHandoffFromPlainHolder: a mutex hold handed by a
// release in this process to a waiter that writes holder info
// ([WithMetadata]) carries the waiter's info, whether or not the releasing
// lock writes any.
func TestHolderInfo_mutexHandoffFromPlainHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	key := keyFor(t)
	a := c.NewLock(key)
	b := c.NewLock(key, lock.WithMetadata("job 7"), lock.WithBackoff(time.Minute, time.Minute))
	must(t, "a.Acquire()", a.Acquire(ctx))
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx) }()
	waitIdle(t, c, key, 1)
	must(t, "a.Release()", a.Release(ctx))
	must(t, "b.Acquire()", <-done)
	if got := tg.rdb.Get(ctx, lockKey(key)).Val(); got != b.Token() {
		t.Fatalf("Redis has %q, want the handed-over hold's token %q", got, b.Token())
	}
	info, err := c.Inspect(ctx, key)
	must(t, "Inspect()", err)
	wantHolderInfo(t, info, b, "job 7")
	must(t, "b.Release()", b.Release(ctx))
}

// TestHolderInfo_mixedSettings: when a hold that wrote holder info expires
// and a holder that writes none drops it (its scripts get no holder-info
// hash), the field it leaves is swept out by the next release that writes
// holder info.
func TestHolderInfo_mixedSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	crashed := newClient(t, tg.rdb, lock.WithTTL(lock.MinTTL), lock.WithWatchdog(false), lock.WithHolderInfo(true))
	plain := newClient(t, tg.rdb, lock.WithTTL(time.Minute))
	info := newClient(t, tg.rdb, lock.WithTTL(time.Minute), lock.WithHolderInfo(true))
	for _, kind := range holdKinds {
		key := keyFor(t) + ":" + kind.name
		gone, b, c := kind.hold(crashed, key), kind.hold(info, key), kind.hold(info, key)
		for _, l := range []*lock.Lock{gone, b, c} {
			must(t, "Acquire()", l.Acquire(ctx))
		}
		waitUntil(t, kind.name+": the crashed hold to expire", func() bool {
			info, err := plain.Inspect(ctx, key)
			return err == nil && len(info.Holders) == 2
		})
		// A reader's release, a permit's acquire, without holder info:
		// each drops the expired hold and leaves its field.
		p := kind.hold(plain, key)
		must(t, "plain Acquire()", p.Acquire(ctx))
		must(t, "plain Release()", p.Release(ctx))
		wantInfoFields(t, tg.rdb, key, 3)
		must(t, "b.Release()", b.Release(ctx))
		wantInfoFields(t, tg.rdb, key, 1)
		releaseShown(t, tg.rdb, info, c, "")
	}
}
