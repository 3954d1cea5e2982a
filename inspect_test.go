package lock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// TestClient_Inspect_mutex: a hold's holder info (token, fence, host, pid,
// since, metadata, TTL) is written in its acquire and read back by Inspect;
// the key's fence is the hold's; a released key inspects as free and
// leaves no holder info behind.
func TestClient_Inspect_mutex(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newWarmClient(t, tg.rdb)
		key := keyFor(t)
		before := time.Now().Add(-2 * time.Second) // server and test share a clock, in ms
		l := c.NewLock(key, lock.WithTTL(10*time.Second), lock.WithMetadata("req-42 trace=abc"))
		must(t, "Acquire()", l.Acquire(ctx))
		info, err := c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if info.Key != key || info.Kind != "mutex" || len(info.Holders) != 1 || info.Fence != l.Fence() || info.Waiters != 0 {
			t.Fatalf("Inspect() = %+v, want key %q, kind mutex, one holder, fence %d", info, key, l.Fence())
		}
		h := info.Holders[0]
		host, _ := os.Hostname()
		if h.Token != l.Token() || h.Fence != l.Fence() || h.Host != host || h.PID != os.Getpid() ||
			h.Metadata != "req-42 trace=abc" || h.Owner != "" {
			t.Fatalf("holder = %+v, want token %q, fence %d, host %q, pid %d, the metadata", h, l.Token(), l.Fence(), host, os.Getpid())
		}
		if h.TTL <= 0 || h.TTL > 10*time.Second {
			t.Fatalf("holder TTL = %v, want in (0, 10s]", h.TTL)
		}
		if h.Since.Before(before) || h.Since.After(time.Now().Add(2*time.Second)) {
			t.Fatalf("holder since %v, want about now", h.Since)
		}
		// The holder info lives as long as the hold, and an Extend
		// lengthens both.
		must(t, "Extend()", l.Extend(ctx, time.Minute))
		if d := tg.rdb.PTTL(ctx, lockKey(key)+":holders").Val(); d <= 10*time.Second {
			t.Fatalf("holder info PTTL after Extend(1m) = %v, want > 10s", d)
		}
		must(t, "Release()", l.Release(ctx))
		info, err = c.Inspect(ctx, key)
		must(t, "Inspect() of a free key", err)
		if info.Key != key || info.Kind != "" || len(info.Holders) != 0 {
			t.Fatalf("Inspect() of a free key = %+v, want only the key", info)
		}
		if n := tg.rdb.Exists(ctx, lockKey(key)+":holders").Val(); n != 0 {
			t.Fatal("holder info left behind by Release")
		}
	})
}

// TestClient_Inspect_reentrant: each nested hold of one owner is a holder
// of its own, with the owner id; releasing one drops its holder info only.
func TestClient_Inspect_reentrant(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb, lock.WithOwner("agent-7"), lock.WithHolderInfo(true))
		key := keyFor(t)
		a, b := c.NewLock(key), c.NewLock(key)
		must(t, "Acquire() a", a.Acquire(ctx))
		must(t, "Acquire() b", b.Acquire(ctx))
		info, err := c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if info.Kind != "mutex" || len(info.Holders) != 2 || info.Fence != a.Fence() {
			t.Fatalf("Inspect() = %+v, want a mutex with 2 holders, fence %d", info, a.Fence())
		}
		for _, h := range info.Holders {
			if h.Owner != "agent-7" || !strings.HasPrefix(h.Token, "agent-7#") || h.Fence != a.Fence() || h.PID != os.Getpid() {
				t.Fatalf("holder = %+v, want owner agent-7, a hold id, fence %d", h, a.Fence())
			}
		}
		must(t, "Release() a", a.Release(ctx))
		info, err = c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if len(info.Holders) != 1 || info.Holders[0].Owner != "agent-7" {
			t.Fatalf("Inspect() after one release = %+v, want one holder with its info", info)
		}
		if n := tg.rdb.HLen(ctx, lockKey(key)+":holders").Val(); n != 1 {
			t.Fatalf("holder info has %d fields after one of two releases, want 1", n)
		}
		must(t, "Release() b", b.Release(ctx))
	})
}

// TestClient_Inspect_noHolderInfo: by default, and with
// WithHolderInfo(false) even beside WithMetadata, nothing but the lock is
// written; Inspect still shows the token, fence and TTL.
func TestClient_Inspect_noHolderInfo(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		d := c.NewLock(key + ":default")
		must(t, "Acquire() default", d.Acquire(ctx))
		defer d.Release(ctx)
		if n := tg.rdb.Exists(ctx, lockKey(key+":default")+":holders").Val(); n != 0 {
			t.Fatal("holder info written by default")
		}
		c = newClient(t, tg.rdb, lock.WithHolderInfo(false), lock.WithMetadata("m"))
		l := c.NewLock(key)
		must(t, "Acquire()", l.Acquire(ctx))
		defer l.Release(ctx)
		if n := tg.rdb.Exists(ctx, lockKey(key)+":holders").Val(); n != 0 {
			t.Fatal("holder info written with WithHolderInfo(false)")
		}
		info, err := c.Inspect(ctx, key)
		must(t, "Inspect()", err)
		if len(info.Holders) != 1 || info.Holders[0].Token != l.Token() || info.Holders[0].Host != "" ||
			info.Fence != l.Fence() || info.Holders[0].TTL <= 0 {
			t.Fatalf("Inspect() = %+v, want the token, fence and TTL only", info)
		}
	})
}

// TestClient_Inspect_handoff: a hold handed to a waiter of the same Client
// carries the waiter's holder info, not the releaser's.
func TestClient_Inspect_handoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := realTarget(t)
	c := newClient(t, tg.rdb)
	key := keyFor(t)
	a := c.NewLock(key, lock.WithMetadata("first"))
	must(t, "Acquire() a", a.Acquire(ctx))
	b := c.NewLock(key, lock.WithMetadata("second"), lock.WithBackoff(time.Minute, time.Minute))
	done := make(chan error, 1)
	go func() { done <- b.Acquire(ctx) }()
	waitUntil(t, "the waiter to wait", func() bool { return lock.IdleWaiters(c, key) == 1 })
	must(t, "Release() a", a.Release(ctx))
	must(t, "Acquire() b", <-done)
	defer b.Release(ctx)
	info, err := c.Inspect(ctx, key)
	must(t, "Inspect()", err)
	if len(info.Holders) != 1 || info.Holders[0].Token != b.Token() || info.Holders[0].Metadata != "second" ||
		info.Holders[0].Fence != b.Fence() {
		t.Fatalf("Inspect() after a handoff = %+v, want b's token %q, metadata and fence %d", info, b.Token(), b.Fence())
	}
}

// TestClient_Inspect_invalid: bad input and foreign values are ErrInvalid.
func TestClient_Inspect_invalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := miniTarget(t)
	c := newClient(t, tg.rdb)
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Inspect(\"\") error = %v, want ErrInvalid", err)
	}
	if _, err := (&lock.Client{}).Inspect(ctx, "k"); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("zero Client Inspect() error = %v, want ErrInvalid", err)
	}
	var nilClient *lock.Client
	if _, err := nilClient.Inspect(ctx, "k"); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("nil Client Inspect() error = %v, want ErrInvalid", err)
	}
	tg.rdb.RPush(ctx, lockKey("list"), "x")
	if _, err := c.Inspect(ctx, "list"); !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "list") {
		t.Fatalf("Inspect() of a list error = %v, want ErrInvalid naming the type", err)
	}
}
